"""The GPU-only gates through stand-ins of torch.cuda (capability, devices, events), of
torch_tensorrt versions (a missing libnvinfer, 1.x ptq, 2.x ts.ptq, dynamo with or without
ModelOpt) and of old torch (no OutOfMemoryError, no compile, no QConfigMapping). Capabilities
are NVIDIA's published ones: Xavier 7.2, Orin 8.7, Pascal 6.1."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from jetbench.errors import OutOfMemory, UsageError
from jetbench.workload import precision as prec
from jetbench.workload import pytorch as wl
from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.precision import PrecisionUnavailable, apply_precision, tensorrt_int8
from jetbench.workload.pytorch import resolve_device
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed

torch = pytest.importorskip("torch")

TINY = (3, 8, 8)


def capability(monkeypatch, cap, bf16_supported=True, strict_signature=True):
    calls = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cap)
    if strict_signature:
        def is_bf16_supported(including_emulation=True):
            calls.append(including_emulation)
            return bf16_supported or including_emulation
    else:
        def is_bf16_supported():
            calls.append(None)
            return bf16_supported
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    return calls


# -- 4: BF16 ------------------------------------------------------------------------------
def test_bf16_on_xavier_is_unavailable_although_torch_says_supported(monkeypatch):
    capability(monkeypatch, (7, 2), bf16_supported=True)  # emulated: torch says True
    assert torch.cuda.is_bf16_supported()
    with pytest.raises(PrecisionUnavailable, match="compute capability 7.2"):
        apply_precision(torch.nn.Linear(2, 2), "bf16", "cuda", torch.zeros(1, 2))


def test_bf16_on_orin_asks_without_emulation(monkeypatch):
    calls = capability(monkeypatch, (8, 7), bf16_supported=True)
    assert prec.bf16_unavailable_reason(torch, "cuda:0") is None
    assert calls == [False]


def test_bf16_refused_when_the_strict_check_says_no(monkeypatch):
    capability(monkeypatch, (8, 0), bf16_supported=False)
    assert "not supported" in prec.bf16_unavailable_reason(torch, "cuda")


def test_bf16_on_an_old_torch_signature(monkeypatch):
    calls = capability(monkeypatch, (8, 6), bf16_supported=True, strict_signature=False)
    assert prec.bf16_unavailable_reason(torch, "cuda") is None
    assert calls == [None]
    capability(monkeypatch, (6, 1), bf16_supported=True, strict_signature=False)
    assert "6.1" in prec.bf16_unavailable_reason(torch, "cuda:1")


# -- 5: INT8 through torch_tensorrt ------------------------------------------------------------
def test_trt_import_oserror_is_unavailable_not_a_traceback(tmp_path, monkeypatch):
    pkg = tmp_path / "torch_tensorrt"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "raise OSError('libnvinfer.so.10: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch_tensorrt", raising=False)
    with pytest.raises(PrecisionUnavailable, match="libnvinfer") as info:
        tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    assert "OSError" in str(info.value)


def fake_trt(kind, compile_error=None):
    mod = types.ModuleType("torch_tensorrt")
    mod.__version__ = {"1x": "1.4.0", "ts": "2.2.0", "dynamo": "2.13.0"}[kind]
    mod.calls = []

    class Input:
        def __init__(self, shape):
            self.shape = shape

    def compile(module, **kw):  # noqa: A001 - the real name
        mod.calls.append(("compile", kw))
        if compile_error is not None:
            raise compile_error
        return "engine"

    ptq = types.SimpleNamespace(
        DataLoaderCalibrator=lambda loader, **kw: ("calibrator", kw["algo_type"]),
        CalibrationAlgo=types.SimpleNamespace(ENTROPY_CALIBRATION_2="entropy2"))
    mod.Input, mod.compile = Input, compile
    if kind == "1x":
        mod.ptq = ptq
    elif kind == "ts":
        mod.ts = types.SimpleNamespace(ptq=ptq)
        mod.dynamo = types.SimpleNamespace()
    else:
        mod.ts = types.SimpleNamespace()  # 2.3+: no ts.ptq any more
        mod.dynamo = types.SimpleNamespace(compile=lambda program, **kw: (
            mod.calls.append(("dynamo", kw)) or "dynamo-engine"))
    return mod


@pytest.mark.parametrize("kind,path", [("1x", "ptq"), ("ts", "ts-ptq")])
def test_trt_ts_ptq_paths_compile_with_ir_ts_and_a_calibrator(monkeypatch, kind, path):
    trt = fake_trt(kind)
    monkeypatch.setitem(sys.modules, "torch_tensorrt", trt)
    assert prec.tensorrt_int8_path(trt) == path
    assert tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2)) == "engine"
    (_, kw), = trt.calls
    assert kw["ir"] == "ts"
    assert torch.int8 in kw["enabled_precisions"]
    assert kw["calibrator"] == ("calibrator", "entropy2")


def test_trt_dynamo_without_modelopt_is_unavailable_with_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_tensorrt", fake_trt("dynamo"))
    monkeypatch.setitem(sys.modules, "modelopt", None)
    monkeypatch.setitem(sys.modules, "modelopt.torch.quantization", None)
    with pytest.raises(PrecisionUnavailable, match="2.13.0 offers no INT8") as info:
        tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    assert "modelopt" in info.value.hint


def test_trt_dynamo_with_modelopt_quantizes_then_compiles(monkeypatch):
    trt = fake_trt("dynamo")
    monkeypatch.setitem(sys.modules, "torch_tensorrt", trt)
    quantized = []
    mtq = types.ModuleType("modelopt.torch.quantization")
    mtq.INT8_DEFAULT_CFG = {"int8": True}

    def quantize(model, cfg, forward_loop):
        forward_loop(model)  # calibration on the synthetic input
        quantized.append(cfg)
        return model

    mtq.quantize = quantize
    for name in ("modelopt", "modelopt.torch"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "modelopt.torch.quantization", mtq)
    monkeypatch.setitem(sys.modules, "modelopt.torch.quantization.utils", None)
    assert prec.tensorrt_int8_path(trt) == "dynamo-modelopt"
    assert tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2)) == "dynamo-engine"
    assert quantized == [{"int8": True}]
    (what, kw), = trt.calls
    assert what == "dynamo" and torch.int8 in kw["enabled_precisions"]


def test_trt_out_of_memory_is_oom(monkeypatch):
    error = RuntimeError("[TRT] [E] 1: Requested amount of GPU memory (1073741824 bytes) "
                         "could not be allocated. There may not be enough free memory.")
    monkeypatch.setitem(sys.modules, "torch_tensorrt", fake_trt("ts", compile_error=error))
    with pytest.raises(OutOfMemory):
        tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2))


def test_trt_other_build_failure_is_unavailable(monkeypatch):
    error = RuntimeError("Unsupported operator: aten::foo")
    monkeypatch.setitem(sys.modules, "torch_tensorrt", fake_trt("ts", compile_error=error))
    with pytest.raises(PrecisionUnavailable, match="aten::foo"):
        tensorrt_int8(torch.nn.Linear(2, 2), torch.zeros(1, 2))


# -- 6: Tegra OOM ---------------------------------------------------------------------------
class _TegraOom(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError('NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/opt/pytorch/c10/cuda/'
                           'CUDACachingAllocator.cpp":1154, please report a bug to PyTorch.')


def test_tegra_nvml_assert_is_out_of_memory():
    work = build_workload("tegra", "fp32", 1, "cpu", input_shape=TINY, module=_TegraOom())
    with pytest.raises(OutOfMemory):
        run_timed(work, TimingPlan(iterations=1, duration_s=0, warmup_s=0, warmup_iterations=0))


# -- 7: old torch ---------------------------------------------------------------------------
def test_memory_limit_without_torch_out_of_memory_error(monkeypatch):
    monkeypatch.delattr(torch, "OutOfMemoryError")
    with pytest.raises(OutOfMemory):
        build_workload("resnet18", "fp32", 4, "cpu", input_shape=(3, 32, 32),
                       options=RunOptions(memory_limit_bytes=1000))


def test_compile_without_torch_compile_is_a_usage_error(monkeypatch):
    monkeypatch.delattr(torch, "compile")
    with pytest.raises(UsageError, match="needs torch 2.0"):
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=(3, 32, 32),
                       options=RunOptions(compile=True))


def test_int8_cpu_before_qconfig_mapping_uses_the_dict_api(monkeypatch):
    import torch.ao.quantization as q

    monkeypatch.delattr(q, "get_default_qconfig_mapping")
    seen = {}

    def prepare_fx(model, qconfig, *args, **kw):
        seen.update(qconfig=qconfig, args=args, kw=kw)
        return model

    prec._prepare_fx(prepare_fx, torch.nn.Linear(2, 2), "fbgemm", torch.zeros(1, 2), int)
    assert list(seen["qconfig"]) == [""] and seen["args"] == ()
    assert seen["kw"] == {"prepare_custom_config_dict": {"non_traceable_module_class": [int]}}


# -- 8: CUDA graph only on CUDA ------------------------------------------------------------
def test_cuda_graph_with_device_cpu_on_a_gpu_machine_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(UsageError, match="--cuda-graph needs the workload on a CUDA device"):
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=(3, 32, 32),
                       options=RunOptions(cuda_graph=True))


# -- 9: cuda:N ------------------------------------------------------------------------------
class FakeCuda:
    """torch.cuda's device, synchronize, Event and memory calls, recording the device used."""

    def __init__(self, monkeypatch, count=2):
        self.current, self.log = 0, []
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "device_count", lambda: count)
        monkeypatch.setattr(cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(cuda, "device", self.device)
        monkeypatch.setattr(cuda, "synchronize", lambda d=None: self.log.append(("sync", d)))
        monkeypatch.setattr(cuda, "Event", self.event)
        monkeypatch.setattr(cuda, "get_device_properties",
                            lambda i: types.SimpleNamespace(total_memory=8 << 30, index=i))
        monkeypatch.setattr(cuda, "set_per_process_memory_fraction",
                            lambda f, d=None: self.log.append(("fraction", d)))

    def device(self, index):
        fake = self

        class _Ctx:
            def __enter__(self):
                self.saved, fake.current = fake.current, index

            def __exit__(self, *exc):
                fake.current = self.saved

        return _Ctx()

    def event(self, enable_timing=False):
        fake = self

        class _Event:
            def record(self):
                fake.log.append(("event", fake.current))

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 1.0

        return _Event()


def test_cuda_n_is_kept_and_checked(monkeypatch):
    FakeCuda(monkeypatch, count=2)
    assert resolve_device("cuda:1") == "cuda:1"
    assert resolve_device("CUDA") == "cuda"
    with pytest.raises(UsageError, match="sees 2 CUDA device"):
        resolve_device("cuda:2")


def test_cuda_n_times_with_events_and_sync_on_that_device(monkeypatch):
    work = build_workload("resnet18", "fp32", 1, "cpu", input_shape=(3, 32, 32))
    fake = FakeCuda(monkeypatch, count=2)
    work = dataclasses.replace(work, device="cuda:1", sync=wl._cuda_sync(torch, "cuda:1"),
                               step=lambda: None)
    run_timed(work, TimingPlan(iterations=3, duration_s=0, warmup_s=0, warmup_iterations=0))
    events = [d for what, d in fake.log if what == "event"]
    assert events and set(events) == {1}
    assert ("sync", 1) in fake.log and fake.current == 0


def test_memory_limit_caps_the_chosen_gpu(monkeypatch):
    fake = FakeCuda(monkeypatch, count=2)
    wl._check_memory_limit(10, 1 << 30, "cuda:1", "x")
    assert fake.log == [("fraction", 1)]


def test_a_cuda_graph_replay_gives_the_graphs_outputs():
    """N9: `torch.cuda.CUDAGraph.replay()` returns None, so the output check of `--runtime
    torchscript|compile --cuda-graph` read None and the run ended. The stand-in follows
    torch/cuda/graphs.py: capture runs the step once inside `torch.cuda.graph(g)`, and each
    replay rewrites the tensors captured then."""
    import contextlib
    from types import SimpleNamespace

    from jetbench.workload.pytorch import _capture_graph

    class Graph:
        replays = 0

        def replay(self):
            Graph.replays += 1  # returns None, as torch's does

    class Stream:
        def wait_stream(self, other):
            pass

    cuda = SimpleNamespace(Stream=Stream, current_stream=Stream, CUDAGraph=Graph,
                           stream=lambda s: contextlib.nullcontext(),
                           graph=lambda g: contextlib.nullcontext())
    torch = SimpleNamespace(cuda=cuda)
    static = object()  # the output tensor the capture leaves
    replay = _capture_graph(torch, lambda: static, contextlib.nullcontext, "cuda:0")
    assert replay() is static and Graph.replays == 1


def test_compile_on_cuda_needs_triton_and_compute_capability_7():
    """N2: Inductor raises TritonMissing or GPUTooOldForTriton at the first call
    (torch/_inductor/scheduler.py, Scheduler.create_backend); jetbench says so before it
    builds, as an unavailable row, on a Nano/TX1/TX2 (5.3, 5.3, 6.2) or without Triton."""
    from types import SimpleNamespace

    from jetbench.workload.pytorch import compile_unavailable_reason

    def torch(triton: bool, capability):
        return SimpleNamespace(utils=SimpleNamespace(_triton=SimpleNamespace(
            has_triton=lambda: triton)), device=lambda d: d,
            cuda=SimpleNamespace(get_device_capability=lambda d: capability))

    assert compile_unavailable_reason(torch(True, (8, 7)), "cuda") is None  # Orin
    assert "Triton is not installed" in compile_unavailable_reason(torch(False, (8, 7)), "cuda")
    assert "this GPU is 5.3" in compile_unavailable_reason(torch(True, (5, 3)), "cuda:0")
    assert compile_unavailable_reason(torch(False, (5, 3)), "cpu") is None  # C++ on the CPU


def test_compile_on_an_old_gpu_with_triton_installed_names_the_gpu_not_triton():
    """Issue 60, 7: torch's has_triton() is False on a GPU below 7.0 even with Triton installed
    (it checks the device), so the row said "Triton is not installed" on a TX2 that has it."""
    from types import SimpleNamespace

    from jetbench.workload.pytorch import compile_unavailable_reason

    def torch(package: bool, capability):
        usable = package and capability >= (7, 0)  # as torch.utils._triton.has_triton
        return SimpleNamespace(utils=SimpleNamespace(_triton=SimpleNamespace(
            has_triton_package=lambda: package, has_triton=lambda: usable)),
            device=lambda d: d, cuda=SimpleNamespace(get_device_capability=lambda d: capability))

    tx2 = compile_unavailable_reason(torch(True, (6, 2)), "cuda")
    assert "this GPU is 6.2" in tx2 and "not installed" not in tx2
    assert "not installed" in compile_unavailable_reason(torch(False, (8, 7)), "cuda")
    assert compile_unavailable_reason(torch(True, (8, 7)), "cuda") is None
