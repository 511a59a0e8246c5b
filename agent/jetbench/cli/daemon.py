"""`jetbench daemon`, `status`, `install-service`, `uninstall-service` (thin: the work is in
jetbench.daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple, Union, cast

import typer

from ..ownership.wire import DEFAULT_SOCKET
from .common import beyond_power_mode_option, open_root, print_json

if TYPE_CHECKING:
    from ..daemon.held import StatusDoc
    from ..daemon.live_log import LogSource
    from ..daemon.live_rate import PrometheusSource
    from ..daemon.live_tuning import TuneConfig
    from ..daemon.phase_windows import PhaseCounter
    from ..daemon.tune_doc import PointDoc, TuneStatusDoc

_SOCKET_HELP = "The control socket (or $JETBENCH_SOCKET)."
_TUNE = "Live tuning"


def daemon(
    ctx: typer.Context,
    profile: Optional[str] = typer.Option(None, "--profile", "-p",
                                          metavar="PROFILE", help="Profile to hold: a "
                                          "name (see `jetbench profiles`) or a TOML file. "
                                          "None: monitor only."),
    socket: Path = typer.Option(DEFAULT_SOCKET, "--socket", metavar="PATH", help=_SOCKET_HELP,
                                envvar="JETBENCH_SOCKET"),
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
    meter: Optional[List[str]] = typer.Option(
        None, "--meter", metavar="SPEC", help="Where power is read (repeatable; measure's "
        "specs: auto, ina3221, rapl, nvml, jtop, PROTOCOL:PORT[?options]; calibrated: the "
        "wall from the board's calibration). The first is the total --tune divides by. "
        "Opened before anything is pinned."),
    tune: bool = typer.Option(False, "--tune", rich_help_panel=_TUNE,
                              help="Tune the live workload: the clocks with the most items "
                                   "per joule its rate shows, under --constraint, held and "
                                   "checked (docs/daemon.md)."),
    throughput_from: Optional[str] = typer.Option(
        None, "--throughput-from", metavar="SOURCE", rich_help_panel=_TUNE,
        help="The workload's counter of items done (prometheus:URL#METRIC), or its log "
             "(log:PATH#regex:PATTERN or journal:UNIT#regex:PATTERN: items/s)."),
    latency_from: Optional[str] = typer.Option(
        None, "--latency-from", metavar="SOURCE", rich_help_panel=_TUNE,
        help="A latency histogram (prometheus:URL#METRIC), for latency_p99_ms<=N and "
             "miss_rate<=SHARE."),
    busy_from: Optional[str] = typer.Option(
        None, "--busy-from", metavar="SOURCE", rich_help_panel=_TUNE,
        help="A counter of the seconds the workload spent serving (prometheus:URL#METRIC; "
             "its unit from its name: _seconds, _ms, _us), one server's: each point's "
             "capacity read at any load (the governor's models, docs/daemon.md)."),
    deadline: Optional[str] = typer.Option(
        None, "--deadline", metavar="DURATION", rich_help_panel=_TUNE,
        help="An item's deadline (e.g. 50ms), for miss_rate<=SHARE: the share of items the "
             "histogram shows over it."),
    constraint: Optional[List[str]] = typer.Option(
        None, "--constraint", metavar="NAME>=V", rich_help_panel=_TUNE,
        help="items_per_s, power_w, latency_p99_ms, latency_p50_ms (>= or <=); "
             "demand>=SHARE: keep up with what arrives; miss_rate<=SHARE (with --deadline)."),
    tune_knobs: Optional[str] = typer.Option(
        None, "--tune-knobs", metavar="KNOBS", rich_help_panel=_TUNE,
        help="The clocks searched (gpu, emc, cpu); default: those the board has (a Jetson: "
             "gpu,emc; a PC's NVIDIA GPU: gpu)."),
    tune_gpu: int = typer.Option(
        0, "--tune-gpu", metavar="INDEX", min=0, rich_help_panel=_TUNE,
        help="On a host whose power is NVML's: the GPU (NVML index, nvidia-smi's) the workload "
             "runs on, whose power the items are divided by."),
    tune_window: str = typer.Option("10s", "--tune-window", metavar="DURATION",
                                    rich_help_panel=_TUNE, help="How long each point is "
                                    "measured."),
    tune_silence: Optional[str] = typer.Option(
        None, "--tune-silence", metavar="DURATION", rich_help_panel=_TUNE,
        help="A log with no new value this long freezes the search (3 windows)."),
    phases: Optional[str] = typer.Option(
        None, "--phases", metavar="PHASES", rich_help_panel=_TUNE,
        help="A point per workload phase (NAME:COUNTER,...), told apart by which counter on "
             "the --throughput-from page moves, e.g. 'prefill:vllm:prompt_tokens_total, "
             "decode:vllm:generation_tokens_total'."),
) -> None:
    """The systemd service's entry point, in the foreground: pin the profile, re-pin on drift,
    serve status and metrics; restore the board on SIGTERM/SIGINT, reload on SIGHUP."""
    from ..daemon.service import DaemonConfig, run_daemon
    from ..units import parse_duration_s

    tuning = _tune_config(tune, throughput_from, latency_from, constraint or [], tune_knobs,
                          tune_window, tune_silence, tune_gpu, deadline, busy_from)
    config = DaemonConfig(profile=profile, socket_path=socket, metrics=metrics,
                          meters=_meters(meter or []), phases=_phases(phases, tuning),
                          interval_s=parse_duration_s(interval),
                          client_timeout_s=parse_duration_s(client_timeout),
                          lease_stop_wait_s=parse_duration_s(lease_stop_wait),
                          sim_kernel=sim_kernel, beyond_power_mode=beyond_power_mode,
                          tune=tuning)
    code = run_daemon(open_root(ctx), config)
    if code:
        raise typer.Exit(code)


def _phases(text: Optional[str], tuning: Optional[TuneConfig]) -> Tuple[PhaseCounter, ...]:
    """--phases, checked before anything runs (UsageError)."""
    from ..daemon.live_rate import PrometheusSource
    from ..daemon.phase_windows import parse_phases
    from ..errors import UsageError

    if text is None:
        return ()
    if tuning is None:
        raise UsageError("--phases is for --tune only")
    if not isinstance(tuning.rate, PrometheusSource):
        raise UsageError("--phases reads its counters on a prometheus: --throughput-from page "
                         "(not a log)")
    if tuning.busy is not None:
        raise UsageError("--phases: not yet with --busy-from (each phase's search is the "
                         "first generation's, which does not read it)")
    if tuning.latency is not None or any(lim.name.startswith("latency") or
                                         lim.name == "miss_rate" for lim in tuning.limits):
        raise UsageError("--phases: not yet with --latency-from or a latency constraint",
                         hint="demand>=SHARE keeps each phase at that share of its speed at "
                              "the top (e.g. --constraint 'demand>=0.95')")
    return parse_phases(text, tuning.rate)


def _meters(specs: List[str]) -> Tuple[str, ...]:
    """--meter's specs, each checked as measure checks it (UsageError), before anything runs;
    `calibrated` is the daemon's own."""
    from ..daemon.rails import CALIBRATED
    from ..hw.meters.registry import parse_meter_spec

    for spec in specs:
        if spec.strip().lower() != CALIBRATED:
            parse_meter_spec(spec)
    return tuple(s.strip() for s in specs)


def _tune_config(tune: bool, throughput_from: Optional[str], latency_from: Optional[str],
                 constraints: List[str], knobs: Optional[str], window: str,
                 silence: Optional[str] = None, gpu_index: int = 0,
                 deadline: Optional[str] = None, busy_from: Optional[str] = None
                 ) -> Optional[TuneConfig]:
    """--tune's options, checked before the daemon touches anything (UsageError)."""
    from ..daemon.live_log import parse_log_source
    from ..daemon.live_rate import parse_source
    from ..daemon.live_tuning import TuneConfig
    from ..daemon.online_tuner import parse_limit
    from ..daemon.tail_judge import is_tail
    from ..errors import UsageError
    from ..run.tune.options import KNOBS
    from ..units import parse_duration_s

    given = [name for name, value in (("--throughput-from", throughput_from),
                                      ("--latency-from", latency_from),
                                      ("--constraint", constraints),
                                      ("--tune-silence", silence),
                                      ("--deadline", deadline),
                                      ("--busy-from", busy_from)) if value]
    if not tune:
        if given:
            raise UsageError(f"{given[0]} is for --tune only")
        return None
    if not throughput_from:
        raise UsageError("--tune needs --throughput-from prometheus:URL#METRIC (the "
                         "workload's counter of items done) or log:PATH#regex:PATTERN")
    limits = [parse_limit(text) for text in constraints]
    for limit in limits:
        if is_tail(limit) and not latency_from:
            raise UsageError(f"--constraint {limit} needs --latency-from (a histogram)")
        if limit.name == "miss_rate" and not deadline:
            raise UsageError(f"--constraint {limit} needs --deadline DURATION (e.g. 50ms): "
                             "what an item misses")
    deadline_ms = parse_duration_s(deadline) * 1000 if deadline else None
    if deadline_ms is not None and (deadline_ms <= 0 or not latency_from):
        raise UsageError(f"--deadline {deadline}: " + ("above zero" if deadline_ms <= 0 else
                         "read from a histogram: give --latency-from too"))
    names = None if knobs is None else tuple(k.strip() for k in knobs.split(",") if k.strip())
    if names is not None and (not names or any(k not in KNOBS for k in names)):
        raise UsageError(f"--tune-knobs {knobs!r}: expected some of {', '.join(KNOBS)}")
    window_s = parse_duration_s(window)
    if window_s < 1.0:
        raise UsageError(f"--tune-window {window}: at least 1 s (a window must count items)")
    silence_s = parse_duration_s(silence) if silence else None
    if silence_s is not None and silence_s < window_s:
        raise UsageError(f"--tune-silence {silence}: at least one window ({window})",
                         hint="a log that writes its rate every few seconds is silent for "
                              "less than a window between lines")
    if throughput_from.startswith(("log:", "journal:")):
        if latency_from or busy_from:
            raise UsageError(f"{'--latency-from' if latency_from else '--busy-from'} is read "
                             "only beside a prometheus: --throughput-from (not yet beside a "
                             "log)")
        rate: Union[PrometheusSource, LogSource] = parse_log_source(throughput_from)
    else:
        rate = parse_source(throughput_from)
    return TuneConfig(rate=rate,
                      latency=parse_source(latency_from, "--latency-from")
                      if latency_from else None,
                      limits=tuple(limits), knobs=names, window_s=window_s,
                      silent_after_s=silence_s, gpu_index=gpu_index, deadline_ms=deadline_ms,
                      busy=parse_source(busy_from, "--busy-from") if busy_from else None)


def status(
    socket: Path = typer.Option(DEFAULT_SOCKET, "--socket", metavar="PATH", help=_SOCKET_HELP,
                                envvar="JETBENCH_SOCKET"),
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
    rows = _status_rows(cast("StatusDoc", reply))
    con = console()
    kv(con, rows, title="jetbench daemon")
    if len(rows) > STATE_AGAIN_AFTER:  # taller than a terminal: the state is said last too
        con.print(f"state: {reply.get('summary', '')}", highlight=False,
                  soft_wrap=not con.is_terminal)


STATE_AGAIN_AFTER = 18  # status rows past which the state line scrolls off a 24-line terminal


def _tune_rows(tune: Optional[TuneStatusDoc]) -> List[Tuple[str, str]]:
    """--tune's phase, the point held and its figures, the best seen, the energy saved."""
    from ..units import format_hz

    if not tune:
        return []

    def point(p: Optional[PointDoc]) -> str:
        if not p:
            return "-"
        clocks = ", ".join(f"{k} {format_hz(v)}" for k, v in p.get("point_hz", {}).items())
        pct = p.get("items_per_s_uncertainty_pct")
        spread = f" +- {pct:.1f}%" if pct is not None else ""
        busy = p.get("busy_share")
        return (f"{clocks}: {p.get('items_per_s', 0):.3g} items/s{spread}, "
                f"{p.get('power_w', 0):.2f} W, {p.get('items_per_j', 0):.3g} items/J"
                + (f", busy {busy:.0%}" if busy is not None else ""))

    rows = [("tune", f"{tune.get('phase', '-')}: {tune.get('why', '')}"),
            ("tune source", f"{tune.get('source', '-')}; "
                            + (f"busy from {tune.get('busy_source')}; "
                               if tune.get("busy_source") else "")
                            + f"{', '.join(tune.get('constraints') or []) or 'no constraint'}"),
            ("tune held", point(tune.get("held"))),
            ("tune best seen", point(tune.get("best"))),
            ("tune windows", f"{tune.get('windows', 0)} of {tune.get('window_s', 0):g} s, "
                             f"{tune.get('windows_breaking_constraints', 0)} broke a "
                             "constraint"),
            ("energy saved", f"{tune.get('energy_saved_j', 0.0):.1f} J (estimate: "
                             "against the starting point)")]
    if tune.get("demand_per_s") is not None:
        rows.append(("tune demand", f"{tune.get('demand_per_s'):.3g} items/s (measured at the "
                                    "top of the space)"))
    if tune.get("paused"):
        rows.append(("tune paused", str(tune.get("paused"))))
    if tune.get("busy_unused"):
        rows.append(("tune busy not used", str(tune.get("busy_unused"))))
    if tune.get("source_faults"):
        rows.append(("tune source faults", f"{tune.get('source_faults')}, the latest: "
                                           f"{tune.get('source_fault')}"))
    return rows


def _phase_rows(tune: Optional[TuneStatusDoc]) -> List[Tuple[str, str]]:
    """--phases: which runs, and each phase's point, state and items (tokens) per joule."""
    from ..units import format_hz

    phases = cast(dict, tune or {}).get("workload_phases")
    if not phases:
        return []
    rows = [("phase now", f"{cast(dict, tune).get('workload_phase')} "
                          f"({cast(dict, tune).get('phase_switches', 0)} switches)")]
    total = sum(p.get("seconds_total") or 0.0 for p in phases.values()) or 1.0
    for name, p in phases.items():
        clocks = ", ".join(f"{k} {format_hz(v)}" for k, v in p.get("point_hz", {}).items())
        per_j = p.get("items_per_j")
        start = (p.get("at_start") or {}).get("items_per_j")
        rows.append((f"phase {name}", f"{p.get('state')} at {clocks}: "
                     + (f"{per_j:.3g} items/J" if per_j is not None else "- items/J")
                     + (f" ({start:.3g} at the start point)" if start is not None else "")
                     + f", {100 * (p.get('seconds_total') or 0.0) / total:.0f}% of the time"))
    return rows


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
    for said in doc.get("not_held") or []:  # measured: the running clock, not the knobs
        rows.append(("not held", said))
    below = doc.get("below_pin")
    if below:  # a fact without thermal evidence: said as just that
        rows.append(("below its pin", "; ".join(below)))
    lease = doc.get("lease")
    if lease:
        rows.append(("lent to", f"{lease.get('who')} (pid {lease.get('pid')}, since "
                                f"{lease.get('since')}): not re-pinning until it ends"))
    rows += _tune_rows(doc.get("tune"))
    rows += _phase_rows(doc.get("tune"))
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
        scope = f"; {r['scope']}, {r['basis']}" if r.get("scope") else ""
        rows.append((f"power {r.get('name')}", f"{watts} ({r.get('point')}{scope})"))
    source = doc.get("power_source")
    if source:  # what the daemon's power (and --tune's items/J) comes from (--meter)
        rows.append(("power source", f"{source.get('name')} ({source.get('source')}, "
                                     f"{source.get('point')}; {source.get('scope')}, "
                                     f"{source.get('basis')})"))
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
    log: Optional[List[str]] = typer.Option(None, "--log", metavar="PATH",
                                            help="A log --throughput-from reads: the unit may "
                                            "read its directory."),
    nvml: Optional[bool] = typer.Option(None, "--nvml/--no-nvml", help="Let the unit open the "
                                        "NVIDIA devices (default: where /dev/nvidiactl is)."),
    meters: bool = typer.Option(False, "--meters", help="Let the unit open USB-serial "
                                "meters."),
    no_start: bool = typer.Option(False, "--no-start", help="Enable, but do not start now."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be done."),
) -> None:
    """Install jetbench.service and the udev rules, create the jetbench group, enable and
    start the service."""
    from ..daemon.install import install

    exe = str(executable) if executable else _this_executable()
    _print_actions(install(dest, exe, profile=profile, metrics=metrics, interval=interval,
                           start=not no_start, dry_run=dry_run, logs=log or [], nvml=nvml,
                           meters=meters), dry_run)


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
