"""`jetbench daemon`, `status`, `install-service`, `uninstall-service` (thin: the work is in
jetbench.daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..ownership.wire import DEFAULT_SOCKET
from .common import beyond_power_mode_option, open_root, print_json

_SOCKET_HELP = "The control socket."


def daemon(
    ctx: typer.Context,
    profile: Optional[str] = typer.Option(None, "--profile", "-p",
                                          metavar="PROFILE", help="Profile to hold: a "
                                          "name (see `jetbench profiles`) or a TOML file. "
                                          "None: monitor only."),
    socket: Path = typer.Option(DEFAULT_SOCKET, "--socket", metavar="PATH", help=_SOCKET_HELP),
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          metavar="HOST:PORT", help="Serve Prometheus metrics "
                                          "on HOST:PORT, e.g. 127.0.0.1:9101."),
    interval: str = typer.Option("5s", "--interval",
                                 metavar="DURATION", help="How often the clocks are read "
                                 "back (and re-pinned if something moved them)."),
    client_timeout: str = typer.Option("5s", "--client-timeout", hidden=True,
                                       help="Disconnect control clients idle this long."),
    lease_stop_wait: str = typer.Option("20s", "--lease-stop-wait", hidden=True,
                                        help="On SIGTERM, how long a borrower gets to put "
                                             "the board back (tests shorten it)."),
    sim_kernel: bool = typer.Option(True, "--sim-kernel/--no-sim-kernel", hidden=True,
                                    help="On a simulated board, run its simulated kernel "
                                         "in-process (off: `jetbench sim run` does it)."),
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """The systemd service's entry point, in the foreground: pin the profile, re-pin on drift,
    serve status and metrics; restore the board on SIGTERM/SIGINT, reload on SIGHUP."""
    from ..daemon.service import DaemonConfig, run_daemon
    from ..units import parse_duration_s

    config = DaemonConfig(profile=profile, socket_path=socket, metrics=metrics,
                          interval_s=parse_duration_s(interval),
                          client_timeout_s=parse_duration_s(client_timeout),
                          lease_stop_wait_s=parse_duration_s(lease_stop_wait),
                          sim_kernel=sim_kernel, beyond_power_mode=beyond_power_mode)
    code = run_daemon(open_root(ctx), config)
    if code:
        raise typer.Exit(code)


def status(
    socket: Path = typer.Option(DEFAULT_SOCKET, "--socket", metavar="PATH", help=_SOCKET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's status document."),
) -> None:
    """Ask the running daemon: what it holds, clocks, temperatures, power, re-pins."""
    from ..errors import HardwareError
    from ..ownership.client import request
    from .render import kv

    reply = request(socket, "status")
    if as_json:
        print_json(reply)
        return
    if not reply.get("ok"):
        raise HardwareError(f"the daemon answered: {reply.get('message')}")
    from ..units import format_hz
    from .common import console

    counters = reply.get("counters", {})
    rows = [
        ("state", reply.get("summary", "")),
        ("board", f"{reply['board']['model']} ({reply['board']['family']})"
         + (" SIMULATED (not hardware)" if reply.get("simulated") else "")),
        ("profile", reply.get("profile") or "-"),
        ("power mode", (reply.get("power_mode") or {}).get("text") or "-"),
        ("since", f"{reply.get('started')} (pid {reply.get('pid')})"),
        ("drift re-pins", str(counters.get("repins", 0))),
        ("throttling", "; ".join(reply.get("throttle_reasons") or []) or "no"),
    ]
    if reply.get("below_pin"):  # a fact without thermal evidence: said as just that
        rows.append(("below its pin", "; ".join(reply["below_pin"])))
    lease = reply.get("lease")
    if isinstance(lease, dict):
        rows.append(("lent to", f"{lease.get('who')} (pid {lease.get('pid')}, since "
                                f"{lease.get('since')}): not re-pinning until it ends"))
    for c in reply.get("clocks", []):
        rows.append((f"{c['domain']} {c['name']}", f"{format_hz(c['cur_hz'])} "
                     f"(min {format_hz(c['min_hz'])}, max {format_hz(c['max_hz'])})"))
    if reply.get("gpu_load_pct") is not None:
        rows.append(("gpu load", f"{reply['gpu_load_pct']:.1f} %"))
    for zone, temp in sorted(reply.get("temperatures_c", {}).items()):
        rows.append((f"temp {zone}", f"{temp:.1f} C"))
    for r in reply.get("rails", []):
        watts = "-" if r["power_w"] is None else f"{r['power_w']:.2f} W"
        rows.append((f"power {r['name']}", f"{watts} ({r['point']})"))
    if reply.get("metrics"):
        rows.append(("metrics", f"http://{reply['metrics']}/metrics"))
    if reply.get("last_error"):
        rows.append(("last error", reply["last_error"]))
    kv(console(), rows, title="jetbench daemon")


def install_service(
    profile: Optional[str] = typer.Option(None, "--profile", "-p",
                                          metavar="PROFILE", help="Profile the service "
                                          "holds (written to /etc/default/jetbench)."),
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          metavar="HOST:PORT", help="HOST:PORT for metrics."),
    interval: Optional[str] = typer.Option(None, "--interval",
                                           metavar="DURATION", help="Read-back interval."),
    executable: Optional[Path] = typer.Option(None, "--executable",
                                              metavar="PATH", help="The jetbench "
                                              "executable ExecStart= runs (default: this one)."),
    dest: Path = typer.Option(Path("/"), "--dest",
                              metavar="DIR", help="Install under this root (image "
                              "builds); commands run only for /."),
    no_start: bool = typer.Option(False, "--no-start", help="Enable, but do not start now."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be done."),
) -> None:
    """Install jetbench.service and the udev rules, create the jetbench group, enable and
    start the service."""
    from ..daemon.install import install

    exe = str(executable) if executable else _this_executable()
    _print_actions(install(dest, exe, profile=profile, metrics=metrics, interval=interval,
                           start=not no_start, dry_run=dry_run), dry_run)


def uninstall_service(
    dest: Path = typer.Option(Path("/"), "--dest",
                              metavar="DIR", help="Remove from under this root."),
    remove_group: bool = typer.Option(False, "--remove-group", help="Also delete the "
                                      "jetbench group."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be done."),
) -> None:
    """Stop and disable the service (the board is restored on stop), remove unit and rules."""
    from ..daemon.install import uninstall

    _print_actions(uninstall(dest, dry_run=dry_run, remove_group=remove_group), dry_run)


def _this_executable() -> str:
    import os
    import shutil
    import sys

    from ..errors import UsageError

    if os.path.basename(sys.argv[0]) == "jetbench" and os.path.isfile(sys.argv[0]):
        return os.path.abspath(sys.argv[0])
    found = shutil.which("jetbench")
    if found is None:
        raise UsageError("cannot tell where the jetbench executable is",
                         hint="pass --executable /path/to/jetbench")
    return found


def _print_actions(actions, dry_run: bool = False) -> None:
    if dry_run:
        typer.echo("dry run: nothing below was done")
    for action in actions:
        typer.echo(f"{action.kind:7} {action.what}")
