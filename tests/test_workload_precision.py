"""Every precision runs on the CPU; reduced precisions agree with FP32 on AlexNet; INT8 on CUDA
without TensorRT says so instead of falling back."""

from __future__ import annotations

import sys

import pytest

from jetbench.errors import UsageError
from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.check import check_precisions, compare_outputs
from jetbench.workload.precision import PrecisionUnavailable, parse_precisions, tensorrt_int8
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed

torch = pytest.importorskip("torch")

TINY = (3, 32, 32)


def test_parse_precisions() -> None:
    assert parse_precisions("fp16,FP32, half") == ["fp16", "fp32"]
    assert parse_precisions("bfloat16,int8") == ["bf16", "int8"]
    with pytest.raises(UsageError):
        parse_precisions("fp8")


@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("fp16", "float16"),
                                             ("bf16", "bfloat16")])
def test_each_precision_runs_on_cpu(precision: str, dtype: str) -> None:
    work = build_workload("resnet18", precision, 2, "cpu", input_shape=TINY)
    result = run_timed(work, TimingPlan(iterations=2, duration_s=0, warmup_s=0,
                                        warmup_iterations=1))
    assert result.iterations == 2 and result.images_per_s > 0
    assert result.workload["precision"] == precision
    with torch.inference_mode():
        out = work.step()
    assert out.shape == (2, 1000) and str(out.dtype) == f"torch.{dtype}"
    assert torch.isfinite(out.float()).all()


def test_int8_runs_quantized_and_agrees_roughly() -> None:
    # GoogLeNet: concatenations, ceil-mode pools and LRN (no quantized kernel) all in one
    shape = (3, 64, 64)
    work = build_workload("googlenet", "int8", 2, "cpu", "random", input_shape=shape)
    kinds = {type(m).__module__ for m in work.module.modules()}
    assert any("quantized" in k for k in kinds)
    lrn = [m for m in work.module.modules() if type(m).__name__ == "CaffeLRN"]
    assert len(lrn) == 2  # kept as float leaves between dequantize/quantize
    result = run_timed(work, TimingPlan(iterations=1, duration_s=0, warmup_s=0,
                                        warmup_iterations=0))
    assert result.images_per_s > 0
    ref = build_workload("googlenet", "fp32", 2, "cpu", "random", input_shape=shape)
    with torch.inference_mode():
        numbers = compare_outputs(ref.step(), work.step())
    assert numbers["max_abs"] < 0.25 * numbers["ref_max"]


def test_fp16_and_bf16_agree_with_fp32_on_alexnet() -> None:
    # Stated tolerances (Gaussian weights, constant input, max |fp32 logit| ~2.2):
    # fp16 (10-bit mantissa): same top-1 and top-5, max |diff| < 0.01;
    # bf16 (7-bit mantissa): same top-1, >= 3 of the top-5 shared, max |diff| < 0.06.
    checks = {a.precision: a for a in check_precisions("alexnet", ["fp32", "fp16", "bf16"], 1,
                                                       "cpu")}
    assert set(checks) == {"fp16", "bf16"}
    fp16, bf16 = checks["fp16"], checks["bf16"]
    assert fp16.top1_agreement == 1.0 and fp16.top5_agreement == 1.0
    assert fp16.max_abs_diff < 0.01 and fp16.mean_abs_diff < 0.002
    assert bf16.top1_agreement == 1.0 and bf16.top5_agreement >= 0.6
    assert bf16.max_abs_diff < 0.06 and bf16.mean_abs_diff < 0.015
    assert fp16.reference_max_abs > 1.0  # logits are not vanishingly small


def test_compare_outputs() -> None:
    ref = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])
    other = ref.clone()
    other[0, 6] = 0.5  # image 0: top-1 changes, one class leaves the top-5
    numbers = compare_outputs(ref, other)
    assert numbers["top1"] == 0.5
    assert numbers["top5"] == pytest.approx((4 / 5 + 1) / 2)
    assert numbers["max_abs"] == 5.5
    assert numbers["mean_abs"] == pytest.approx(5.5 / 14)


def test_int8_on_cuda_without_tensorrt_is_not_a_silent_fallback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_tensorrt", None)  # import fails
    with pytest.raises(PrecisionUnavailable) as info:
        tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    assert "TensorRT" in str(info.value) and "never falls back" in (info.value.hint or "")


def test_int8_training_is_refused() -> None:
    with pytest.raises(PrecisionUnavailable):
        build_workload("resnet18", "int8", 1, "cpu", input_shape=TINY,
                       options=RunOptions(mode="train"))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_step_runs(precision: str) -> None:
    work = build_workload("resnet18", precision, 2, "cpu", input_shape=TINY,
                          options=RunOptions(mode="train"))
    result = run_timed(work, TimingPlan(iterations=1, duration_s=0, warmup_s=0,
                                        warmup_iterations=0))
    assert result.workload["mode"] == "train"
    assert work.module.head[2].weight.grad is not None
    assert result.gflops == pytest.approx(
        3 * 2 * work.cost.macs_per_image * 2 / result.wall_s / 1e9)


def test_channels_last_and_threads() -> None:
    before = torch.get_num_threads()
    work = build_workload("mobilenet_v2", "fp32", 1, "cpu", input_shape=TINY,
                          options=RunOptions(channels_last=True, threads=1))
    assert work.input.is_contiguous(memory_format=torch.channels_last)
    run_timed(work, TimingPlan(iterations=1, duration_s=0, warmup_s=0, warmup_iterations=0))
    assert torch.get_num_threads() == before  # settings are put back


def test_cuda_requested_without_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(UsageError):
        build_workload("resnet18", "fp32", 1, "cuda", input_shape=TINY)
