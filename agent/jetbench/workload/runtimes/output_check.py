"""Before a runtime other than PyTorch eager is timed: does it compute the same thing?

One forward pass of the runtime's own workload (the artefact that will be timed: the traced
module, the compiled one, the exported ONNX file on its provider, the built engine) on the
workload's own input, against PyTorch eager in fp32 on the CPU with the same seeded weights and
that same input (the batch's first `SAMPLES` samples: in eval mode a sample's output does not
depend on the others). The difference is judged relative to the reference's largest output, with a
tolerance per precision (stated in the result): a runtime beyond it is refused
(`OutputMismatch`), never timed.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Dict

from ...errors import OutputMismatch
from .._torch import import_torch
from ..registry import get_spec

if TYPE_CHECKING:
    from torch import Tensor

    from ..base import Workload

# max |runtime - reference| / max |reference| allowed, per precision: fp32 differs only in the
# order of sums; TF32 keeps 10 mantissa bits, fp16 10 and bf16 7, over tens of layers.
RELATIVE_TOLERANCE = {"fp32": 1e-3, "tf32": 1e-2, "fp16": 3e-2, "bf16": 1e-1}
REFERENCE = "PyTorch eager, fp32, on the CPU, same weights (seed) and input"
# The reference runs on the CPU: the batch's first samples, not all 256 of a large batch
# (ResNet-200 at 15 GMACs each would take minutes on a Jetson's cores).
SAMPLES = 8


def compare_outputs(reference: Tensor, other: Tensor) -> Dict[str, float]:
    """Top-1/top-5 agreement and absolute logit differences of two (batch, classes) outputs."""
    import torch

    ref = reference.detach().float().reshape(reference.shape[0], -1)
    out = other.detach().float().reshape(other.shape[0], -1)
    k = min(5, ref.shape[1])
    top1 = (ref.argmax(1) == out.argmax(1)).float().mean().item()
    ref5, out5 = ref.topk(k, 1).indices, out.topk(k, 1).indices
    overlap = [len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(ref5, out5)]
    diff = (ref - out).abs()
    finite = torch.isfinite(out).all().item()
    return {
        "top1": top1,
        "top5": sum(overlap) / len(overlap),
        "max_abs": diff.max().item() if finite else float("inf"),
        "mean_abs": diff.mean().item() if finite else float("inf"),
        "ref_max": ref.abs().max().item(),
    }


def check_outputs(workload: Workload, runtime: str, seed: int) -> Dict[str, object]:
    """The agreement (the result's `workload.output_check`), or OutputMismatch."""
    torch = import_torch()
    # fp32 that may have run in TF32 (a provider with no switch for it) is judged as tf32,
    # and says so, rather than refused as a mismatch it is not
    judged = "tf32" if workload.precision == "fp32" and \
        (workload.details or {}).get("tf32_possible") else workload.precision
    tolerance = RELATIVE_TOLERANCE.get(judged)
    if tolerance is None or workload.mode != "inference":
        why = "training steps" if workload.mode != "inference" else workload.precision
        return {"checked": False, "reason": f"no output check for {why}"}
    x = host_float(torch, workload.input)
    batch = x.shape[0]
    samples = min(batch, SAMPLES)  # eval mode: each sample's output is its own
    reference_net = get_spec(workload.model).build(seed).eval()
    with torch.inference_mode():
        reference = reference_net(x[:samples])
    with workload.running(f"{workload.model} on {runtime}"):
        out = workload.outputs() if workload.outputs is not None else workload.step()
        workload.sync()
        out = host_float(torch, out)
    expected = reference.numel() // samples * batch
    if out.numel() != expected:
        return {"checked": False, "reason": f"the runtime's output has {out.numel()} values, "
                f"PyTorch's {expected} (a padded or reordered layout)"}
    out = out.reshape(batch, -1)[:samples]
    numbers = compare_outputs(reference, out.reshape(reference.shape))
    scale = max(numbers["ref_max"], 1e-12)
    relative = numbers["max_abs"] / scale
    doc: Dict[str, object] = {
        "checked": True, "reference": REFERENCE, "max_abs_diff": numbers["max_abs"],
        "reference_max_abs": numbers["ref_max"], "relative_diff": relative,
        "tolerance": tolerance, "top1_agreement": numbers["top1"], "samples_compared": samples}
    if judged != workload.precision:
        doc["judged_as"] = judged  # the row's label: fp32 that may have run in TF32
    if not relative <= tolerance:  # also refuses a NaN
        raise OutputMismatch(
            f"{workload.model} {workload.precision} on {runtime}: outputs differ from PyTorch "
            f"eager by {relative:.3g} of the largest output (tolerance {tolerance:g} for "
            f"{judged}; top-1 agreement {numbers['top1']:.0%}): not timed",
            hint="a runtime that computes something else has no speed worth reporting; "
                 "report it to the runtime with the network and precision")
    return doc


def host_float(torch: ModuleType, value: object) -> Tensor:
    """A tensor, a NumPy array or a list of them (the first) as an fp32 CPU tensor."""
    if isinstance(value, (list, tuple)):
        value = value[0]
    if hasattr(value, "detach"):
        return value.detach().float().cpu().contiguous()
    return torch.as_tensor(value).float()
