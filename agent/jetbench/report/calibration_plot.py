"""The plot of a wall calibration (`jetbench calibrate --plot FILE`): the meter against the
fitted model over the board's power, and the residuals in percent."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..documents import CalibrationDoc
from ..sampling.calibration_fit import predict
from .plots import SIZE_IN, _plt, _save, _suffix


def calibration_plot(cal: CalibrationDoc, board_w: np.ndarray, wall_w: np.ndarray,
                     path: Path) -> Path:
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=SIZE_IN, sharex=True,
                                      layout="constrained", height_ratios=(2, 1))
    coef = cal["model"]["coefficients"]
    fitted = np.array([predict(coef, float(b)) for b in board_w])
    order = np.argsort(board_w)
    top.scatter(board_w, wall_w, s=8, label="meter (wall, measured)")
    top.plot(board_w[order], fitted[order], color="black",
             label=f"fitted ({cal['model']['kind']})")
    top.set_ylabel("wall W")
    top.set_title(f"{cal['total']} -> wall, {cal.get('label')}"
                  f"{_suffix(bool(cal.get('simulated')))}")
    top.legend(fontsize="small")
    bottom.scatter(board_w, 100.0 * (fitted - wall_w) / wall_w, s=8)
    bottom.axhline(0.0, color="black", linewidth=0.8)
    bottom.set_xlabel(f"{cal['total']} W (on board, measured)")
    bottom.set_ylabel("fit - meter, %")
    return _save(fig, path)
