"""ONNX Runtime providers as onnxruntime-gpu behaves (issue 24, items 5, 6, 10 and 3's ORT part).

The stand-in behaves as ORT documents: `get_available_providers()` lists every provider built
in, whether its libraries load or not; a provider that fails to load is dropped from the
session (`get_providers()`) with a log line on stderr, and the session runs on the next one;
InferenceSession does not raise for it."""

import os
import sys

import pytest

from jetbench.errors import HardwareError
from jetbench.workload.base import RunOptions
from jetbench.workload.runtimes.onnx.model import open_session
from jetbench.workload.runtimes.onnx.providers import CPU_EP, CUDA_EP, TENSORRT_EP, choose

MISSING = ("[W:onnxruntime:Default, provider_bridge_ort.cc:1862 TryGetProviderInfo_TensorRT] "
           "Failed to load library libonnxruntime_providers_tensorrt.so with error: "
           "libnvinfer.so.10: cannot open shared object file: No such file or directory\n")


class FakeOrt:
    """onnxruntime-gpu built with TensorRT, on a machine without TensorRT's libraries."""

    __version__ = "1.18.1"

    def __init__(self, broken=(TENSORRT_EP,)):
        self.broken = broken
        self.sessions = []

    def get_available_providers(self):
        return [TENSORRT_EP, CUDA_EP, CPU_EP]

    class SessionOptions:
        log_severity_level = 2
        intra_op_num_threads = 0

    def InferenceSession(self, model, sess_options=None, providers=()):  # noqa: N802
        ort = self

        class Session:
            def __init__(self):
                self.asked = list(providers)
                names = [p[0] if isinstance(p, tuple) else p for p in providers]
                for name in names:
                    if name in ort.broken and sess_options.log_severity_level <= 2:
                        os.write(2, MISSING.encode())  # ORT's C++ logger, on fd 2
                self.loaded = [n for n in names if n not in ort.broken]

            def get_providers(self):
                return self.loaded

        session = Session()
        self.sessions.append(session)
        return session


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JETBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_without_provider_the_next_one_that_loads_is_used_and_said(capfd):
    ort = FakeOrt()
    session, choice, notes = open_session(ort, "m.onnx", RunOptions(), "auto", "fp32")
    assert choice.name == CUDA_EP and session.get_providers()[0] == CUDA_EP
    assert len(notes) == 1 and "tensorrt provider did not load" in notes[0]
    assert "libnvinfer.so.10" in notes[0]  # ORT's own reason, not hidden
    assert "libnvinfer" not in capfd.readouterr().err  # said once, in the result's notes


def test_an_explicit_provider_that_does_not_load_is_an_error_with_the_reason():
    with pytest.raises(HardwareError) as err:
        open_session(FakeOrt(), "m.onnx", RunOptions(provider="tensorrt"), "auto", "fp32")
    assert "could not start its tensorrt provider" in str(err.value)
    assert "libnvinfer.so.10" in str(err.value)


def test_the_cuda_fallback_runs_on_the_requested_gpu():
    ort = FakeOrt(broken=())
    _session, choice, _notes = open_session(ort, "m.onnx", RunOptions(), "cuda:1", "fp16")
    assert choice.name == TENSORRT_EP and choice.options["device_id"] == 1
    asked = dict(ort.sessions[0].asked[1:2])
    assert asked[CUDA_EP]["device_id"] == 1


def test_tensorrt_keeps_its_engines_and_timing_cache(tmp_path):
    _session, choice, _notes = open_session(FakeOrt(broken=()), "m.onnx", RunOptions(),
                                            "auto", "fp16")
    cache = str(tmp_path / "cache" / "ort-tensorrt-ort1.18.1-trtunknown")  # FakeOrt's version
    assert choice.options["trt_engine_cache_enable"] is True
    assert choice.options["trt_engine_cache_path"] == cache
    assert choice.options["trt_timing_cache_enable"] is True
    assert choice.options["trt_timing_cache_path"] == cache
    assert oct(os.stat(cache).st_mode & 0o777) == oct(0o700)
    assert oct(os.stat(tmp_path / "cache").st_mode & 0o777) == oct(0o700)  # the root too
    # an ORT from before trt_timing_cache_path: the option is not passed (ORT would refuse it)
    old = choose([TENSORRT_EP, CPU_EP], None, "auto", "fp16", (1, 16), cache)
    assert "trt_timing_cache_path" not in old.options and old.options["trt_timing_cache_enable"]


def test_fp32_on_cuda_is_ieee_fp32_and_where_it_cannot_be_the_result_says_so():
    new = choose([CUDA_EP, CPU_EP], None, "cuda", "fp32", (1, 18))
    assert new.options["use_tf32"] == 0 and not new.notes
    old = choose([CUDA_EP, CPU_EP], None, "cuda", "fp32", (1, 17))
    assert "use_tf32" not in old.options and "TF32" in old.notes[0]
    trt = choose([TENSORRT_EP, CUDA_EP, CPU_EP], None, "cuda", "fp32", (1, 18))
    assert any("TF32" in n and "--provider cuda" in n for n in trt.notes)
    assert dict(trt.fallbacks)[CUDA_EP]["use_tf32"] == 0


def test_fp16_weights_behind_fp32_inputs_are_labelled_fp16(tmp_path):
    """A model converted to fp16 with keep_io_types (onnxconverter-common's default for many
    exports): fp32 inputs and outputs, fp16 weights. Labelled by its inputs it would be an
    "fp32" result that ran fp16 kernels (issue 24, item 11)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from jetbench.workload.precision import PrecisionUnavailable
    from jetbench.workload.runtimes.onnx.model import _weights
    from jetbench.workload.runtimes.onnx.providers import check_precision, model_precision

    weight = np.ones((4, 3, 3, 3), dtype=np.float16)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
         helper.make_node("Conv", ["x16", "w"], ["c"]),
         helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)],
        "kept_io", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        [numpy_helper.from_array(weight, "w")])
    path = tmp_path / "kept_io.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    weights, notes = _weights(str(path))
    assert weights == "fp16" and notes == []
    assert model_precision(["tensor(float)"], weights) == "fp16"
    assert model_precision(["tensor(float)"], None) == "fp32"
    with pytest.raises(PrecisionUnavailable, match="it is fp16"):
        check_precision("fp32", model_precision(["tensor(float)"], weights), CPU_EP)


class BannerOrt(FakeOrt):
    """onnxruntime-gpu whose CUDA provider fails to start inside the session (cuDNN missing):
    as its Python layer does (onnxruntime/capi/onnxruntime_inference_collection.py,
    InferenceSession.__init__, ORT 1.12-1.32), it prints a banner to *stdout* and creates the
    session again with the providers after it."""

    def InferenceSession(self, model, sess_options=None, providers=()):  # noqa: N802
        names = [p[0] if isinstance(p, tuple) else p for p in providers]
        if CUDA_EP in names:
            print("*************** EP Error ***************")
            print(f"EP Error libcudnn.so.9: cannot open shared object file when using {names}")
            print("Falling back to ['CPUExecutionProvider'] and retrying.")
            print("****************************************")
            providers = [p for p in providers if (p[0] if isinstance(p, tuple) else p) == CPU_EP]
        return super().InferenceSession(model, sess_options, providers)


def test_orts_stdout_banner_is_the_reason_and_never_reaches_stdout(capfd):
    """N3: the banner went to stdout (breaking --json) and the note said 'logged no reason'."""
    session, choice, notes = open_session(BannerOrt(broken=(TENSORRT_EP,)), "m.onnx",
                                          RunOptions(), "auto", "fp32")
    assert session.get_providers() == [CPU_EP]
    assert "EP Error" not in capfd.readouterr().out  # stdout stays the document's
    said = " ".join(notes)
    assert "libcudnn.so.9" in said and "logged no reason" not in said


class PickyOrt(FakeOrt):
    """An ORT build that knows no timing-cache path option whatever its version says: as ORT's
    TensorRT provider does for an unknown key (onnxruntime#21484), the session is refused with
    "Invalid TensorRT EP option"."""

    __version__ = "1.18.0"

    def InferenceSession(self, model, sess_options=None, providers=()):  # noqa: N802
        for p in providers:
            if isinstance(p, tuple) and "trt_timing_cache_path" in p[1]:
                raise RuntimeError("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid "
                                   "TensorRT EP option: trt_timing_cache_path")
        return super().InferenceSession(model, sess_options, providers)


def test_an_option_this_ort_refuses_is_dropped_and_said():
    """N6: the TensorRT provider was never created on such a build (the whole run failed)."""
    session, choice, notes = open_session(PickyOrt(broken=()), "m.onnx", RunOptions(),
                                          "auto", "fp16")
    assert choice.name == TENSORRT_EP and session.get_providers()[0] == TENSORRT_EP
    assert "trt_timing_cache_path" not in choice.options
    assert choice.options["trt_engine_cache_enable"] is True  # the engine cache stays
    assert any("refused trt_timing_cache_path" in n for n in notes)


class FallbackPickyOrt(FakeOrt):
    """As ORT 1.12-1.32's Python layer really does with an option its TensorRT provider does not
    know (InferenceSession.__init__ in onnxruntime_inference_collection.py; issue #21484): the
    "Invalid TensorRT EP option" error is caught, a banner printed to stdout listing every
    provider and option asked, and the session created again with the next providers and no
    options. Nothing is raised."""

    __version__ = "1.18.0"

    def InferenceSession(self, model, sess_options=None, providers=()):  # noqa: N802
        for p in providers:
            if isinstance(p, tuple) and "trt_timing_cache_path" in p[1]:
                print("*************** EP Error ***************")
                print("EP Error [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid TensorRT "
                      f"EP option: trt_timing_cache_path when using {list(providers)}")
                print("Falling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and "
                      "retrying.")
                print("****************************************")
                return super().InferenceSession(model, sess_options, [CUDA_EP, CPU_EP])
        return super().InferenceSession(model, sess_options, providers)


@pytest.mark.parametrize("provider", [None, "tensorrt"])
def test_an_option_refused_inside_orts_own_fallback_is_dropped_and_said(provider, capfd):
    """Issue 60, 5: the retry never ran on a real ORT (its stand-in raised where ORT does not):
    --provider tensorrt became `unavailable`, and without it the run silently went to CUDA."""
    session, choice, notes = open_session(FallbackPickyOrt(broken=()), "m.onnx",
                                          RunOptions(provider=provider), "auto", "fp16")
    assert choice.name == TENSORRT_EP and session.get_providers()[0] == TENSORRT_EP
    assert "trt_timing_cache_path" not in choice.options
    assert choice.options["trt_engine_cache_enable"] is True
    assert any("refused trt_timing_cache_path" in n for n in notes), notes
    assert "EP Error" not in capfd.readouterr().out


class NoTensorrtBannerOrt(FakeOrt):
    """TensorRT's libraries missing, the failure inside ORT's own fallback: its banner's "when
    using [...]" lists every option asked, trt_timing_cache_path among them."""

    __version__ = "1.18.0"

    def InferenceSession(self, model, sess_options=None, providers=()):  # noqa: N802
        if any(isinstance(p, tuple) and p[0] == TENSORRT_EP for p in providers):
            print("EP Error libnvinfer.so.10: cannot open shared object file when using "
                  f"{list(providers)}")
            print("Falling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and "
                  "retrying.")
            return super().InferenceSession(model, sess_options, [CUDA_EP, CPU_EP])
        return super().InferenceSession(model, sess_options, providers)


def test_a_banner_that_only_lists_an_option_is_no_refusal():
    """A provider that failed for another reason (a missing library) is not taken for a
    refused option because the banner lists the options asked."""
    session, choice, notes = open_session(NoTensorrtBannerOrt(broken=()), "m.onnx",
                                          RunOptions(), "auto", "fp16")
    assert session.get_providers()[0] == CUDA_EP
    assert not any("refused" in n for n in notes), notes
    assert any("tensorrt provider did not load" in n and "libnvinfer.so.10" in n
               for n in notes), notes


def test_timing_cache_options_from_the_ort_versions_that_have_them():
    """trt_timing_cache_enable since ORT 1.15, trt_timing_cache_path since 1.17 (a review of
    ORT's sources; the constants in workload/runtimes/onnx/providers.py)."""
    cache = "/tmp/c"
    before = choose([TENSORRT_EP, CPU_EP], None, "auto", "fp16", (1, 14), cache)
    assert "trt_timing_cache_enable" not in before.options
    middle = choose([TENSORRT_EP, CPU_EP], None, "auto", "fp16", (1, 16), cache)
    assert middle.options["trt_timing_cache_enable"] and "trt_timing_cache_path" not in \
        middle.options
    after = choose([TENSORRT_EP, CPU_EP], None, "auto", "fp16", (1, 17), cache)
    assert after.options["trt_timing_cache_path"] == cache


def test_the_engine_cache_is_keyed_by_ort_and_tensorrt_versions(monkeypatch):
    """N10: one folder for every ORT/TensorRT: after a JetPack upgrade the provider found
    engines it could not load and dropped out silently."""
    import types

    first = open_session(FakeOrt(broken=()), "m.onnx", RunOptions(), "auto", "fp16")[1]
    newer = FakeOrt(broken=())
    newer.__version__ = "1.20.0"
    monkeypatch.setitem(sys.modules, "tensorrt", types.SimpleNamespace(__version__="10.3.0"))
    second = open_session(newer, "m.onnx", RunOptions(), "auto", "fp16")[1]
    paths = {c.options["trt_engine_cache_path"] for c in (first, second)}
    assert len(paths) == 2
    assert second.options["trt_engine_cache_path"].endswith("ort-tensorrt-ort1.20.0-trt10.3.0")
