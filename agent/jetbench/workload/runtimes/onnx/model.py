"""An ONNX model run by ONNX Runtime, as a `Workload` the runner times like any other.

The inputs are made once, in the session's device memory (I/O binding), and the outputs stay
there: one step is one `run_with_iobinding`, which returns when the provider is done (ORT
synchronises its providers after a run), so the host clock times it on any device. onnxruntime
is imported here only: `import jetbench` never needs it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from ....errors import HardwareError, OutOfMemory, Unavailable, UsageError
from ....interrupts import held_sigint
from ...base import RunOptions, Workload
from ...model_arg import InputShape, resolve_shapes
from ...pytorch import CONSTANT_INPUT
from ..cache_dir import cache_dir
from .providers import (
    CUDA_EP,
    TENSORRT_EP,
    ProviderChoice,
    check_precision,
    choose,
    model_precision,
    ort_version,
    short_name,
    weights_precision,
)

if TYPE_CHECKING:
    import numpy as np

INSTALL_HINT = ("pip install 'jetbench[onnx]' (ONNX Runtime's CPU build); on a Jetson, "
                "NVIDIA's onnxruntime-gpu wheel for your JetPack, which jetbench uses as found")
_NUMPY_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16",
                "tensor(double)": "float64", "tensor(int64)": "int64", "tensor(int32)": "int32",
                "tensor(int16)": "int16", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
                "tensor(bool)": "bool"}
_OOM_MARKERS = ("failed to allocate memory", "out of memory", "bad_alloc",
                "cudaerrormemoryallocation")


# onnxruntime ships no type information (no py.typed): its sessions and I/O bindings are Any.
OrtObject = Any


def import_onnxruntime() -> ModuleType:
    """onnxruntime (or onnxruntime-gpu: the same module), with Ctrl-C held while it loads."""
    try:
        with held_sigint():
            import onnxruntime
    except ImportError as err:
        raise HardwareError("ONNX Runtime is not installed; ONNX models need it",
                            hint=INSTALL_HINT) from err
    return onnxruntime


def build_onnx_workload(model: str, precision: str, batch: int, device: str, input_mode: str,
                        options: RunOptions, input_shape: Optional[InputShape]) -> Workload:
    """The model on the chosen provider (providers.py), its inputs (constant 0.5 or
    seeded Gaussian floats; zeros for integer inputs) shaped by the model, `input_shape` and
    `batch`. Raises UsageError (not an ONNX model, shapes), PrecisionUnavailable, HardwareError
    (the provider did not load)."""
    ort = import_onnxruntime()
    session, choice, loaded_notes = open_session(ort, model, options, device, precision)
    inputs = session.get_inputs()
    weights, weight_notes = _weights(model)
    own = model_precision([i.type for i in inputs], weights)
    check_precision(precision, own, choice.name)
    shapes = resolve_shapes({i.name: list(i.shape) for i in inputs}, input_shape, batch, model)
    arrays = {i.name: _make_input(i.type, shapes[i.name], input_mode, options.seed, i.name)
              for i in inputs}
    step, binding = _bound_step(ort, session, arrays, choice)

    def outputs() -> object:
        step()
        return binding.copy_outputs_to_cpu()[0]
    with ort_errors(model):
        step()  # providers initialise lazily (TensorRT builds its engine now): never in a window
    first = arrays[inputs[0].name] if inputs else _NoInput()
    details = {"provider": choice.name, "providers": list(session.get_providers()),
               "framework_version": getattr(ort, "__version__", None), "model_precision": own,
               "tf32_possible": choice.tf32_possible,
               "inputs": {name: list(shape) for name, shape in shapes.items()},
               "timing": "host clock around run_with_iobinding (returns when the provider is "
                         "done)"}
    notes: List[str] = list(loaded_notes) + list(choice.notes) + weight_notes
    if weights is not None and weights != model_precision([i.type for i in inputs]):
        notes.append(f"{weights} weights behind {model_precision([i.type for i in inputs])} "
                     "inputs (a model converted with keep_io_types): labelled by its weights; "
                     "the casts at its edges are timed too")
    if precision == "fp16" and own == "fp32":
        notes.append("fp16 through TensorRT's trt_fp16_enable: TensorRT picks fp16 or fp32 "
                     "kernels layer by layer")
    return Workload(model, precision, batch, choice.device, input_mode, options, session, first,
                    None, sum(a.nbytes for a in arrays.values()), step, _no_sync,
                    contextlib.nullcontext, tuple(notes), framework="onnxruntime",
                    details=details, frame=ort_errors, host_timed=True, outputs=outputs)


def _weights(model: str) -> Tuple[Optional[str], List[str]]:
    """The precision the model's weights are stored in, from its initializers (the onnx
    package, where installed; external data is not loaded). None where unknown."""
    try:
        import onnx
    except ImportError:
        return None, ["the weights' precision was not checked (the onnx package is not "
                      "installed): a model with fp16 weights and fp32 inputs is labelled by "
                      "its inputs"]
    try:
        proto = onnx.load(model, load_external_data=False)
    except Exception:  # noqa: BLE001 - ORT loaded it; the label falls back to the inputs
        return None, []
    return weights_precision([t.data_type for t in proto.graph.initializer]), []


def open_session(ort: ModuleType, model: str, options: RunOptions, device: str,
                 precision: str) -> Tuple[OrtObject, ProviderChoice, List[str]]:
    """A session on the best provider that really loads. `get_available_providers()` lists
    every provider built in, loadable or not (onnxruntime-gpu without TensorRT's libraries
    lists TensorRT); ORT then drops one that fails to load and runs on the next. Without
    --provider, jetbench goes on to the next provider that loads and says why in the notes;
    with --provider, a provider that does not load is an error with ORT's own reason."""
    available = list(ort.get_available_providers())
    version = ort_version(getattr(ort, "__version__", None))
    cache, notes = _trt_cache(available, getattr(ort, "__version__", None))
    while True:
        choice = choose(available, options.provider, device, precision, version, cache)
        session, log, choice = _session_or_without_optional(ort, model, choice, options, notes)
        loaded = list(session.get_providers())
        if choice.name in loaded:
            return session, choice, notes
        reason = _reason(log, choice.name)
        if options.provider:
            # what is installed here: this row's (the other runtimes and rows still run)
            raise Unavailable(f"ONNX Runtime could not start its {short_name(choice.name)} "
                              f"provider (the session has {', '.join(loaded)}): {reason}",
                              hint="check the provider's libraries (CUDA, cuDNN, TensorRT) "
                              "match this onnxruntime-gpu build, or drop --provider")
        available.remove(choice.name)
        notes.append(f"ONNX Runtime's {short_name(choice.name)} provider did not load "
                     f"({reason}): the next one that loads is used")


def _trt_cache(available: List[str], ort_version_text: Optional[str]
               ) -> Tuple[Optional[str], List[str]]:
    """Where ORT's TensorRT provider keeps its engines, if it is here at all: a folder per ORT
    and TensorRT version, since an engine another version built does not load (after a JetPack
    upgrade the provider dropped out instead of building anew). ORT names each engine file for
    the GPU's architecture itself."""
    if TENSORRT_EP not in available:
        return None, []
    name = f"ort-tensorrt-ort{ort_version_text or 'unknown'}-trt{_tensorrt_version()}"
    try:
        return str(cache_dir(name)), []
    except OSError as err:
        return None, [f"no TensorRT engine cache ({err.strerror}): ONNX Runtime builds the "
                      "engine at every run"]


def _tensorrt_version() -> str:
    """The TensorRT that ORT's provider loads, as its Python package says ('unknown' without
    one: the folder is then ORT's version alone)."""
    try:
        import tensorrt  # noqa: F401 - optional: NVIDIA's wheel on a Jetson
    except Exception:  # noqa: BLE001 - absent or broken: no version to key by
        return "unknown"
    return str(getattr(tensorrt, "__version__", "unknown"))


def _session_or_without_optional(ort: ModuleType, model: str, choice: ProviderChoice,
                                 options: RunOptions, notes: List[str]
                                 ) -> Tuple[OrtObject, str, ProviderChoice]:
    """The session; where ORT refuses one of the options jetbench passes only for speed (an
    option its build does not know), the session without them, said in the notes. ORT's
    Python layer catches that refusal itself ("Invalid TensorRT EP option: KEY", onnxruntime
    #21484), prints its "EP Error ... when using ..." banner and falls back to the next
    providers with no options: so the refusal is read from the banner's error (before "when
    using", which lists every option asked) as well as from a raised error (older builds)."""
    plain = choice.without_optional()
    if plain.options == choice.options:
        return (*_session(ort, model, choice, options), choice)
    optional = [k for k in choice.options if k not in plain.options]
    try:
        session, log = _session(ort, model, choice, options)
    except UsageError as err:
        refused = [k for k in optional if k in str(err)]
        if not refused:
            raise
    else:
        if choice.name in list(session.get_providers()):
            return session, log, choice
        refused = [k for k in optional if k in _ep_error(log)]
        if not refused:
            return session, log, choice
    notes.append(f"this ONNX Runtime refused {', '.join(refused)}: its "
                 f"{short_name(choice.name)} provider runs without "
                 f"{'it' if len(refused) == 1 else 'them'} (no timing cache)")
    return (*_session(ort, model, plain, options), plain)


def _ep_error(log: str) -> str:
    """The errors in ORT's fallback banners ("EP Error <error> when using <providers>"), without
    the providers and options they list."""
    return " ".join(m.group(1) for m in re.finditer(r"EP Error (.*?) when using ", log, re.S))


def _session(ort: ModuleType, model: str, choice: ProviderChoice,
             options: RunOptions) -> Tuple[OrtObject, str]:
    """The session and what ORT logged while creating it (a provider that did not load says
    why there; ORT does not raise): its C++ logger on fd 2, and the banner its Python layer
    prints to stdout when a provider fails to start and it retries with the next ones
    (onnxruntime/capi/onnxruntime_inference_collection.py, InferenceSession.__init__), which
    would otherwise land in `--json`'s document."""
    settings = ort.SessionOptions()
    settings.log_severity_level = 2  # warnings: a provider's load failure is one (captured)
    if options.threads:
        settings.intra_op_num_threads = options.threads
    log: List[str] = []
    banner = io.StringIO()  # ORT's Python layer prints its "EP Error ... Falling back" here
    with ort_errors(model, loading=True), _captured_stderr(log), \
            contextlib.redirect_stdout(banner):
        session = ort.InferenceSession(model, sess_options=settings,
                                       providers=choice.session_providers())
    return session, "".join(log) + banner.getvalue()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # ORT colours its log lines on a terminal
_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \[[^\]]*\] ")  # "2026-... [E:onnxruntime:...] "


def _reason(log: str, provider: str) -> str:
    """ORT's own words on why `provider` did not start: the library that did not load and its
    error (`Failed to load library .../libonnxruntime_providers_cuda.so with error: ...`), else
    its last line about the provider (not the banner's list of providers), else its last error
    line, else 'no reason logged'."""
    lines = [_LOG_PREFIX.sub("", _ANSI.sub("", line)).strip() for line in log.splitlines()]
    lines = [line for line in lines if line]
    short = provider[: -len("ExecutionProvider")].lower()
    library = f"libonnxruntime_providers_{short}"
    for line in lines:
        if library in line.lower() and "with error:" in line:
            return line.split("with error:", 1)[1].strip()[:300]
    about = [line for line in lines if short in line.lower()
             and not line.startswith(("when using", "Falling back"))]
    picked = (about or [line for line in lines if "error" in line.lower()] or [""])[-1]
    return picked[:300] or "ONNX Runtime logged no reason"


@contextlib.contextmanager
def _captured_stderr(into: List[str]) -> Iterator[None]:
    """File descriptor 2 (ORT's C++ logger writes there) into a temporary file, its text
    appended to `into` afterwards."""
    import sys
    import tempfile

    with tempfile.TemporaryFile(mode="w+") as log:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            into.append(log.read())


def _make_input(ort_type: str, shape: Tuple[int, ...], mode: str, seed: int, name: str
                ) -> np.ndarray:
    import numpy as np

    dtype = _NUMPY_TYPES.get(ort_type)
    if dtype is None:
        raise UsageError(f"input {name!r} is {ort_type}, which jetbench cannot feed",
                         hint="an input of floats, integers or booleans")
    if "float" not in dtype:
        return np.zeros(shape, dtype=dtype)  # a valid index or mask whatever the model does
    if mode == "constant":
        return np.full(shape, CONSTANT_INPUT, dtype=dtype)
    return np.random.default_rng(seed + 1).standard_normal(shape).astype(dtype)


def _bound_step(ort: ModuleType, session: OrtObject, arrays: Dict[str, np.ndarray],
                choice: ProviderChoice) -> Tuple[Callable[[], object], OrtObject]:
    """One inference with the inputs already in the provider's memory and the outputs left
    there (as a PyTorch workload's tensors stay on the GPU); and the binding that holds them."""
    on_gpu = choice.name in (TENSORRT_EP, CUDA_EP)
    kind, index = ("cuda", choice.options["device_id"]) if on_gpu else ("cpu", 0)
    binding = session.io_binding()
    held = []  # the OrtValues must outlive the binding
    for name, array in arrays.items():
        value = ort.OrtValue.ortvalue_from_numpy(array, kind, index)
        held.append(value)
        binding.bind_ortvalue_input(name, value)
    for output in session.get_outputs():
        binding.bind_output(output.name, kind, index)
    run = session.run_with_iobinding

    def step() -> object:
        try:
            run(binding)
        except RuntimeError as err:  # ORT's binding raises a bare RuntimeError for a failed run
            raise RunFailed(str(err)) from err
        return held

    return step, binding


@contextlib.contextmanager
def ort_errors(what: str, loading: bool = False) -> Iterator[None]:
    """ONNX Runtime's exceptions (plain Exception subclasses from its C++ core) as jetbench's:
    an allocation failure is OutOfMemory; a file it cannot load, or a model that fails on its
    inputs, a UsageError."""
    try:
        yield
        return
    except Exception as err:  # noqa: BLE001 - filtered to ORT's own just below
        ours = isinstance(err, RunFailed) or type(err).__module__.startswith("onnxruntime") \
            or (loading and isinstance(err, (RuntimeError, ValueError)))
        if not ours:
            raise
        text = " ".join(str(err).split())
    if any(marker in text.lower() for marker in _OOM_MARKERS):
        raise OutOfMemory(f"{what}: out of memory ({text[:300]})", hint="use a smaller --batch")
    if loading:
        raise UsageError(f"{what}: ONNX Runtime cannot load it as an ONNX model ({text[:300]})")
    raise UsageError(f"{what}: the model failed on its input ({text[:300]})",
                     hint="check --input-shape and --batch for this model")


class RunFailed(Exception):
    """One inference failed inside ONNX Runtime (its message is ORT's)."""


class _NoInput:
    """A model without inputs (a constant graph): its describe() shape is empty."""

    shape: Tuple[int, ...] = (0,)


def _no_sync() -> None:
    return None
