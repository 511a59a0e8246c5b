"""`jetbench daemon`, `status`, `install-service`, `uninstall-service` (thin: the work is in
jetbench.daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple, cast

import typer

from ..ownership.wire import DEFAULT_SOCKET
from .common import beyond_power_mode_option, open_root, print_json

if TYPE_CHECKING:
    from ..daemon.held import StatusDoc

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
    from .common import console

    # The daemon's own document (daemon/held.py); one of another version may lack a key, so
    # each is read with .get.
    kv(console(), _status_rows(cast("StatusDoc", reply)), title="jetbench daemon")


def _status_rows(doc: StatusDoc) -> List[Tuple[str, str]]:
    from ..units import format_hz

    board = doc.get("board") or {}
    mode = doc.get("power_mode")
    rows = [
        ("state", doc.get("summary", "")),
        ("board", f"{board.get('model') or '-'} ({board.get('family') or '-'})"
         + (" SIMULATED (not hardware)" if doc.get("simulated") else "")),
        ("profile", doc.get("profile") or "-"),
        ("power mode", (mode.get("text") if mode else None) or "-"),
        ("since", f"{doc.get('started')} (pid {doc.get('pid')})"),
        ("drift re-pins", str(doc.get("counters", {}).get("repins", 0))),
        ("throttling", "; ".join(doc.get("throttle_reasons") or []) or "no"),
    ]
    below = doc.get("below_pin")
    if below:  # a fact without thermal evidence: said as just that
        rows.append(("below its pin", "; ".join(below)))
    lease = doc.get("lease")
    if lease:
        rows.append(("lent to", f"{lease.get('who')} (pid {lease.get('pid')}, since "
                                f"{lease.get('since')}): not re-pinning until it ends"))
    for c in doc.get("clocks", []):
        rows.append((f"{c.get('domain')} {c.get('name')}", f"{format_hz(c.get('cur_hz'))} "
                     f"(min {format_hz(c.get('min_hz'))}, max {format_hz(c.get('max_hz'))})"))
    load = doc.get("gpu_load_pct")
    if load is not None:
        rows.append(("gpu load", f"{load:.1f} %"))
    for zone, temp in sorted(doc.get("temperatures_c", {}).items()):
        rows.append((f"temp {zone}", f"{temp:.1f} C"))
    for r in doc.get("rails", []):
        watts = "-" if r.get("power_w") is None else f"{r.get('power_w'):.2f} W"
        rows.append((f"power {r.get('name')}", f"{watts} ({r.get('point')})"))
    if doc.get("metrics"):
        rows.append(("metrics", f"http://{doc.get('metrics')}/metrics"))
    error = doc.get("last_error")
    if error:
        rows.append(("last error", error))
    return rows


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
