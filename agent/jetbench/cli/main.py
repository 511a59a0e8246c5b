"""The `jetbench` command: global options, command registration, and the one place where
errors become messages and exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from .. import __version__
from ..errors import EXIT_HARDWARE, EXIT_INTERRUPTED, EXIT_USAGE, JetbenchError
from .common import GlobalOptions, set_invocation


def _click_errors() -> tuple:
    """Recent typer vendors its own click (typer._click); older typer uses click itself."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(__import__(name, fromlist=["ClickException"]).ClickException)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


_CLICK_ERROR = _click_errors()


def _flags_show_no_type() -> None:
    """Recent typer shows `<bool>` as the type of every flag in --help, although a flag takes
    no value: show nothing there (older typer has no such method and needs nothing)."""
    option_cls = getattr(getattr(typer, "core", None), "TyperOption", None)
    original = getattr(option_cls, "display_type_rich", None)
    if original is None or getattr(original, "_no_flag_type", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> Any:
        if getattr(self, "is_flag", False) and getattr(self, "metavar", None) is None:
            return None
        return original(self, ctx)

    display_type_rich._no_flag_type = True  # type: ignore[attr-defined]
    option_cls.display_type_rich = display_type_rich  # type: ignore[union-attr]


_flags_show_no_type()


class _JetbenchGroup(TyperGroup):
    """Runs every command under one error handler (also under typer's CliRunner)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        from .tuning import optional_wait_value  # `--wait` alone: wait for the board for ever

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
            err.show()
            # A bare `jetbench` shows the help: not an error.
            code = 0 if type(err).__name__ == "NoArgsIsHelpError" else EXIT_USAGE
        except OSError as err:
            # An OS error no jetbench layer expected: still a message, not a traceback.
            sys.stderr.write(f"jetbench: error: {err}\n")
            code = EXIT_HARDWARE
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("\ninterrupted\n" + _interrupt_notes())
            code = EXIT_INTERRUPTED
        from ..distributed.teardown import leave

        leave(code)  # a rank of a multi-device run ends here, without finalizing (teardown.py)
        sys.exit(code)


def _interrupt_notes() -> str:
    """The interrupted command's notes: what became of the clocks, where the results are."""
    from ..errors import interrupt_notes

    return "".join(f"  {line}\n" for line in interrupt_notes())


def _report(err: JetbenchError) -> None:
    sys.stderr.write(f"jetbench: error: {err}\n")
    if err.hint:
        sys.stderr.write(f"  hint: {err.hint}\n")


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
        envvar="JETBENCH_ROOT",
        help="Filesystem root for every hardware access: a simulated board, a snapshot, a chroot.",
        show_default=True,
    ),
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    ctx.obj = GlobalOptions(root=root)


def _register() -> None:
    # Command modules import only typer at module level: heavy libraries load inside commands.
    # (one block per command module; keep the blocks independent of each other)
    from . import info, sim, tuning

    app.command("info")(info.info)
    app.command("maxperf")(tuning.maxperf)
    app.command("restore")(tuning.restore)
    app.command("apply")(tuning.apply)
    app.add_typer(tuning.profiles_app, name="profiles")
    app.add_typer(sim.sim_app, name="sim")

    from . import monitor as _monitor_cli

    app.command("monitor")(_monitor_cli.monitor)

    from . import workload as _workload_cli

    app.command("time")(_workload_cli.time_cmd)
    app.command("models")(_workload_cli.models_cmd)

    from . import measure as _measure_cli

    app.command("measure")(_measure_cli.measure)
    app.command("sweep")(_measure_cli.sweep)
    app.command("report")(_measure_cli.report)
    app.command("demo")(_measure_cli.demo)

    from . import daemon as _daemon_cli

    app.command("daemon")(_daemon_cli.daemon)
    app.command("status")(_daemon_cli.status)
    app.command("install-service")(_daemon_cli.install_service)
    app.command("uninstall-service")(_daemon_cli.uninstall_service)


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
