"""--runtime: the same built-in network under PyTorch eager, TorchScript, torch.compile, ONNX
Runtime and TensorRT, each checked against eager before it is timed.

ONNX Runtime and TorchScript run for real here (CPU); torch.compile and TensorRT are tested
against stand-ins (compile is slow on a 2-core CI machine; there is no GPU or TensorRT here).
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from jetbench.errors import HardwareError, OutputMismatch, UsageError
from jetbench.run.timing import TimeRequest, time_models
from jetbench.workload.base import RunOptions
from jetbench.workload.build import build_workload
from jetbench.workload.precision import PrecisionUnavailable
from jetbench.workload.runtimes import (
    RuntimeUnavailable,
    check_runtimes,
    parse_runtimes,
)
from jetbench.workload.runtimes import build as runtime_build
from jetbench.workload.runtimes.onnx import export as onnx_export
from jetbench.workload.runtimes.output_check import RELATIVE_TOLERANCE
from jetbench.workload.runtimes.tensorrt import build as engine_build

from conftest import REPO, make_board

SMALL = (3, 64, 64)  # resnet18 on a small image: seconds, not minutes, on a CI core


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JETBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=str(REPO / "agent"),
                JETBENCH_CACHE_DIR=str(tmp_path / "cache"))


# -- names and rules ---------------------------------------------------------------------------
def test_parse_runtimes():
    assert parse_runtimes(None) == ("torch",)
    assert parse_runtimes("torch, ort,trt,jit,compile") == (
        "torch", "onnxruntime", "tensorrt", "torchscript", "compile")
    assert parse_runtimes("onnxruntime,onnxruntime") == ("onnxruntime",)
    with pytest.raises(UsageError) as err:
        parse_runtimes("onnxruntim")
    assert "did you mean onnxruntime" in str(err.value)
    assert "torch, torchscript, compile, onnxruntime, tensorrt" in err.value.hint
    with pytest.raises(UsageError):
        parse_runtimes(" , ")


@pytest.mark.parametrize("kwargs, words", [
    ({"models": ["model.onnx"]}, "built-in networks"),
    ({"models": ["resnet18"], "compile_flag": True}, "--compile is the runtime"),
    ({"models": ["resnet18"], "provider": "cpu"}, "--provider"),
    ({"models": ["resnet18"], "workload_python": "/usr/bin/python3"}, "--workload-python"),
])
def test_rules(kwargs, words):
    kwargs.setdefault("provider", None)
    with pytest.raises(UsageError) as err:
        check_runtimes(("torch", "torchscript"), **kwargs)
    assert words in str(err.value)
    check_runtimes(("torch",), ["model.onnx"], "cpu", True, "/usr/bin/python3")  # the default
    with pytest.raises(UsageError, match="--provider"):  # no ONNX Runtime row to take it
        check_runtimes(("torch",), ["resnet18"], "cpu")


# -- real runtimes on this CPU -----------------------------------------------------------------
def test_onnxruntime_runs_the_same_network_and_says_so(cache, monkeypatch):
    work = build_workload("resnet18", "fp32", 2, "cpu", input_shape=SMALL,
                          options=RunOptions(runtime="onnxruntime"))
    doc = work.describe()
    assert (doc["model"], doc["runtime"], doc["framework"]) == (
        "resnet18", "onnxruntime", "onnxruntime")
    assert doc["provider"] == "CPUExecutionProvider"
    check = doc["output_check"]
    assert check["checked"] and check["relative_diff"] <= RELATIVE_TOLERANCE["fp32"]
    assert check["top1_agreement"] == 1.0
    files = list(cache.glob("onnx/*.onnx"))
    assert [Path(doc["onnx_file"])] == files
    assert "resnet18-3x64x64-b2-float32-seed0-opset17" in files[0].name
    # cached: a second build exports nothing
    monkeypatch.setattr(onnx_export, "_export", lambda *a: pytest.fail("exported twice"))
    build_workload("resnet18", "fp32", 2, "cpu", input_shape=SMALL,
                   options=RunOptions(runtime="onnxruntime"))


def test_the_reference_runs_the_batchs_first_samples(monkeypatch):
    """A large batch is not run on the CPU whole to check it: its first SAMPLES samples are."""
    from jetbench.workload.runtimes import output_check

    seen = []
    real = output_check.get_spec

    def spy(name):
        spec = real(name)

        class Net:
            def __init__(self, net):
                self.net = net

            def eval(self):
                return self

            def __call__(self, x):
                seen.append(x.shape[0])
                return self.net(x)

        return SimpleNamespace(build=lambda seed: Net(spec.build(seed).eval()))

    monkeypatch.setattr(output_check, "get_spec", spy)
    work = build_workload("resnet18", "fp32", output_check.SAMPLES + 2, "cpu",
                          input_shape=SMALL, options=RunOptions(runtime="onnxruntime"))
    check = work.describe()["output_check"]
    assert seen == [output_check.SAMPLES] and check["samples_compared"] == output_check.SAMPLES
    assert check["checked"] and check["relative_diff"] <= RELATIVE_TOLERANCE["fp32"]


def test_a_runtime_that_computes_something_else_is_refused(monkeypatch):
    real = runtime_build.exported_onnx

    def other_weights(model, precision, batch, seed, shape):
        return real(model, precision, batch, seed + 1, shape)  # not the weights eager runs

    monkeypatch.setattr(runtime_build, "exported_onnx", other_weights)
    with pytest.raises(OutputMismatch) as err:
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(runtime="onnxruntime"))
    assert "differ from PyTorch eager" in str(err.value)
    assert "tolerance 0.001 for fp32" in str(err.value)


def test_fp32_that_may_run_in_tf32_is_judged_as_tf32_and_says_so():
    """N5: where TF32 cannot be switched off (ORT's TensorRT provider, ORT CUDA before 1.18)
    an "fp32" row was refused as a mismatch: emulated TF32 gives vgg16 1.43e-3 against fp32's
    1e-3. Here a workload whose outputs are eager's plus 0.2% of the largest output."""
    from jetbench.errors import OutputMismatch
    from jetbench.workload.runtimes.onnx.providers import CUDA_EP, TENSORRT_EP, choose
    from jetbench.workload.runtimes.output_check import check_outputs

    work = build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL)
    clean = work.step

    def off():
        out = clean()
        return out + 2e-3 * out.abs().max()

    work.step = off
    with pytest.raises(OutputMismatch, match="tolerance 0.001 for fp32"):
        check_outputs(work, "onnxruntime", 0)
    work.details = {**work.details, "tf32_possible": True}
    check = check_outputs(work, "onnxruntime", 0)
    assert check["judged_as"] == "tf32" and check["tolerance"] == RELATIVE_TOLERANCE["tf32"]
    # which providers cannot forbid it
    assert choose([TENSORRT_EP, CUDA_EP], None, "cuda", "fp32", (1, 20)).tf32_possible
    assert choose([CUDA_EP], None, "cuda", "fp32", (1, 17)).tf32_possible
    assert not choose([CUDA_EP], None, "cuda", "fp32", (1, 18)).tf32_possible
    assert not choose([TENSORRT_EP], None, "cuda", "fp16", (1, 20)).tf32_possible


def test_torchscript_is_traced_and_checked():
    work = build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                          options=RunOptions(runtime="torchscript"))
    assert work.describe()["runtime"] == "torchscript"
    assert type(work.module).__module__.startswith("torch.jit")
    assert work.details["output_check"]["relative_diff"] <= 1e-3


def test_compile_calls_torch_compile_and_is_checked(monkeypatch):
    import torch

    compiled = []

    def stand_in(net):
        compiled.append(net)
        return net

    monkeypatch.setattr(torch, "compile", stand_in)
    work = build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                          options=RunOptions(runtime="compile"))
    assert len(compiled) == 1 and work.describe()["runtime"] == "compile"
    assert work.details["output_check"]["checked"]


def test_compile_on_torch_without_it_is_an_unavailable_runtime(monkeypatch):
    """On torch < 2.0 (JetPack 4's wheels) the compile row is unavailable and the other
    runtimes still run; the --compile flag stays a usage error."""
    import torch

    monkeypatch.delattr(torch, "compile")
    with pytest.raises(RuntimeUnavailable, match="torch 2.0 or newer"):
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(runtime="compile"))
    with pytest.raises(UsageError, match="--compile needs torch 2.0"):
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(compile=True))


def test_exported_runtimes_do_not_train():
    with pytest.raises(RuntimeUnavailable) as err:
        build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(runtime="onnxruntime", mode="train"))
    assert "inference only" in str(err.value)


def test_time_rows_per_network_and_runtime(monkeypatch):
    """The issue's command, in library form: a row per network and runtime, matching outputs,
    TensorRT unavailable with what to install, the fastest named."""
    request = TimeRequest(models=("resnet18", "mobilenet_v2"), input_shape=SMALL,
                          runtimes=("torch", "onnxruntime", "tensorrt"), device="cpu",
                          iterations=2, duration_s=0.05, warmup_s=0.0)
    report = time_models(request)
    got = [(r.model, r.runtime, r.status) for r in report.rows]
    assert got == [("resnet18", "torch", "ok"), ("resnet18", "onnxruntime", "ok"),
                   ("resnet18", "tensorrt", "unavailable"), ("mobilenet_v2", "torch", "ok"),
                   ("mobilenet_v2", "onnxruntime", "ok"),
                   ("mobilenet_v2", "tensorrt", "unavailable")]
    doc = report.to_dict()
    trt = doc["results"][2]
    assert trt["workload"]["runtime"] == "tensorrt" and "tensorrt" in trt["message"]
    ort = doc["results"][1]
    assert ort["workload"]["output_check"]["relative_diff"] <= 1e-3
    speeds = {(r.model, r.runtime): r.images_per_s for r in report.rows if r.status == "ok"}
    for model in ("resnet18", "mobilenet_v2"):
        best = max(("torch", "onnxruntime"), key=lambda rt: speeds[(model, rt)])
        line = next(f for f in report.fastest if f" {model} " in f)
        # the fastest is named only where the spreads separate it (the one noise rule); on a
        # loaded machine the two may be within noise, and the line must then say so
        assert f"on cpu: {best} (" in line or (
            "are within noise" in line and "lengthen --duration" in line), line


# -- TensorRT against a stand-in ---------------------------------------------------------------
class FakeTrt:
    """The few TensorRT builder calls jetbench makes, recorded."""

    def __init__(self, version="10.3.0", parses=True, builds=True):
        self.__version__ = version
        self.calls = []
        self.parses, self.builds = parses, builds
        fake = self

        class Logger:
            WARNING = 2

            def __init__(self, level):
                pass

        class Network:
            pass

        class Config:
            def set_flag(self, flag):
                fake.calls.append(("set", flag))

            def clear_flag(self, flag):
                fake.calls.append(("clear", flag))

        class Builder:
            platform_has_fast_fp16 = True

            def __init__(self, logger):
                pass

            def create_network(self, flags):
                fake.calls.append(("network", flags))
                return Network()

            def create_builder_config(self):
                return Config()

            def build_serialized_network(self, network, config):
                fake.calls.append(("build",))
                return b"ENGINE" if fake.builds else None

        class OnnxParser:
            num_errors = 1

            def __init__(self, network, logger):
                pass

            def parse(self, data):
                fake.calls.append(("parse", len(data)))
                return fake.parses

            def get_error(self, i):
                return "Unsupported operator LRN"

        self.Logger, self.Builder, self.OnnxParser = Logger, Builder, OnnxParser
        self.BuilderFlag = SimpleNamespace(FP16="FP16", TF32="TF32")
        self.NetworkDefinitionCreationFlag = SimpleNamespace(EXPLICIT_BATCH=0)


def test_engine_build_sets_the_precision_and_caches(tmp_path):
    onnx = tmp_path / "resnet18-3x224x224-b1-float16-seed0-opset17-torch2.onnx"
    onnx.write_bytes(b"ONNX")
    trt = FakeTrt()
    path = engine_build.built_engine(trt, onnx, "fp16", "Orin_sm87", tmp_path)
    assert path.read_bytes() == b"ENGINE"
    assert path.name == onnx.stem + "-fp16-trt10.3.0-Orin_sm87.engine"
    assert ("set", "FP16") in trt.calls and ("network", 0) in trt.calls
    trt.calls.clear()
    assert engine_build.built_engine(trt, onnx, "fp16", "Orin_sm87", tmp_path) == path
    assert trt.calls == []  # cached: not rebuilt
    other = engine_build.built_engine(FakeTrt("10.7.0"), onnx, "fp16", "Orin_sm87", tmp_path)
    assert other != path  # another TensorRT: another engine
    fp32_onnx = tmp_path / "resnet18-3x224x224-b1-float32-seed0-opset17-torch2.onnx"
    fp32_onnx.write_bytes(b"ONNX")
    ieee = engine_build.built_engine(FakeTrt(), fp32_onnx, "fp32", "Orin_sm87", tmp_path)
    tf32 = FakeTrt()
    assert engine_build.built_engine(tf32, fp32_onnx, "tf32", "Orin_sm87", tmp_path) != ieee
    assert ("set", "TF32") in tf32.calls  # built, not the fp32 engine taken from the cache
    fp32 = FakeTrt("8.5.2")
    engine_build.build_serialized(fp32, onnx, "fp32")
    assert ("clear", "TF32") in fp32.calls and ("network", 1) in fp32.calls  # explicit batch


def test_bf16_engines_need_the_bf16_flag_on_weakly_typed_tensorrt(tmp_path):
    """N8: TensorRT 9-10 built "bf16" without BuilderFlag.BF16, so the engine computed fp32.
    A TensorRT without that flag (8.x) cannot build bf16 at all: unavailable."""
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"ONNX")
    with pytest.raises(PrecisionUnavailable, match="no BF16 builder flag"):
        engine_build.build_serialized(FakeTrt("8.6.1"), onnx, "bf16")
    trt = FakeTrt("10.3.0")
    trt.BuilderFlag.BF16 = "BF16"
    engine_build.build_serialized(trt, onnx, "bf16")
    assert ("set", "BF16") in trt.calls
    strong = FakeTrt("11.0.0")  # strongly typed: the file's bf16 types are the engine's
    engine_build.build_serialized(strong, onnx, "bf16")
    assert ("set", "BF16") not in strong.calls


@pytest.mark.parametrize("version, dtype", [("10.3.0", "float32"), ("11.0.0", None)])
def test_a_weakly_typed_tensorrt_builds_fp16_from_an_fp32_export(monkeypatch, version, dtype):
    """N7: the fp16 export traced the network in fp16 on the CPU, which torch builds without
    CPU half convolutions cannot (JetPack 5): every fp16 TensorRT row was unavailable. TensorRT
    8-10 make fp16 from an fp32 file under the FP16 flag; 11 takes the file's types."""
    asked = []

    class Stop(Exception):
        pass

    def exported(model, precision, batch, seed, shape, dtype=None):
        asked.append(dtype)
        raise Stop

    cuda = SimpleNamespace(get_device_capability=lambda i: (8, 7),
                           get_device_name=lambda i: "Orin")
    monkeypatch.setattr(runtime_build, "import_tensorrt", lambda: FakeTrt(version))
    monkeypatch.setattr(runtime_build, "import_torch", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(runtime_build, "resolve_device", lambda d: "cuda:0")
    monkeypatch.setattr(runtime_build, "is_cuda", lambda d: True)
    monkeypatch.setattr(runtime_build, "cuda_index", lambda torch, d: 0)
    monkeypatch.setattr(runtime_build, "exported_onnx", exported)
    with pytest.raises(Stop):
        build_workload("resnet18", "fp16", 1, "cuda", input_shape=SMALL,
                       options=RunOptions(runtime="tensorrt"))
    assert asked == [dtype]


def test_bf16_under_onnxruntime_is_unavailable_before_exporting(monkeypatch):
    """N8: the opset-17 export has no bfloat16 Conv; ORT refused the file and the run ended."""
    monkeypatch.setattr(runtime_build, "exported_onnx",
                        lambda *a, **k: pytest.fail("exported anyway"))
    with pytest.raises(PrecisionUnavailable, match="bfloat16 Conv"):
        build_workload("resnet18", "bf16", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(runtime="onnxruntime"))


def test_engine_build_failures_say_why(tmp_path):
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"ONNX")
    with pytest.raises(HardwareError, match="Unsupported operator LRN"):
        engine_build.build_serialized(FakeTrt(parses=False), onnx, "fp32")
    with pytest.raises(HardwareError, match="could not build"):
        engine_build.build_serialized(FakeTrt(builds=False), onnx, "fp32")
    assert not list(tmp_path.glob("*.engine"))


def test_tensorrt_needs_a_cuda_gpu(monkeypatch):
    monkeypatch.setattr(runtime_build, "import_tensorrt", lambda: FakeTrt())
    with pytest.raises(RuntimeUnavailable, match="runs on a CUDA GPU"):
        build_workload("resnet18", "fp16", 1, "cpu", input_shape=SMALL,
                       options=RunOptions(runtime="tensorrt"))


def test_tensorrt_row_is_built_from_the_export_named_and_checked(monkeypatch, cache):
    """The whole TensorRT path with the GPU parts stood in: export, engine build (cached under
    the GPU's name), the engine workload named for the network and checked against eager."""
    import contextlib

    trt = FakeTrt()
    current = [0]  # the current CUDA device, as torch.cuda.device(i) sets it for its block

    @contextlib.contextmanager
    def device(index):
        before, current[0] = current[0], index
        yield
        current[0] = before

    cuda = SimpleNamespace(get_device_capability=lambda i: (8, 7),
                           get_device_name=lambda i: "Orin", device=device)
    loaded = []
    built_on = []
    real_built = runtime_build.built_engine

    def built_engine(*args):
        built_on.append(current[0])
        return real_built(*args)

    monkeypatch.setattr(runtime_build, "built_engine", built_engine)

    def engine_workload(path, precision, batch, dev, input_mode, shape):
        loaded.append(path)
        # what the engine computes, stood in by eager on the CPU
        work = build_workload("resnet18", precision, batch, "cpu", input_shape=SMALL)
        work.framework, work.details = "tensorrt", {"tensorrt_version": trt.__version__}
        work.model = path
        return work

    monkeypatch.setattr(runtime_build, "import_tensorrt", lambda: trt)
    monkeypatch.setattr(runtime_build, "import_torch", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(runtime_build, "resolve_device", lambda d: "cuda:0")
    monkeypatch.setattr(runtime_build, "is_cuda", lambda d: True)
    monkeypatch.setattr(runtime_build, "cuda_index", lambda torch, d: 1)
    monkeypatch.setattr(runtime_build, "build_engine_workload", engine_workload)
    work = build_workload("resnet18", "fp32", 1, "cuda:1", input_shape=SMALL,
                          options=RunOptions(runtime="tensorrt"))
    assert built_on == [1]  # N11: the engine is built on the GPU the row runs on, not cuda:0
    doc = work.describe()
    assert (doc["model"], doc["runtime"]) == ("resnet18", "tensorrt")
    assert loaded == [doc["engine_file"]] and doc["engine_file"].endswith(
        "-fp32-trt10.3.0-Orin_sm87.engine")
    assert Path(doc["onnx_file"]).parent == cache / "onnx"
    assert doc["output_check"]["checked"]
    assert ("clear", "TF32") in trt.calls


# -- through the CLI ---------------------------------------------------------------------------
@pytest.mark.long
def test_time_cli_json(tmp_path):
    """The issue's command: a row per network and runtime with matching outputs."""
    result = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "time", "--model", "resnet18,alexnet",
         "--runtime", "torch,onnxruntime", "--json", "--iterations", "2", "--duration", "0",
         "--warmup", "0", "--device", "cpu"],
        capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    rows = [(r["workload"]["model"], r["workload"]["runtime"], r["status"])
            for r in doc["results"]]
    assert rows == [("resnet18", "torch", "ok"), ("resnet18", "onnxruntime", "ok"),
                    ("alexnet", "torch", "ok"), ("alexnet", "onnxruntime", "ok")]
    for r in doc["results"]:
        if r["workload"]["runtime"] == "onnxruntime":
            assert r["workload"]["output_check"]["relative_diff"] <= 1e-3
    assert len(doc["fastest"]) == 2


@pytest.mark.parametrize("args, words", [
    (["time", "--runtime", "onnxrt"], "not a runtime"),
    (["time", "--model", "{tmp}/x.onnx", "--runtime", "onnxruntime"], "built-in networks"),
    (["time", "--runtime", "torch,compile", "--compile"], "--compile is the runtime"),
    (["time", "--runtime", "torch", "--provider", "cpu"], "--provider"),
])
def test_usage_errors(tmp_path, args, words):
    (tmp_path / "x.onnx").write_bytes(b"not run")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = subprocess.run([sys.executable, "-m", "jetbench.cli.main", *args],
                            capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert result.returncode == 1, result.stderr  # errors.EXIT_USAGE
    assert words in result.stderr and "Traceback" not in result.stderr


def test_measure_one_result_per_runtime(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure",
         "--model", "resnet18", "--input-shape", "3,64,64", "--runtime",
         "torch,onnxruntime,tensorrt", "--provider", "cpu", "--freq", "max", "--iterations",
         "2", "--duration", "0.2", "--warmup", "0", "--device", "cpu", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    docs = {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}
    stems = sorted(docs)
    assert [s.split("-gpu")[1] for s in stems] == [
        "625mhz-onnxruntime.json", "625mhz-tensorrt.json", "625mhz.json"]
    by_runtime = {d["workload"]["runtime"]: d for d in docs.values()}
    assert by_runtime["onnxruntime"]["status"] == "ok"
    assert by_runtime["onnxruntime"]["efficiency"]["images_per_j"] > 0
    assert by_runtime["tensorrt"]["status"] == "unavailable"
    assert by_runtime["onnxruntime"]["workload"]["provider"] == "CPUExecutionProvider"
    assert "provider" not in by_runtime["tensorrt"]["workload"]  # --provider is ORT's alone
    assert "provider" not in by_runtime["torch"]["workload"]
    assert "tensorrt" in by_runtime["tensorrt"]["message"].lower()
    assert sorted(p.name.split("-gpu")[1] for p in out.glob("*.csv")) == [
        "625mhz-onnxruntime.csv", "625mhz.csv"]  # the run that never ran has no trace
    assert f"results: {out} (3 JSON, 2 CSV power trace(s))" in result.stdout
    for cmd, words in ((["--cmd", "true"], "--runtime does not go with --cmd"),
                       (["--model", "sim:alexnet"], "built-in networks")):
        bad = subprocess.run(
            [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure",
             "--runtime", "onnxruntime", *cmd, "--out", str(tmp_path / "never")],
            capture_output=True, text=True, timeout=120, env=_env(tmp_path))
        assert bad.returncode == 1 and words in bad.stderr, bad.stderr
        assert not (tmp_path / "never").exists()


def test_sweep_table_says_which_runtime_ran_each_row():
    from rich.console import Console

    from jetbench.report.tables import long_table

    def doc(runtime, provider=None):
        work = {"model": "resnet18", "precision": "fp32", "batch": 1, "runtime": runtime}
        if provider:
            work["provider"] = provider
        return {"schema": "jetbench.result/1", "status": "ok", "workload": work,
                "throughput": {"images_per_s": 10.0}, "board": {"model": "b"}}

    console = Console(width=200, record=True)
    console.print(long_table([doc("torch"), doc("onnxruntime", "CPUExecutionProvider")]))
    text = console.export_text()
    assert "runtime" in text and "onnxruntime (cpu)" in text
    console = Console(width=200, record=True)
    console.print(long_table([doc("torch"), doc("torch")]))
    assert "runtime" not in console.export_text()  # one runtime: no column for it


def test_fastest_runtime_line_prints_figures_not_exponents():
    from jetbench.run.timing import TimeRow, fastest_runtime

    def row(runtime, ips):
        return TimeRow("alexnet", "fp16", 64, "cuda:0", "ok", runtime=runtime,
                       result=SimpleNamespace(images_per_s=ips, cv=0.01))

    [line] = fastest_runtime([row("torch", 1234.5), row("tensorrt", 2345.6)])
    assert line == ("fastest for alexnet fp16 batch 64 on cuda:0: tensorrt (2350 img/s; "
                    "torch 1230), 1.90x PyTorch eager")


# -- one runtime's failure is its row (issue 37, N1) -------------------------------------------
def test_a_missing_ort_provider_is_an_unavailable_row_and_torch_still_runs(tmp_path):
    """The CPU onnxruntime wheel on a CUDA machine (seen on an H100): `--device cuda` ended
    the whole run with 'no ONNX Runtime provider for it'. Here `--provider tensorrt` asks for
    a provider this ORT lacks the same way (pick_provider's one path for both)."""
    result = subprocess.run(
        [sys.executable, "-m", "jetbench.cli.main", "time", "--model", "resnet18",
         "--input-shape", "3,64,64", "--runtime", "torch,onnxruntime", "--provider", "tensorrt",
         "--json", "--iterations", "2", "--duration", "0", "--warmup", "0", "--device", "cpu"],
        capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # --json stays one document
    rows = {r["workload"]["runtime"]: r for r in doc["results"]}
    assert rows["torch"]["status"] == "ok"
    assert rows["onnxruntime"]["status"] == "unavailable"
    assert "not available in this ONNX Runtime (available:" in rows["onnxruntime"]["message"]


def test_a_runtime_that_raises_is_a_failed_row_and_the_others_are_timed(monkeypatch):
    """Any exception of one runtime's build (a TensorRT parse error, an Inductor error) is
    that row's `failed` status with its first line; the rows before and after still run."""
    from jetbench.run import timing

    real = timing.build_workload

    def build(model, precision, batch, device, input_mode, options, shape):
        if options.runtime == "torchscript":
            raise RuntimeError("tracer exploded\nstack line 2")
        return real(model, precision, batch, device, input_mode, options, shape)

    monkeypatch.setattr(timing, "build_workload", build)
    request = TimeRequest(models=("resnet18",), input_shape=SMALL, device="cpu",
                          runtimes=("torch", "torchscript", "onnxruntime"), iterations=2,
                          duration_s=0.0, warmup_s=0.0)
    report = time_models(request)
    assert [(r.runtime, r.status) for r in report.rows] == [
        ("torch", "ok"), ("torchscript", "failed"), ("onnxruntime", "ok")]
    failed = report.to_dict()["results"][1]
    assert failed["message"] == "RuntimeError: tracer exploded"  # its first line, typed
    assert failed["workload"]["runtime"] == "torchscript"


def test_time_exits_2_after_writing_every_row_when_one_failed():
    from jetbench.cli.workload import _exit_if_failed
    from jetbench.errors import EXIT_HARDWARE, HardwareError
    from jetbench.run.timing import TimeRow

    rows = [TimeRow("m", "fp32", 1, "cpu", "ok"),
            TimeRow("m", "fp32", 1, "cpu", "failed", message="x", runtime="compile")]
    with pytest.raises(HardwareError, match="1 of 2 row"):
        _exit_if_failed(rows)
    assert HardwareError("x").exit_code == EXIT_HARDWARE
    _exit_if_failed(rows[:1])  # all ran: no error


def test_the_compile_flag_compiles_at_build_not_in_the_warm_up(monkeypatch):
    """N19: `time --compile` compiled at the warm-up's first iteration, and a compilation
    longer than the warm-up's cap (3 x --warmup + 2 s) ended the warm-up unstable."""
    import torch

    calls = []

    class Counted(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            calls.append(1)  # the compiled module's first call is where Inductor compiles
            return self.net(x)

    monkeypatch.setattr(torch, "compile", Counted)
    work = build_workload("resnet18", "fp32", 1, "cpu", input_shape=SMALL,
                          options=RunOptions(compile=True))
    assert len(calls) == 1  # at build
    work.step()
    assert len(calls) == 2


def test_a_16_bit_export_the_cpu_cannot_run_is_made_on_the_gpu(monkeypatch, cache):
    """N7: the exporter runs the network once, and NVIDIA's JetPack 5 torch has no CPU half
    convolution: every fp16 ONNX Runtime row was unavailable on a Jetson with a GPU."""
    import torch

    tried = []

    def export_on(torch_, net, example, path, device):
        tried.append(device)
        if device == "cpu":
            raise RuntimeError('"slow_conv2d_cpu" not implemented for \'Half\'')
        Path(path).write_bytes(b"ONNX")

    monkeypatch.setattr(onnx_export, "_export_on", export_on)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    path = onnx_export.exported_onnx("resnet18", "fp16", 1, 0, SMALL)
    assert tried == ["cpu", "cuda"] and path.read_bytes() == b"ONNX"
    tried.clear()
    with pytest.raises(PrecisionUnavailable, match="slow_conv2d_cpu"):  # the CPU's reason
        onnx_export.exported_onnx("resnet18", "fp32", 2, 0, SMALL)  # fp32: never the GPU
    assert tried == ["cpu"]


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tensorrt_tf32_and_bf16_are_unavailable_below_ampere_like_torchs(monkeypatch, precision):
    """Issue 60, 4: on a Xavier (compute capability 7.2) TensorRT's TF32/BF16 flags permit
    and do not require: the engine computes fp32 under the label. torch's row says
    `unavailable` there; TensorRT's must too, before anything is exported or built."""
    cuda = SimpleNamespace(get_device_capability=lambda i: (7, 2),
                           get_device_name=lambda i: "Xavier")
    monkeypatch.setattr(runtime_build, "import_tensorrt", lambda: FakeTrt("10.3.0"))
    monkeypatch.setattr(runtime_build, "import_torch", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(runtime_build, "resolve_device", lambda d: "cuda:0")
    monkeypatch.setattr(runtime_build, "is_cuda", lambda d: True)
    monkeypatch.setattr(runtime_build, "cuda_index", lambda torch, d: 0)
    monkeypatch.setattr(runtime_build, "exported_onnx",
                        lambda *a, **k: pytest.fail("exported anyway"))
    with pytest.raises(PrecisionUnavailable, match="compute capability 8.0 or newer.*7.2"):
        build_workload("resnet18", precision, 1, "cuda", input_shape=SMALL,
                       options=RunOptions(runtime="tensorrt"))


def test_onnxruntime_tf32_is_unavailable_below_ampere(monkeypatch):
    """ORT's use_tf32 only permits TF32 math: a 7.2 GPU computes IEEE fp32 under the label."""
    cuda = SimpleNamespace(get_device_capability=lambda d: (7, 2))
    fake_torch = SimpleNamespace(cuda=cuda, device=lambda d: d)
    monkeypatch.setattr(runtime_build, "import_onnxruntime", lambda: None)
    monkeypatch.setattr(runtime_build, "import_torch", lambda: fake_torch)
    monkeypatch.setattr(runtime_build, "resolve_device", lambda d: "cuda:0")
    monkeypatch.setattr(runtime_build, "exported_onnx",
                        lambda *a, **k: pytest.fail("exported anyway"))
    with pytest.raises(PrecisionUnavailable, match="tf32 needs compute capability 8.0"):
        build_workload("resnet18", "tf32", 1, "cuda", input_shape=SMALL,
                       options=RunOptions(runtime="onnxruntime"))
