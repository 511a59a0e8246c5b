"""`jetbench sim`: simulated boards for demos, tests and CI."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple

import typer

from .common import console
from .help_screen import HelpCommand, HelpGroup

if TYPE_CHECKING:
    from ..workload.sim_app import SimApp
    from ..workload.sim_llm_app import SimLlmApp

sim_app = typer.Typer(cls=HelpGroup,
                      help="Simulated boards: a faithful sysfs/debugfs tree in a directory.",
                      no_args_is_help=True)


@sim_app.command("create", cls=HelpCommand)
def create(
    directory: Path = typer.Argument(...,
                                     metavar="DIR", help="New (or empty) directory for the tree."),
    board: str = typer.Option("tx1", "--board", "-b",
                              metavar="BOARD", help="tx1-r24, tx1, nano, tx2, "
                              "xavier-agx, xavier-nx, orin-agx, orin-agx-jp5, orin-agx-jp7, "
                              "orin-nano, orin-nano-super, thor (`jetbench sim list`)."),
    quirk: List[str] = typer.Option([], "--quirk", metavar="NAME",
                                    help="A real-kernel behaviour to show (repeatable): "
                                    "static-cur, amu-cpu, qos-cap, late-gpu, round-emc, "
                                    "emc-boot-cap, emc-refloor, mode-cores-online "
                                    "(docs/boards.md, Quirks)."),
    power_mode: Optional[str] = typer.Option(
        None, "--power-mode", metavar="MODE", help="Start in this nvpmodel mode (an id or a "
        "name: nano 1 or 5W, tx2 1 or MAXQ; `jetbench sim list` lists each board's), its caps "
        "written as nvpmodel leaves them; default: the board's usual mode."),
) -> None:
    """Write a simulated board's tree. Use it with `jetbench --root DIR ...`."""
    from ..sim.boards import get
    from ..sim.create import create_board, power_mode_id

    mode = power_mode_id(get(board).key, power_mode)
    spec = create_board(board, directory, quirks=quirk, power_mode=mode)
    shown = f" (you asked for {board}, another name of it)" if board.lower() != spec.key else ""
    shown += f" with quirk(s) {', '.join(quirk)}" if quirk else ""
    if mode is not None:
        shown += f" in power mode {mode} {dict(spec.power_modes).get(mode, '')}".rstrip()
    console().print(f"Created simulated [bold]{spec.key}[/] ({spec.model}){shown} in {directory}\n"
                    f"Try: jetbench --root {directory} info")


@sim_app.command("list", cls=HelpCommand)
def list_boards() -> None:
    """The simulated boards available, the other names each answers to, and the power modes
    each can start in (`sim create --power-mode ID|NAME`)."""
    import shutil
    import textwrap

    from ..sim.boards import ALIASES, BOARDS
    from ..sim.create import modes_text

    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    for key, spec in sorted(BOARDS.items()):
        others = sorted(a for a, k in ALIASES.items() if k == key)
        line = f"{key} ({spec.soc}): {spec.model}" + (
            f" (also: {', '.join(others)})" if others else "")
        modes = modes_text(spec)
        if modes:
            line += f"; modes: {modes}"
        typer.echo(textwrap.fill(line, width=width, subsequent_indent="    ",
                                 break_on_hyphens=False))


@sim_app.command("run", cls=HelpCommand)
def run(
    directory: Path = typer.Argument(..., metavar="DIR", help="A simulated board's tree."),
    duration: float = typer.Option(0.0, "--duration",
                                   metavar="DURATION", help="Seconds to run (0: until Ctrl-C)."),
) -> None:
    """Run the simulated kernel in the foreground: clocks follow writes, rails follow the power
    model, for tools other than jetbench that read the tree."""
    from ..errors import UsageError
    from ..sim.file_kernel import FileKernel

    if not (directory / "etc/jetbench/simulated.json").is_file():
        raise UsageError(f"not a simulated board: {directory}")
    until = f"for {duration:g} s" if duration > 0 else "until Ctrl-C"
    err = console(stderr=True)
    err.print(
        f"simulating the kernel of {directory} {until}: clocks follow writes, rails follow the "
        "power model (other tools can read the tree now)", markup=False,
        soft_wrap=not err.is_terminal,
        highlight=False)
    with FileKernel(directory):
        end = time.monotonic() + duration if duration > 0 else None
        while end is None or time.monotonic() < end:
            time.sleep(0.1)


@sim_app.command("app", cls=HelpCommand)
def app(
    directory: Path = typer.Argument(..., metavar="DIR", help="A simulated board's tree."),
    port: int = typer.Option(9200, "--port", metavar="PORT",
                             help="Serve its Prometheus metrics on 127.0.0.1:PORT (0: any "
                                  "free port, printed)."),
    model: str = typer.Option("sim:resnet18", "--model", metavar="sim:NAME",
                              help="The simulated network serving each frame."),
    precision: str = typer.Option("fp16", "--precision", metavar="PRECISION"),
    demand: str = typer.Option("30", "--demand", metavar="RATE[,RATE@S...]",
                               help="Frames per second arriving (max: always one waiting); "
                                    "e.g. 30,60@20,max@40 changes at 20 s and 40 s."),
    demand_file: Optional[Path] = typer.Option(
        None, "--demand-file", metavar="PATH",
        help="A file holding the demand (a number or max), read again every 0.2 s: it wins "
             "while it holds one."),
    duration: float = typer.Option(0.0, "--duration", metavar="SECONDS",
                                   help="Seconds to run (0: until Ctrl-C or SIGTERM)."),
    llm: bool = typer.Option(False, "--llm", rich_help_panel="LLM server",
                             help="Serve a language model instead (requests/s in --demand): "
                                  "prefill then decode, vLLM's metrics."),
    llm_model: str = typer.Option("llama-3.2-1b", "--llm-model", metavar="NAME",
                                  rich_help_panel="LLM server",
                                  help="llama-3.2-1b or llama-3.2-3b."),
    prompt_tokens: int = typer.Option(1536, "--prompt-tokens", metavar="N",
                                      rich_help_panel="LLM server",
                                      help="Each request's prompt (prefill) length."),
    output_tokens: int = typer.Option(128, "--output-tokens", metavar="M",
                                      rich_help_panel="LLM server",
                                      help="Tokens each request generates (decode)."),
    chunk_tokens: int = typer.Option(256, "--chunk-tokens", metavar="N",
                                     rich_help_panel="LLM server",
                                     help="Prompt tokens per prefill step (chunked prefill)."),
) -> None:
    """A simulated deployed application, for `daemon --tune`: frames arrive at a demand, a
    simulated network serves them at the speed the board's clocks give, and Prometheus metrics
    show it (sim_app_items_total, sim_app_latency_seconds, sim_app_dropped_total). With --llm,
    a language model's server (vllm:prompt_tokens_total, vllm:generation_tokens_total,
    vllm:time_to_first_token_seconds...)."""
    import signal
    import threading

    from ..errors import UsageError
    from ..hw.board import detect
    from ..hw.fs import Root
    from ..workload.sim_app import SimApp, parse_demand, serve_metrics

    if not (directory / "etc/jetbench/simulated.json").is_file():
        raise UsageError(f"not a simulated board: {directory}")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: expected 0 to 65535")
    schedule = parse_demand(demand)
    root = Root(str(directory))
    if llm:
        from ..workload.sim_llm_app import SimLlmApp

        _serve_llm(SimLlmApp(root, detect(root), llm_model, precision, schedule, demand_file,
                             prompt_tokens, output_tokens, chunk_tokens), port, duration, demand)
        return
    simulated = SimApp(root, detect(root), model, precision, schedule, demand_file)
    server = serve_metrics(simulated.registry, port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    simulated.start()
    address = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    typer.echo(f"serving {address} (SIMULATED application: {model} {precision}, demand "
               f"{demand})", err=False)
    t0 = time.monotonic()
    last = (t0, 0.0, 0.0)
    try:
        end = t0 + duration if duration > 0 else None
        while not stop.is_set():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            if stop.wait(min(APP_REPORT_S, left) if left is not None else APP_REPORT_S):
                break
            if end is not None and time.monotonic() >= end:
                break  # the summary says the rest
            last = _app_line(simulated, last)  # now and then: what it served and dropped
    finally:
        simulated.stop()
        server.shutdown()
        server.server_close()
        served, dropped = simulated.counts()
        seconds = max(time.monotonic() - t0, 1e-9)
        typer.echo(f"sim app: served {served:.0f} frames in {seconds:.0f} s "
                   f"({served / seconds:.1f}/s), dropped {dropped:.0f} (SIMULATED)")


APP_REPORT_S = 10.0  # sim app says its served and dropped rates this often


def _serve_llm(simulated: SimLlmApp, port: int, duration: float, demand: str) -> None:
    """`sim app --llm`: serve until the duration ends, Ctrl-C or SIGTERM; then one summary."""
    import signal
    import threading

    from ..workload.sim_app import serve_metrics

    server = serve_metrics(simulated.registry, port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    simulated.start()
    typer.echo(f"serving http://127.0.0.1:{server.server_address[1]}/metrics (SIMULATED LLM "
               f"server: {simulated.shape.source.split(':')[0]} {simulated.precision}, "
               f"demand {demand} requests/s)")
    t0 = time.monotonic()
    try:
        while not stop.wait(0.5):
            if 0 < duration <= time.monotonic() - t0:
                break
    finally:
        simulated.stop()
        server.shutdown()
        server.server_close()
        served, prompt, generated = simulated.counts()
        typer.echo(f"sim app --llm: served {served:.0f} requests in "
                   f"{time.monotonic() - t0:.0f} s, {prompt:.0f} prompt and {generated:.0f} "
                   "generated tokens (SIMULATED)")


def _app_line(app: SimApp, last: Tuple[float, float, float]) -> Tuple[float, float, float]:
    now = time.monotonic()
    served, dropped = app.counts()
    t, s0, d0 = last
    span = max(now - t, 1e-9)
    typer.echo(f"sim app: {(served - s0) / span:.1f} frames/s served, "
               f"{(dropped - d0) / span:.1f}/s dropped over the last {span:.0f} s")
    return now, served, dropped


@sim_app.command("mount", cls=HelpCommand)
def mount(
    directory: Path = typer.Argument(...,
                                     metavar="DIR",
                                     help="An empty directory to mount the board on."),
    board: str = typer.Option("tx1", "--board", "-b",
                              metavar="BOARD", help="Which simulated board (`jetbench "
                              "sim list`)."),
    quirk: Optional[List[str]] = typer.Option(None, "--quirk", help="A real-kernel behaviour to "
                                              "show (repeatable): static-cur, amu-cpu, qos-cap, "
                                              "late-gpu, round-emc, emc-boot-cap, emc-refloor, "
                                              "mode-cores-online."),
    load: Optional[float] = typer.Option(None, "--load", min=0.0, max=1.0, help="Fixed CPU "
                                         "load (0..1) for the power model and dynamic "
                                         "governors; default: this machine's real load."),
    write_log: Optional[Path] = typer.Option(None, "--write-log",
                                             metavar="FILE", help="Append every write to "
                                             "a knob here (path, value, ok or errno)."),
    power_mode: Optional[str] = typer.Option(
        None, "--power-mode", metavar="MODE", help="Start in this nvpmodel mode (an id or a "
        "name), its caps written as nvpmodel leaves them (as `sim create --power-mode`)."),
) -> None:
    """Serve a simulated board through FUSE, with the kernel's semantics per attribute: writes
    are refused at once with the driver's errno, current clocks and rails are computed when
    read. Runs in the foreground until Ctrl-C or SIGTERM, then unmounts."""
    import os

    from ..errors import UsageError
    from ..sim.boards import BOARDS, board_key
    from ..sim.fuse_board import serve, unavailable_reason

    board = board_key(board)  # another name of a board is that board; a typo: the closest
    from ..sim.create import power_mode_id

    mode = power_mode_id(board, power_mode)
    reason = unavailable_reason()
    if reason:
        raise UsageError(f"cannot serve a FUSE board here: {reason}",
                         hint="`jetbench sim create` writes a file-based board instead")
    if not directory.is_dir() or any(directory.iterdir()):
        raise UsageError(f"not an existing, empty directory: {directory}",
                         hint="mkdir a new one")
    try:
        from ..sim.quirks import check

        check(quirk or ())
    except ValueError as err:
        raise UsageError(str(err)) from err
    if "late-gpu" in (quirk or ()) and BOARDS[board].gpu_kind != "devfreq":
        raise UsageError(f"--quirk late-gpu needs a devfreq GPU; {board} has a debugfs one")

    def ready() -> None:
        console().print(f"Serving simulated [bold]{board}[/] at {directory} (FUSE, pid "
                        f"{os.getpid()}). Stop with Ctrl-C or `kill {os.getpid()}`: it "
                        f"unmounts. Use it with `jetbench --root {directory} ...`")

    from ..sim.create import check_power_mode

    check_power_mode(board, mode)  # a mode the board lacks: one message, before mounting
    try:
        serve(board, directory, quirk or (), load, write_log, on_ready=ready,
              power_mode=mode)
    except RuntimeError as err:
        from ..errors import HardwareError

        raise HardwareError(f"the FUSE mount failed ({err})", path=str(directory),
                            hint="run as root, or check `fusermount3` is installed") from err
