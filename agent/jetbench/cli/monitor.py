"""`jetbench monitor`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from .common import console, open_root, print_json


def monitor(
    ctx: typer.Context,
    meter: Optional[List[str]] = typer.Option(
        None, "--meter", "-m",
        metavar="SPEC", help="Power source (repeatable): auto, ina3221, rapl, nvml, jtop, "
        "none, or PROTOCOL:PORT[?options] (scpi, wt310, stream, um25c); ?interval=1ms "
        "reads a source that often, whatever --interval says. Default: auto."),
    interval: str = typer.Option("250ms", "--interval", "-i", metavar="DURATION",
                                 help="Sampling and refresh interval, e.g. 10ms, 0.5s; a bare "
                                 "number is milliseconds, as tegrastats' --interval."),
    duration: Optional[str] = typer.Option(
        None, "--duration", "-d",
        metavar="DURATION", help="Stop after this long, e.g. 30s (default: Ctrl-C)."),
    csv: Optional[Path] = typer.Option(None, "--csv",
                                       metavar="FILE", help="Append one row per interval: t_s, "
                                       "<channel>_w..., total_w (flushed as it goes)."),
    once: bool = typer.Option(False, "--once", help="Print one reading and exit."),
    lines: Optional[bool] = typer.Option(
        None, "--lines/--screen", help="One line per interval, like tegrastats (the default "
        "when the output is not a terminal: piped, or to a file), or a live screen (the "
        "default on a terminal; --once prints the table)."),
    as_json: bool = typer.Option(False, "--json", help="JSON: one document (with --once) or one "
                                 "line per interval."),
) -> None:
    """Live rails (W), module total, per-core CPU load, clocks, RAM, fan and temperatures:
    tegrastats, made readable. Ctrl-C ends it (exit 0).

    Examples: `jetbench monitor` (a live screen); `jetbench monitor --interval 1s > log.txt`
    (one line per second); `jetbench monitor --csv power.csv --duration 60s`."""
    from ..errors import UsageError
    from ..hw.meters.registry import open_sources
    from ..monitor import CsvLog, Monitor, line
    from ..open_board import open_board
    from ..sampling.sampler_process import ProcessSampler
    from ..units import parse_duration_s
    from .render import monitor_table

    interval_s = parse_duration_s(interval, bare="ms")  # tegrastats: --interval 250 is 250 ms
    if interval_s < 0.001:
        raise UsageError("--interval must be at least 1ms")
    duration_s = parse_duration_s(duration) if duration else None
    root = open_root(ctx)
    # One snapshot (--once) reads best as the table; a stream piped somewhere, as lines.
    line_mode = (not once and not sys.stdout.isatty()) if lines is None else lines
    with open_board(root) as board:
        sources = open_sources(meter or ["auto"], root, board.rails, board.total_rail)
        log = CsvLog(csv, board.simulated) if csv else None
        live = None
        try:
            with Monitor(root, board, ProcessSampler(sources, interval_s=interval_s),
                         sources) as mon:
                mon.wait_first()
                # --duration counts from the monitor's t=0 (its sampler started), not from the
                # command's start: opening the board and the sampler take a second or more.
                end = mon.t0 + duration_s if duration_s is not None else None
                if not once and not as_json and not line_mode:
                    from rich.live import Live

                    live = Live(console=console(), auto_refresh=False)
                    live.start()
                try:
                    while True:
                        row = mon.row()
                        if log:
                            log.write(row)
                        if as_json and once:
                            print_json(row.to_dict(board.simulated))
                        elif as_json:
                            sys.stdout.write(json.dumps(row.to_dict(board.simulated)) + "\n")
                            sys.stdout.flush()
                        elif once and not line_mode:
                            console().print(monitor_table(row, board, board.simulated))
                        elif line_mode:
                            sys.stdout.write(line(row, board, board.simulated) + "\n")
                            sys.stdout.flush()
                        else:
                            live.update(monitor_table(row, board, board.simulated), refresh=True)
                        if once or (end is not None and time.monotonic() >= end):
                            break
                        pause = max(interval_s, 0.1) if not line_mode else interval_s
                        time.sleep(pause if end is None else
                                   max(min(pause, end - time.monotonic()), 0))
                except KeyboardInterrupt:
                    pass  # Ctrl-C is how a monitor is stopped: a normal end (exit 0)
        finally:
            if live:
                live.stop()
            if log:
                log.close()
