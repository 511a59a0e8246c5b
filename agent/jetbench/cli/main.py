"""The `jetbench` command: global options, command registration, and the one place where
errors become messages and exit codes."""

from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple

import typer

from .. import __version__
from ..errors import EXIT_HARDWARE, EXIT_INTERRUPTED, EXIT_USAGE, JetbenchError
from .common import GlobalOptions, ReaderGone, set_invocation
from .help_screen import HelpCommand, HelpGroup

if TYPE_CHECKING:
    from typer.core import TyperArgument


def _click_errors() -> tuple:
    """Recent typer vendors its own click (typer._click) and raises only its exceptions; older
    typer uses click itself (imported only then: click costs start-up time)."""
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            return (__import__(name, fromlist=["ClickException"]).ClickException,)
        except (ImportError, AttributeError):
            pass
    return ()


_CLICK_ERROR = _click_errors()


def _arguments_read_plainly() -> None:
    """Recent typer writes a required argument as `{NAME}` in the usage line (--help's and an
    error's): show `NAME` / `NAME...` as click does (older typer has no such method and needs
    nothing)."""
    arg_cls = getattr(typer.core, "TyperArgument", None)
    usage = getattr(arg_cls, "_usage_display_name", None)
    if arg_cls is None or usage is None or getattr(usage, "_plain", False):
        return

    def plain_usage(self: TyperArgument) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    plain_usage._plain = True  # type: ignore[attr-defined]
    arg_cls._usage_display_name = plain_usage


_arguments_read_plainly()


def _int(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)  # typer's own conversion says what is wrong
    return int(text)


def _float(text: str) -> float:
    if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text):
        raise ValueError(text)
    return float(text)


def _path(text: str) -> Path:
    if not text or (os.path.exists(text) and not os.access(text, os.R_OK)):
        raise ValueError(text)  # typer's own says "is not readable"
    return Path(text)


def _bool(text: str) -> bool:
    raise ValueError(text)  # "yes", "0", ...: typer's own conversion reads a flag's text


# A value of these annotations as typer's conversion makes it (a list's: each item's)
_PLAIN_TYPES: Dict[type, Callable[[str], object]] = {
    str: str, int: _int, float: _float, Path: _path, bool: _bool}
# a value of these types is the annotation's as it stands (a flag's, a default: an int
# default of a float option is that float)
_KEPT: Dict[type, Tuple[type, ...]] = {
    int: (int,), float: (int, float), Path: (type(Path()),), bool: (bool,)}
# typer's private conversion objects (typer._coercion: TypeDescriptor, RuntimeParam, click's
# Parameter and Context), whose shapes change between typer releases
Typers = Any


def _plain_info(info: Typers) -> bool:
    """No bounds, parser, or path checks beyond typer's defaults (readable only)."""
    return (all(getattr(info, name, None) in (None, False) for name in (
        "parser", "min", "max", "clamp", "exists", "resolve_path", "allow_dash", "path_type",
        "writable")) and all(getattr(info, name, True) is True for name in (
            "readable", "file_okay", "dir_okay")))


class _PlainValue:
    """One option's conversion, of the shape of typer's RuntimeParam (`coerce`): a plain
    value here, anything else by typer's own conversion, built only then."""

    def __init__(self, descriptor: Typers, annotation: type, many: bool,
                 typers_build: Callable[[Typers], Typers]) -> None:
        self.descriptor, self.annotation, self.many = descriptor, annotation, many
        self.convert = _PLAIN_TYPES[annotation]
        self._typers_build = typers_build
        self._typers: Optional[Typers] = None

    def coerce(self, value: object, param: Typers, ctx: Typers) -> object:
        if value is None:  # as RuntimeParam.coerce
            return () if param.multiple or param.nargs == -1 else None
        try:
            if self.many:
                if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
                    return [self.convert(x) for x in value]
            elif isinstance(value, str):
                return self.convert(value)
            elif type(value) in _KEPT.get(self.annotation, ()):
                return self.annotation(value)  # a default: 20 for an int, 1 for a float
        except ValueError:
            pass  # a bad value: typer's own conversion says what is wrong
        if self._typers is None:
            self._typers = self._typers_build(self.descriptor)
        return self._typers.coerce(value, param=param, ctx=ctx)


def _plain_values_without_pydantic() -> None:
    """Recent typer converts each option's value through a pydantic TypeAdapter, built when
    a command runs: pydantic's import and a schema per option, about 0.09 s of every command
    (`info` 0.26 s, measured 2026-11-27). jetbench's options are str, int, float, bool and
    Path (or lists of these): such a value (a flag's, a default's, or text that reads
    plainly as its type) is converted here as typer's conversion would; a value that
    will not convert, and any other option (bounds, choices, checked paths), goes to typer's
    own conversion, so its messages are typer's (tests/test_cli_values.py compares the two).
    Older typer has no such step."""
    core = typer.core
    build = getattr(core, "build_runtime_param", None)
    if build is None or getattr(build, "_plain", False):
        return

    def plain_build(descriptor: Typers) -> Typers:
        annotation = descriptor.annotation
        many = getattr(annotation, "__origin__", None) is list
        if many:
            annotation = (getattr(annotation, "__args__", None) or (None,))[0]
        if (annotation not in _PLAIN_TYPES or getattr(descriptor, "file_annotation", None)
                is not None or not _plain_info(descriptor.parameter_info)):
            return build(descriptor)
        return _PlainValue(descriptor, annotation, many, build)

    plain_build._plain = True  # type: ignore[attr-defined]
    plain_build.typers_own = build  # type: ignore[attr-defined]  # tests compare the two
    core.build_runtime_param = plain_build


_plain_values_without_pydantic()


class _JetbenchGroup(HelpGroup):
    """Runs every command under one error handler (also under typer's CliRunner); its
    --help and every command's is drawn by help_screen."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # click's Group.main: Any is click's
        kwargs["standalone_mode"] = False
        from .clocks import optional_wait_value  # `--wait` alone: wait for the board for ever

        if args:
            argv = sys.argv[1:] if args[0] is None else args[0]
            args = (optional_wait_value(list(argv)), *args[1:])
            set_invocation(args[0])
        else:
            argv = kwargs.get("args")
            kwargs["args"] = optional_wait_value(list(sys.argv[1:] if argv is None else argv))
            set_invocation(kwargs["args"])
        code = 0
        try:
            result = super().main(*args, **kwargs)
            code = result if isinstance(result, int) else 0
            if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130) by itself
                sys.stderr.write("\ninterrupted\n" + _interrupt_notes())
        except JetbenchError as err:
            _report(err)
            code = err.exit_code
        except typer.Exit as err:
            code = err.exit_code
        except _CLICK_ERROR as err:
            _show_click_error(err)
            # A bare `jetbench` shows the help: not an error.
            code = 0 if type(err).__name__ == "NoArgsIsHelpError" else EXIT_USAGE
        except BrokenPipeError as err:
            if not isinstance(err, ReaderGone) and not _stdout_closed():
                sys.stderr.write("jetbench: error: a pipe or socket closed under jetbench\n")
                code = EXIT_HARDWARE
            else:  # `jetbench sweep | head`: the reader had what it wanted, not an error
                _quiet_stdout()
        except OSError as err:
            # An OS error no jetbench layer expected: still a message, not a traceback.
            sys.stderr.write(f"jetbench: error: {err}\n")
            if err.errno in (errno.ENOSPC, errno.EDQUOT):  # where, and what to do (issue 63)
                where = os.path.dirname(os.path.abspath(err.filename)) \
                    if isinstance(err.filename, str) else "the disk jetbench writes to"
                sys.stderr.write(f"  hint: {where} is on a full disk: free space there\n")
            code = EXIT_HARDWARE
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("\ninterrupted\n" + _interrupt_notes())
            code = EXIT_INTERRUPTED
        from ..distributed.teardown import leave

        leave(code)  # a rank of a multi-device run ends here, without finalizing (teardown.py)
        sys.exit(code)


def _stdout_closed() -> bool:
    """Has the reader of stdout gone (a pipe's read end closed: `| head`)? Linux reports
    POLLERR on the write end then; a socket closed under jetbench (the daemon's) is not it."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_stdout() -> None:
    """stdout to /dev/null, so the interpreter's last flush finds no closed pipe (no 'Exception
    ignored ... BrokenPipeError' on stderr, no exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _interrupt_notes() -> str:
    """The interrupted command's notes: what became of the clocks, where the results are."""
    from ..errors import interrupt_notes

    return "".join(f"  {line}\n" for line in interrupt_notes())


def _report(err: JetbenchError) -> None:
    sys.stderr.write(_wrapped(f"jetbench: error: {err}", "  "))
    if err.hint:
        sys.stderr.write(_wrapped(f"  hint: {err.hint}", "        "))


def _wrapped(text: str, indent: str) -> str:
    """One message, wrapped at words to stderr's terminal width (a path or URL is never split);
    piped or redirected, one line as written (what scripts and logs grep)."""
    from ..terminal import for_stream

    return for_stream(text, sys.stderr, indent) + "\n"


def _show_click_error(err: Any) -> None:  # click's ClickException (typer's or click's own)
    """click's own message for a parse error (usage, the hint, `Error: ...`), each line wrapped
    at words as jetbench's own errors are (click writes them whole: mid-word at 80)."""
    import io

    buffer = io.StringIO()
    err.show(file=buffer)
    sys.stderr.write("".join(_wrapped(line, "  ") for line in buffer.getvalue().splitlines()))


app = typer.Typer(
    cls=_JetbenchGroup,
    name="jetbench",
    help="Pin clocks, run inference workloads and measure img/s/W on NVIDIA Jetson boards.\n\n"
    "Every hardware access goes through --root (default /), so the same commands work on a "
    "simulated board: `jetbench sim create --board tx1 DIR` then `jetbench --root DIR info`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"jetbench {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    root: Path = typer.Option(
        Path("/"),
        "--root",
        metavar="DIR",
        envvar="JETBENCH_ROOT",
        help="Filesystem root for every hardware access: a simulated board, a snapshot, a chroot.",
        show_default=True,
    ),
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    ctx.obj = GlobalOptions(root=root)


START, CLOCKS, MEASURE, BOARD = "Start here", "Clocks", "Measure", "On a board (the service)"

# name, panel, one line for the command list, examples for its --help
COMMANDS = (
    ("sim", START, "Simulated boards: create one in a directory (no hardware needed).",
     ("jetbench sim create --board orin-nano /tmp/orin", "jetbench sim list")),
    ("demo", START, "A measurement on a simulated TX1 at 690 MHz: no hardware, a minute.",
     ("jetbench demo --out /tmp/demo",)),
    ("info", START, "The board: L4T, clock domains, rails and sources, temperatures, state.",
     ("jetbench info", "jetbench --root /tmp/orin info --json")),
    ("monitor", START, "Live rails, CPU/GPU load and clocks, RAM, temperatures (tegrastats).",
     ("jetbench monitor", "jetbench monitor --interval 1s > monitor.log",
      "jetbench monitor --csv power.csv --duration 60s")),
    ("maxperf", CLOCKS, "Everything at max, as jetson_clocks (within the power mode).",
     ("jetbench maxperf --dry-run", "sudo jetbench maxperf --fan")),
    ("apply", CLOCKS, "Pin a profile (a name or a TOML file), journalled first.",
     ("jetbench apply orin-nano-510mhz --dry-run", "sudo jetbench apply my-profile.toml")),
    ("restore", CLOCKS, "Put back every value jetbench changed, from the journal.",
     ("sudo jetbench restore", "sudo jetbench restore --wait 30")),
    ("profiles", CLOCKS, "List and show the profiles `apply` accepts.",
     ("jetbench profiles list", "jetbench profiles show maxperf")),
    ("time", MEASURE, "Time networks (img/s, latency percentiles, CV); no clocks, no power.",
     ("jetbench time --model resnet18,alexnet --precision fp32,fp16",
      "jetbench time --model mobilenet_v2 --batch sweep",
      "jetbench time --model resnet18,alexnet --runtime torch,onnxruntime,torchscript")),
    ("models", MEASURE, "The built-in networks: input, parameters, GMACs.", ("jetbench models",)),
    ("measure", MEASURE, "img/s, latency, W and img/J at pinned clocks: one result per point.",
     ("jetbench measure --model alexnet --precision fp16,fp32 --freq max --out results",
      "jetbench measure --model resnet18 --batch 1,8 --freq 624MHz --emc-freq max",
      "jetbench measure --cmd 'trtexec --loadEngine=m.engine' --throughput-from trtexec")),
    ("sweep", MEASURE, "measure over GPU clocks x batch x precision: where is the peak?",
     ("jetbench sweep --freq all --model alexnet --out sweep",
      "jetbench sweep --freq 300MHz..900MHz --batch 1,8 --resume --out sweep")),
    ("tune", MEASURE, "Find the most efficient clocks under constraints (Optuna); keep them.",
     ("jetbench tune --model alexnet --knobs gpu,emc --constraint 'images_per_s>=30' "
      "--budget 40 --out tuned --save-profile alexnet-tuned",
      "jetbench tune --model resnet18 --precision fp16,fp32 --batch 1,8 --objective "
      "images_per_j --objective images_per_s --out front")),
    ("calibrate", MEASURE, "Wall power from the board's own sensors: fit them to a meter once.",
     ("jetbench calibrate --meter wt310:/dev/ttyUSB0 --label 'devkit + 19V brick'",
      "jetbench calibrate --meter scpi:socket://10.0.0.5:5025 --plan quick --out cal.json",
      "jetbench calibrate --import cal.json")),
    ("report", MEASURE, "Tables and plots across results; --compare for a regression check.",
     ("jetbench report results/", "jetbench report results/ --plot plots/ --markdown",
      "jetbench report old.json --compare new.json",
      "jetbench report results/ timed/ --by runtime --plot plots/")),
    ("daemon", BOARD, "The service in the foreground: hold a profile, re-pin, serve status.",
     ("jetbench daemon --profile maxperf --socket /tmp/jb.sock",
      "jetbench daemon --tune --throughput-from \\\n"
      "    prometheus:http://127.0.0.1:8002/metrics#nv_inference_count \\\n"
      "    --constraint 'items_per_s>=30'")),
    ("status", BOARD, "Ask the running daemon what it holds, clocks, power, re-pins.",
     ("jetbench status", "jetbench status --json")),
    ("install-service", BOARD, "Install the systemd service and udev rules, and start it.",
     ("sudo jetbench install-service --profile maxperf",)),
    ("uninstall-service", BOARD, "Stop and remove the service (the board is restored on stop).",
     ("sudo jetbench uninstall-service",)),
)


def _epilog(examples: Sequence[str]) -> str:
    return "Examples:\n\n" + "\n\n".join(f"  {e}" for e in examples)


def _register() -> None:
    # Command modules import only typer at module level: heavy libraries load inside commands.
    from . import calibrate, clocks, daemon, info, measure, monitor, report, sim, tune, workload

    functions = {
        "info": info.info, "maxperf": clocks.maxperf, "restore": clocks.restore,
        "apply": clocks.apply, "monitor": monitor.monitor, "time": workload.time_cmd,
        "models": workload.models_cmd, "measure": measure.measure, "sweep": measure.sweep,
        "report": report.report, "tune": tune.tune, "demo": measure.demo, "daemon": daemon.daemon,
        "status": daemon.status, "install-service": daemon.install_service,
        "uninstall-service": daemon.uninstall_service, "calibrate": calibrate.calibrate,
    }
    groups = {"sim": sim.sim_app, "profiles": clocks.profiles_app}
    for name, panel, short, examples in COMMANDS:
        if name in groups:
            app.add_typer(groups[name], name=name, rich_help_panel=panel, short_help=short,
                          epilog=_epilog(examples))
            continue
        func = functions[name]
        app.command(name, help=func.__doc__, short_help=short, rich_help_panel=panel,
                    epilog=_epilog(examples), cls=HelpCommand)(func)


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
