"""`jetbench calibrate`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import console, open_root, print_json


def calibrate(
    ctx: typer.Context,
    meter: Optional[str] = typer.Option(
        None, "--meter", "-m", metavar="SPEC",
        help="The external wall meter: wt310:, scpi:, stream: or um25c:PORT[?options]."),
    plan: str = typer.Option("full", "--plan", help="full (3 runs, ~10 min) or quick (~2 min)."),
    label: str = typer.Option("unlabelled", "--label",
                              help="The carrier board and supply, as you name them."),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE",
                                       help="Also write the calibration here (to carry to "
                                       "other boards of the same module and carrier)."),
    window: Optional[str] = typer.Option(None, "--window", metavar="DURATION",
                                         help="Each run's window instead of the plan's "
                                         "(demos, tests), e.g. 3s."),
    import_file: Optional[Path] = typer.Option(
        None, "--import", metavar="FILE",
        help="Install a calibration made on another board of this module and carrier."),
    plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE",
                                        help="Meter vs fitted, and the residuals (PNG)."),
    as_json: bool = typer.Option(False, "--json", help="Print the calibration as JSON."),
) -> None:
    """Fit wall power to the board's own sensors with an external meter, once per module and
    carrier: `measure`, `report` and the daemon then give wall W and wall img/J (labelled
    `wall, calibrated`, with their uncertainty) from the board's sensors alone
    (docs/power.md, "Wall energy")."""
    from ..errors import UsageError
    from ..run.calibrate import CalibrateRequest, import_calibration
    from ..run.calibrate import calibrate as run_calibrate
    from ..units import parse_duration_s

    root = open_root(ctx)
    if import_file is not None:
        if meter is not None:
            raise UsageError("--import installs a calibration; --meter makes one: not both")
        cal = import_calibration(root, import_file)
        if as_json:
            print_json(cal)
            return
        console().print(f"installed: calibration of {cal.get('label')} made {cal.get('created')}"
                        f" ({cal['model']['kind']}, held-out error "
                        f"{cal['residual']['heldout_rms_pct']:.2f}% RMS)", markup=False)
        return
    if meter is None:
        raise UsageError("calibrate needs --meter SPEC (or --import FILE)",
                         hint="e.g. --meter wt310:/dev/ttyUSB0")
    req = CalibrateRequest(meter=meter, plan=plan, label=label, out=out,
                           window_s=parse_duration_s(window) if window else None)
    report = run_calibrate(root, req)
    cal = report.calibration
    if plot is not None:
        from ..report.calibration_plot import calibration_plot

        calibration_plot(cal, report.pairs[0], report.pairs[1], plot)
    if as_json:
        print_json(cal)
        return
    out_console = console()
    res, model = cal["residual"], cal["model"]
    lo, hi = cal["range_w"]
    sim = "SIMULATED " if cal.get("simulated") else ""
    coef = " ".join(f"c{i}={c:.5g}" for i, c in enumerate(model["coefficients"]))
    out_console.print(f"{sim}calibration: {cal['total']} (on-board) -> wall, {cal['label']}",
                      markup=False)
    out_console.print(f"  model: {model['kind']} ({coef}); held-out error "
                      f"{res['heldout_rms_pct']:.2f}% RMS, p95 {res['heldout_p95_pct']:.2f}% "
                      f"(" + ", ".join(f"{k} {v:.2f}%" for k, v in
                                       model["compared_heldout_rms_pct"].items()) + ")")
    out_console.print(f"  range: {lo:.2f}-{hi:.2f} W on board; meter lag {cal['lag_s']:.2f} s "
                      f"(found); {res['bins']} readings of {res['bin_s']:g} s")
    out_console.print(f"  installed: {report.path}" + (f"; written: {out}" if out else ""),
                      markup=False)
