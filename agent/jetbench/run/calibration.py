"""A wall calibration as a file that travels (docs/power.md, "Wall energy"): what it says, where
a board keeps the one it uses, whether it holds for this board, and the wall figure it gives.

Made once per module and carrier (`jetbench calibrate --meter SPEC`, run/calibrate.py), it is
installed in the board's state directory (CALIBRATION_PATH) and carried to every board of the
same module and carrier with `jetbench calibrate --import FILE`. A board whose module, carrier
or total differs refuses it with the reason; `measure` gives no calibrated figure (and says why)
outside the range it covered or once it is older than MAX_AGE_DAYS.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List, Optional

from ..documents import CalibrationBoard, CalibrationDoc, ResultDoc, WallFigure
from ..errors import UsageError
from ..hw.board import Board
from ..hw.board_parts import board_parts
from ..hw.fs import STATE_DIR, Root
from ..report import io
from ..sampling.calibration_fit import predict, u95_pct

SCHEMA = "jetbench.calibration/1"
CALIBRATION_PATH = f"{STATE_DIR}/calibration.json"
MAX_AGE_DAYS = 180.0  # supplies age, fans clog, carriers get new peripherals: measure again
RANGE_MARGIN = 0.03  # a window this far outside the covered range still counts as inside


def board_identity(root: Root, board: Board) -> CalibrationBoard:
    """What a calibration must share with a board: the module, the carrier, the total."""
    parts = board_parts(root)
    return {"model": board.model, "family": board.family, "soc": board.soc,
            "module": parts.module, "carrier": parts.carrier, "total": board.total_rail,
            "simulated": board.simulated}


def mismatch(cal: CalibrationDoc, ident: CalibrationBoard) -> Optional[str]:
    """Why this calibration does not hold for the board `ident` names (None: it holds)."""
    theirs = cal.get("board") or {}
    for key, what in (("family", "module family"), ("module", "module"),
                      ("carrier", "carrier board"), ("total", "on-board total")):
        a, b = theirs.get(key), ident.get(key)
        if a != b:
            return (f"the calibration was made on {what} {a or 'unnamed'}, this board's is "
                    f"{b or 'unnamed'}")
    if bool(theirs.get("simulated")) != bool(ident.get("simulated")):
        return "a simulated board's calibration never applies to hardware, nor the reverse"
    return None


def age_days(cal: CalibrationDoc, now: Optional[float] = None) -> float:
    return ((now if now is not None else time.time()) - float(cal.get("created_unix", 0))) / 86400


def check(doc: object, source: str) -> CalibrationDoc:
    """A calibration file's document, or UsageError saying what is wrong with it."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UsageError(f"{source} is not a jetbench calibration (schema {SCHEMA})")
    model = doc.get("model") or {}
    coef = model.get("coefficients") if isinstance(model, dict) else None
    rng = doc.get("range_w")
    if not (isinstance(coef, list) and coef and all(isinstance(c, (int, float)) for c in coef)
            and isinstance(rng, list) and len(rng) == 2 and isinstance(doc.get("board"), dict)
            and isinstance(doc.get("residual"), dict)):
        raise UsageError(f"{source}: a damaged calibration (model, range or board missing)")
    return doc  # type: ignore[return-value]


def load(path: Path) -> CalibrationDoc:
    return check(io.read_json(path, "calibration"), str(path))


def installed(root: Root) -> Optional[CalibrationDoc]:
    """The board's calibration, if one is installed (a damaged one is treated as none)."""
    path = root.path(CALIBRATION_PATH)
    if not path.is_file():
        return None
    try:
        return load(path)
    except UsageError:
        return None


def matching_calibration(root: Root, board: Board) -> Optional[CalibrationDoc]:
    """The board's installed calibration where it holds for this board and is not too old
    (the daemon's wall energy); None otherwise."""
    cal = installed(root)
    if cal is None or mismatch(cal, board_identity(root, board)) is not None \
            or age_days(cal) > MAX_AGE_DAYS:
        return None
    return cal


def install(root: Root, board: Board, cal: CalibrationDoc) -> Path:
    """Make `cal` this board's calibration (refused, nothing written, when it does not hold)."""
    why = mismatch(cal, board_identity(root, board))
    if why is not None:
        raise UsageError(f"calibration refused: {why}",
                         hint="calibrate this module and carrier with its own meter run")
    return io.atomic_write_text(root.path(CALIBRATION_PATH), json.dumps(cal, indent=1) + "\n")


def wall_figure(cal: Optional[CalibrationDoc], ident: CalibrationBoard, board_w: Optional[float],
                sensor_pct: Optional[float], seconds: float,
                now: Optional[float] = None) -> Optional[WallFigure]:
    """The wall's power over a window from the board's total (`board_w`), or the reason none
    is given (`refused`); None when the board has no calibration at all."""
    if cal is None:
        return None
    base: WallFigure = {"scope": "wall", "basis": "calibrated", "label": cal.get("label"),
                        "calibrated_on": cal.get("created"), "mean_w": None}
    why = mismatch(cal, ident)
    lo, hi = cal["range_w"]
    if why is None and board_w is None:
        why = "no on-board total measured"
    if why is None and age_days(cal, now) > MAX_AGE_DAYS:
        why = (f"the calibration is {age_days(cal, now):.0f} days old (more than "
               f"{MAX_AGE_DAYS:.0f}): calibrate again")
    if why is None and board_w is not None and not (
            lo * (1 - RANGE_MARGIN) <= board_w <= hi * (1 + RANGE_MARGIN)):
        why = (f"the board drew {board_w:.2f} W, outside the {lo:.2f}-{hi:.2f} W the "
               "calibration covered")
    if why is not None or board_w is None:
        base["refused"] = why or "no on-board total measured"
        return base
    wall = predict(cal["model"]["coefficients"], board_w)
    meter_pct = cal["residual"].get("meter_pct")
    parts: List[float] = [p for p in (sensor_pct, meter_pct) if p]
    pct = u95_pct(float(cal["residual"]["heldout_rms_pct"]), *parts)
    base.update({"mean_w": wall, "energy_j": wall * seconds, "u95_pct": pct,
                 "u95_w": wall * pct / 100.0, "from_w": board_w,
                 # None: a part with no published limit, left out of u95 (said, never 0)
                 "u95_parts_pct": {"residual": float(cal["residual"]["heldout_rms_pct"]),
                                   "sensor": sensor_pct, "meter": meter_pct}})
    return base


def compare_with_meter(figure: WallFigure, meter_w: Optional[float]) -> Optional[str]:
    """With a wall meter attached as well: a warning when the two differ by more than the
    calibration's stated uncertainty (the supply, carrier or meter has drifted)."""
    wall, pct = figure.get("mean_w"), figure.get("u95_pct")
    if wall is None or pct is None or not meter_w:
        return None
    diff = 100.0 * (wall - meter_w) / meter_w
    figure["meter_w"] = meter_w
    figure["meter_diff_pct"] = diff
    if abs(diff) <= pct:
        return None
    return (f"calibration drift: the calibrated wall figure ({wall:.2f} W) differs from the "
            f"meter's ({meter_w:.2f} W) by {diff:+.1f}%, beyond its +-{pct:.1f}%: calibrate "
            "again")


def add_wall(doc: ResultDoc, cal: Optional[CalibrationDoc], ident: CalibrationBoard,
             now: Optional[float] = None) -> None:
    """A measured result's wall figures from the board's calibration (nothing when the board
    has none): `power.wall`, `efficiency.wall`, and a warning for a refused figure or a
    drift against a wall meter attached as well."""
    power, eff = doc.get("power") or {}, doc.get("efficiency") or {}
    totals = [t for t in power.get("totals") or [] if t.get("scope") != "wall"]
    onboard = next((t for t in totals if t.get("name") == cal.get("total")), None) \
        if cal is not None else None
    window = (power.get("window") or {}).get("duration_s") or 0.0
    figure = wall_figure(cal, ident, (onboard or {}).get("mean_w"),
                         (onboard or {}).get("mean_w_uncertainty_pct"), window, now)
    if figure is None:
        return
    power["wall"] = figure
    warnings = doc.setdefault("warnings", [])
    if figure.get("refused"):
        warnings.append(f"no calibrated wall figure: {figure['refused']}")
        return
    meter = next((t for t in power.get("totals") or [] if t.get("scope") == "wall"), None)
    drift = compare_with_meter(figure, (meter or {}).get("mean_w"))
    if drift:
        warnings.append(drift)
    ips = (doc.get("throughput") or {}).get("images_per_s")
    wall_w = figure.get("mean_w")
    if ips and wall_w and eff.get("images_per_j") is not None:
        eff["wall"] = {"scope": "wall", "basis": "calibrated", "mean_w": wall_w,
                       "images_per_j": ips / wall_w, "u95_pct": figure.get("u95_pct", 0.0)}
