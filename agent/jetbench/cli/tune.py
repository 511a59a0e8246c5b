"""`jetbench tune`: parse, call run/tune.tune, render. Takes measure's workload and window
options as they are (the same definitions, cli/measure.py)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import typer

from ..terminal import for_stream
from .common import WORKLOAD_PYTHON, beyond_power_mode_option, console, open_root, print_json
from .measure import (
    _BATCH,
    _CMD,
    _CMD_LOG,
    _DEVICE,
    _DURATION,
    _ITER,
    _JSON,
    _METER,
    _MODEL,
    _PRECISION,
    _PROVIDER,
    _SAMPLE_RATE,
    _SHAPE,
    _THROUGHPUT_FROM,
    _UNIT,
    _WAIT,
    _WARMUP,
    _options,
)

if TYPE_CHECKING:  # types only: --help never loads them
    from ..tune_documents import TuneDoc

_SEARCH = "Search"


def tune(
    ctx: typer.Context,
    model: str = _MODEL, precision: str = _PRECISION, batch: str = _BATCH,
    objective: List[str] = typer.Option(
        ["images_per_j"], "--objective", rich_help_panel=_SEARCH, metavar="NAME",
        help="What to optimise (repeatable: a Pareto front): images_per_j, images_per_s, "
             "latency_p99_ms, power_w, wall_images_per_j (see `calibrate`)."),
    constraint: List[str] = typer.Option(
        [], "--constraint", rich_help_panel=_SEARCH, metavar="NAME>=X",
        help="A requirement: items_per_s (images_per_s), items_per_j, latency_p99_ms, power_w, "
             "e.g. 'items_per_s>=30' (repeatable). A trial that breaks one is never chosen."),
    knobs: str = typer.Option("gpu", "--knobs", rich_help_panel=_SEARCH, metavar="KNOBS",
                              help="Clocks to search, from the board's own tables: gpu, emc, "
                                   "cpu (comma-separated)."),
    budget: int = typer.Option(20, "--budget", rich_help_panel=_SEARCH, metavar="N",
                               help="Trials in the whole study (every board's)."),
    seed: Optional[int] = typer.Option(None, "--seed", rich_help_panel=_SEARCH, metavar="N",
                                       help="The sampler's seed (a repeatable search)."),
    storage: Optional[str] = typer.Option(
        None, "--storage", rich_help_panel=_SEARCH, metavar="URL",
        help="Optuna storage shared by several boards (sqlite:///PATH, postgresql://..., "
             "mysql://...). Default: DIR/study.db."),
    study: Optional[str] = typer.Option(None, "--study", rich_help_panel=_SEARCH,
                                        metavar="NAME", help="The study's name in --storage."),
    heartbeat: Optional[int] = typer.Option(
        None, "--heartbeat", rich_help_panel=_SEARCH, metavar="S",
        help="--storage: a trial beats every S s (10); one that missed 3 beats is measured "
             "again elsewhere. 0: off."),
    mix_boards: bool = typer.Option(
        False, "--mix-boards", rich_help_panel=_SEARCH,
        help="Let boards on another L4T or power mode (same tables) join the study."),
    warm_start: Optional[Path] = typer.Option(
        None, "--warm-start", rich_help_panel=_SEARCH, metavar="TUNE_JSON",
        help="A new study measures an earlier study's best points first."),
    reprobe: bool = typer.Option(
        False, "--reprobe", rich_help_panel=_SEARCH,
        help="Resume only where the EMC still runs the study's rates (probed again)."),
    patience: Optional[int] = typer.Option(
        None, "--patience", rich_help_panel=_SEARCH, metavar="N",
        help="Stop searching once N trials leave the best point unchanged."),
    out: Path = typer.Option(Path("jetbench-tune"), "--out", rich_help_panel="Output",
                             metavar="DIR", help="Directory: study.db, tune.json, pareto.png "
                             "and every trial's result. Run tune again with the same DIR to "
                             "continue a study."),
    save_profile: Optional[str] = typer.Option(
        None, "--save-profile", rich_help_panel="Output", metavar="NAME",
        help="Write the best point as /etc/jetbench/profiles/NAME.toml (under --root), for "
             "`jetbench apply NAME` and `jetbench daemon --profile NAME`."),
    plot: bool = typer.Option(True, "--plot/--no-plot", rich_help_panel="Output",
                              help="Draw DIR/pareto.png."),
    meter: Optional[List[str]] = _METER, sample_rate: Optional[str] = _SAMPLE_RATE,
    iterations: int = _ITER, duration: str = _DURATION,
    warmup: str = _WARMUP, device: str = _DEVICE, input_shape: Optional[str] = _SHAPE,
    provider: Optional[str] = _PROVIDER, cmd: Optional[str] = _CMD,
    throughput_from: Optional[str] = _THROUGHPUT_FROM, unit: Optional[str] = _UNIT,
    cmd_log: Optional[Path] = _CMD_LOG, as_json: bool = _JSON, wait: Optional[str] = _WAIT,
    workload_python: Optional[str] = WORKLOAD_PYTHON,
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """Find the most efficient clocks (and batch, precision) for a workload under constraints:
    every trial a real measure point, chosen by Optuna (docs/tune.md). It holds the board for
    the whole study; the study in DIR/study.db survives Ctrl-C, kill -9 or a reboot, and
    several boards can share one (--storage, --study). Writes DIR/tune.json, DIR/pareto.png
    and, with --save-profile, a profile the daemon can hold."""
    from ..interrupts import InterruptLatch
    from ..open_board import open_board
    from ..run.request import split_list
    from ..run.tune.options import HEARTBEAT_S, TuneRequest, constraints_for
    from ..run.tune.output import pareto_plot
    from ..run.tune.output import save_profile as write_profile
    from ..run.tune.study import tune as run

    given: Dict[str, Any] = dict(locals())  # locals(): typeshed types it so
    options = _options(ctx, given)
    root = open_root(ctx)
    host = socket.gethostname()
    request = TuneRequest(options, out, objectives=tuple(
        o for item in objective for o in split_list(item)),
        constraints=constraints_for(constraint, options),
        knobs=tuple(split_list(knobs)), budget=budget, storage=storage, study=study, seed=seed,
        mix_boards=mix_boards, warm_start=warm_start, reprobe=reprobe, patience=patience,
        heartbeat_s=HEARTBEAT_S if heartbeat is None else heartbeat or None,
        # the board a trial ran on: this host, and its --root when that is not / (simulated)
        board_name=host if str(root.base) == "/" else f"{host}:{root.base}")

    def say(line: str) -> None:
        if not as_json:  # wrapped at words to stderr's terminal, one line each when piped
            sys.stderr.write(for_stream(line, sys.stderr, "  ") + "\n")
            sys.stderr.flush()

    with InterruptLatch():
        report = run(root, request, progress=say)
    doc = report.doc
    if plot:
        report.plot = pareto_plot(doc, out / "pareto.png")
    if save_profile:
        with open_board(root, simulate_power=False) as board:
            report.profile = write_profile(root, board, doc, save_profile)
    if as_json:
        print_json({**doc, "tune_json": str(report.path),
                    "plot": str(report.plot) if report.plot else None,
                    "profile": str(report.profile) if report.profile else None})
        return
    _render(doc)
    _line(f"results: {report.path}" + (f", {report.plot}" if report.plot else ""))
    if report.profile:
        _line(f"profile: {report.profile} (jetbench apply {save_profile})")


def _line(text: str) -> None:
    """A line of prose on stdout: wrapped at words to its terminal (a path whole), as written
    where stdout is none."""
    sys.stdout.write(for_stream(text, sys.stdout, "  ") + "\n")
    sys.stdout.flush()


def _render(doc: TuneDoc) -> None:
    from rich.table import Table

    from ..run.tune.output import _settings_text, closest_text, figure_text, unit_labels
    from ..work_units import DEFAULT_UNIT
    from .render import sim_tag

    table = Table(title="jetbench tune: the best point and the Pareto front"
                  + sim_tag(doc.get("simulated", False)), title_justify="left")
    rate, per_j = unit_labels(doc.get("unit", DEFAULT_UNIT))
    for col in ("", "settings", rate, "W", per_j, "p99 ms"):
        table.add_column(col, overflow="fold" if col == "settings" else "ellipsis",
                         no_wrap=col not in ("", "settings"))
    best = doc.get("best")
    rows = ([("best", best)] if best else []) + [
        ("front", t) for t in doc.get("pareto", []) if not best
        or t.get("number") != best.get("number")]
    for label, t in rows:
        s, m = t.get("settings") or {}, t.get("metrics") or {}
        # as the progress lines say them (2.133 GHz there, not 2133MHz here)
        # each figure with its uncertainty, digits from it, as measure's table
        table.add_row(label, _settings_text(s), *(figure_text(m, name) for name in (
            "images_per_s", "power_w", "images_per_j")), _num(m.get("latency_p99_ms")))
    out = console()
    out.print(table)
    if best and doc.get("why"):
        _line(f"why this point: {doc.get('why')}")
    done = [t for t in doc.get("trials", []) if t.get("state") == "COMPLETE"]
    _line(f"{len(done)} trial(s) complete, {sum(1 for t in done if t.get('feasible'))} "
          f"feasible; objective {', '.join(doc.get('objectives', []))}; constraints "
          f"{', '.join(doc.get('constraints', [])) or 'none'}")
    if not best:
        out.print("no trial met the constraints with a valid result", style="bold red")
        closest = closest_text(doc)
        if closest:
            _line(closest)


def _num(value: Optional[float]) -> str:
    from ..report.digits import significant

    return significant(value)
