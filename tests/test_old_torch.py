"""torch 1.x, as NVIDIA's JetPack 4/5 wheels are (1.10-1.13): what the package's `torch>=1.10`
floor needs, through stand-ins of what those versions lack (the real 1.10.2 was run by hand,
docs/workloads.md, "What of the GPU/Jetson-only paths is verified
on hardware")."""

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from jetbench.workload import macs  # noqa: E402
from jetbench.workload.build import build_workload  # noqa: E402
from jetbench.workload.precision import PrecisionUnavailable  # noqa: E402
from jetbench.workload.pytorch import oom_guard  # noqa: E402


@pytest.fixture
def torch_1x(monkeypatch):
    """No `with torch.device("meta")` and no convolution on meta tensors (torch < 2.0)."""
    monkeypatch.setattr(macs, "meta_kernels", lambda torch: False)
    macs.builtin_cost.cache_clear()
    yield
    macs.builtin_cost.cache_clear()


def test_builtin_cost_without_meta_kernels_counts_on_the_cpu(torch_1x):
    cost = macs.builtin_cost("mobilenet_v2")
    assert cost.params == 3_504_872  # MobileNetV2 1.0's published parameter count
    assert cost.macs_per_image == 300_774_272  # ~300M MACs (Sandler et al., table 3)


def test_a_dtype_without_kernels_is_unavailable_not_a_failure():
    # torch 1.10 on the CPU: fp16 convolution and bf16 batch norm have no kernel
    for text in ("\"unfolded2d_copy\" not implemented for 'Half'",
                 "\"batch_norm\" not implemented for 'BFloat16'"):
        with pytest.raises(PrecisionUnavailable, match="no kernel for this precision"):
            with oom_guard("resnet18 fp16 batch 1"):
                raise RuntimeError(text)


def test_int8_on_the_cpu_finds_torch_1_10s_quantize_fx(monkeypatch):
    # torch 1.10 has quantize_fx only under torch.quantization, not torch.ao.quantization
    from torch.ao.quantization import quantize_fx

    old_home = types.ModuleType("torch.quantization.quantize_fx")
    old_home.prepare_fx, old_home.convert_fx = quantize_fx.prepare_fx, quantize_fx.convert_fx
    monkeypatch.setitem(sys.modules, "torch.quantization.quantize_fx", old_home)
    monkeypatch.setitem(sys.modules, "torch.ao.quantization.quantize_fx", None)
    work = build_workload("mobilenet_v2", "int8", 1, "cpu", input_shape=(3, 32, 32))
    with torch.inference_mode():
        out = work.step()
    assert out.shape == (1, 1000)
