"""`--check`: does a reduced precision give the same answer as FP32 on the same weights and input?
(the answer to "FP16 gives a different class on the board")."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence

from .base import RunOptions
from .build import build_workload
from .model_arg import InputShape
from .precision import PrecisionUnavailable
from .pytorch import torch_parts
from .runtimes.output_check import compare_outputs, host_float


@dataclass(frozen=True)
class Agreement:
    """Outputs of `precision` against FP32. Agreements are fractions of the batch's images:
    top-1 = same class; top-5 = mean overlap of the two top-5 sets. Logit differences are
    absolute, next to the largest FP32 logit for scale."""

    model: str
    precision: str
    batch: int
    top1_agreement: float
    top5_agreement: float
    max_abs_diff: float
    mean_abs_diff: float
    reference_max_abs: float

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


def check_precisions(
    model: str,
    precisions: Sequence[str],
    batch: int = 1,
    device: str = "auto",
    input_mode: str = "constant",
    options: Optional[RunOptions] = None,
    input_shape: Optional[InputShape] = None,
    skip_unavailable: bool = False,
) -> List[Agreement]:
    """One forward pass per precision, each against the FP32 output of the same weights (same
    seed) and the same input. FP32 itself is skipped. Raises PrecisionUnavailable/OutOfMemory
    like build_workload (a precision that is unavailable is left out with skip_unavailable)."""
    import torch

    options = options or RunOptions()
    options = RunOptions(**dict(asdict(options), mode="inference", compile=False,
                                cuda_graph=False))
    reduced = [p for p in precisions if p != "fp32"]
    if not reduced:
        return []
    base = build_workload(model, "fp32", batch, device, input_mode, options, input_shape)
    # the fp32 weights, before anything converts them
    pristine = copy.deepcopy(torch_parts(base)[0]).cpu()
    with torch.inference_mode():
        reference = host_float(torch, base.step())
    shape = tuple(base.input.shape[1:])
    results: List[Agreement] = []
    for precision in reduced:
        try:
            other = build_workload(model, precision, batch, device, input_mode, options, shape,
                                   module=copy.deepcopy(pristine))
        except PrecisionUnavailable:
            if skip_unavailable:
                continue
            raise
        with torch.inference_mode():
            out = host_float(torch, other.step())
        numbers = compare_outputs(reference, out)
        results.append(Agreement(model, precision, batch, numbers["top1"], numbers["top5"],
                                 numbers["max_abs"], numbers["mean_abs"], numbers["ref_max"]))
    return results
