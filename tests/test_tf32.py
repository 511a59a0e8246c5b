"""fp32 means IEEE fp32; tf32 is its own precision (issue 24, item 3).

PyTorch lets cuDNN run "fp32" convolutions in TF32 by default on Ampere and newer (Orin, Thor):
torch 1.7-2.8 through `torch.backends.cudnn.allow_tf32` (default True), torch 2.9+ through
`torch.backends.cudnn.conv.fp32_precision` (default "tf32"). The stand-ins below have the two
shapes as PyTorch documents them; the installed torch (2.13) is the second."""

from types import SimpleNamespace

import pytest

from jetbench.workload.device_facts import set_fp32_math, tf32_unavailable_reason
from jetbench.workload.precision import PrecisionUnavailable, apply_precision, parse_precisions


def torch_2_9_shape():
    knob = lambda value: SimpleNamespace(fp32_precision=value)  # noqa: E731
    return SimpleNamespace(backends=SimpleNamespace(
        cudnn=SimpleNamespace(conv=knob("tf32"), rnn=knob("tf32")),
        cuda=SimpleNamespace(matmul=knob("none"))))


def torch_1_x_shape():
    return SimpleNamespace(backends=SimpleNamespace(
        cudnn=SimpleNamespace(allow_tf32=True), cuda=SimpleNamespace(
            matmul=SimpleNamespace(allow_tf32=False))))


def test_fp32_turns_tf32_off_through_whichever_api_the_torch_has():
    new = torch_2_9_shape()
    assert set_fp32_math(new, tf32=False) == "fp32_precision=ieee"
    b = new.backends
    assert (b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision,
            b.cuda.matmul.fp32_precision) == ("ieee", "ieee", "ieee")
    set_fp32_math(new, tf32=True)
    assert (b.cudnn.conv.fp32_precision, b.cuda.matmul.fp32_precision) == ("tf32", "tf32")
    old = torch_1_x_shape()
    assert set_fp32_math(old, tf32=False) == "allow_tf32=False"
    assert (old.backends.cudnn.allow_tf32, old.backends.cuda.matmul.allow_tf32) == (False, False)
    set_fp32_math(old, tf32=True)
    assert old.backends.cudnn.allow_tf32 and old.backends.cuda.matmul.allow_tf32


def test_a_workload_runs_fp32_as_ieee_and_puts_the_setting_back():
    torch = pytest.importorskip("torch")
    from jetbench.workload.base import RunOptions
    from jetbench.workload.pytorch import backend_settings

    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    assert before == "tf32"  # PyTorch's own default: the reason for this test
    with backend_settings(RunOptions(), "fp32"):
        assert conv.fp32_precision == "ieee"
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert conv.fp32_precision == before
    with backend_settings(RunOptions(), "tf32"):
        assert conv.fp32_precision == "tf32"


def _cuda_torch(capability):
    torch = torch_1_x_shape()
    torch.cuda = SimpleNamespace(get_device_capability=lambda device: capability)
    torch.device = lambda text: text
    return torch


def test_tf32_runs_on_ampere_and_newer_only():
    assert tf32_unavailable_reason(_cuda_torch((8, 7)), "cuda") is None  # Orin
    assert "7.2" in tf32_unavailable_reason(_cuda_torch((7, 2)), "cuda")  # Xavier
    assert "CPU" in tf32_unavailable_reason(_cuda_torch((8, 7)), "cpu")
    assert parse_precisions("tf32,fp32") == ["tf32", "fp32"]


def test_tf32_on_the_cpu_is_unavailable_never_silently_fp32():
    torch = pytest.importorskip("torch")
    net = torch.nn.Linear(2, 2)
    with pytest.raises(PrecisionUnavailable, match="CPU"):
        apply_precision(net, "tf32", "cpu", torch.zeros(1, 2))


def test_time_tf32_on_the_cpu_is_an_unavailable_row_not_a_crash():
    from conftest import run_cli

    r = run_cli("time", "--model", "alexnet", "--precision", "tf32", "--iterations", "1",
                "--duration", "0s", "--warmup", "0s", "--json", timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert '"status": "unavailable"' in r.stdout and "CUDA tensor-core" in r.stdout


def test_tf32_is_asked_without_touching_torch_2_9s_legacy_getters():
    """N17: on torch 2.9+ `torch.backends.cudnn.allow_tf32` raises RuntimeError once conv and
    RNN flags differ (checked on the installed torch 2.13: conv 'ieee', rnn left 'tf32');
    `hasattr` calls that getter, so asking for TF32 after an fp32 row ended the run."""

    class Cudnn:  # torch 2.9's CudnnModule: a legacy property whose getter raises
        conv = SimpleNamespace(fp32_precision="ieee")
        rnn = SimpleNamespace(fp32_precision="tf32")

        @property
        def allow_tf32(self):
            raise RuntimeError("PyTorch is checking whether allow_tf32 is enabled for cuDNN "
                               "without a specific operator name")

    torch = SimpleNamespace(backends=SimpleNamespace(
        cudnn=Cudnn(), cuda=SimpleNamespace(matmul=SimpleNamespace(fp32_precision="ieee"))),
        cuda=SimpleNamespace(get_device_capability=lambda device: (8, 7)),
        device=lambda text: text)
    assert tf32_unavailable_reason(torch, "cuda") is None
