"""What `measure` (and `sweep`, `tune`) is asked to do: the options as typed, every rule on
which of them go together (one place: `build_request`), the request they make, and the points
it expands to (GPU clock x model x runtime x precision x batch)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..errors import UsageError
from ..hw.board import Board
from ..hw.fs import Root
from ..profiles.profile import FreqRange, Profile, load_profile
from ..profiles.targets import COMMAND_LINE, Requested, resolve
from ..report.schema import point_id
from ..units import MAX, MIN, FreqSpec, format_hz, parse_duration_s, parse_freq
from ..workload.command.spec import PRECISION as COMMAND_PRECISION
from ..workload.command.spec import CommandSpec, command_spec
from ..workload.model_arg import InputShape, parse_shape_option
from ..workload.precision import parse_precisions
from ..workload.registry import check_model_names
from ..workload.runtimes import DEFAULT, TORCH, check_runtimes, parse_runtimes
from ..workload.sim_run import check_simulated
from .timing import parse_batches

MIN_COVERAGE = 0.9  # below this share of the window covered, img/s/W is refused


@dataclass(frozen=True)
class MeasureRequest:
    models: Tuple[str, ...] = ("alexnet",)
    precisions: Tuple[str, ...] = ("fp32",)
    batches: Tuple[int, ...] = (1,)
    # parsed once (parse_freq_option): Hz exactly as typed, or MAX/MIN
    gpu_freqs: Tuple[Optional[FreqSpec], ...] = (None,)  # None: leave the GPU clock as it is
    cpu_freq: Optional[FreqSpec] = None
    emc_freq: Optional[FreqSpec] = None
    profile: Optional[str] = None  # a name or TOML file; --freq/--cpu-freq/--emc-freq override it
    meters: Tuple[str, ...] = ()  # () = auto
    device: str = "auto"
    input_shape: Optional[InputShape] = None  # named inputs for ONNX models / engines
    provider: Optional[str] = None  # ONNX Runtime's execution provider (None: the best present)
    command: Optional[CommandSpec] = None  # --cmd: a command instead of a network
    iterations: int = 10
    duration_s: float = 3.0
    warmup_s: float = 1.0
    idle_s: float = 0.0  # idle baseline with the clocks as pinned (MLPerf's "active idle")
    idle_unpinned: bool = False  # also idle with the board's own governors, before pinning
    keep_clocks: bool = False
    regulator_efficiency: Optional[float] = None
    min_coverage: float = MIN_COVERAGE
    out_dir: Optional[Path] = None
    resume: bool = False  # skip points whose result file already exists
    beyond_power_mode: bool = False  # --beyond-power-mode: max is the hardware's, not the mode's
    wait_s: Optional[float] = 0.0  # for the board lock / the daemon's lease (None: for ever)
    keep_going: bool = False  # a point that fails is recorded (status "failed"), not fatal
    workload_python: Optional[str] = None  # run the workload in a child under this interpreter
    runtimes: Tuple[str, ...] = DEFAULT  # --runtime (workload/runtimes/)


@dataclass(frozen=True)
class Point:
    gpu: Optional[Requested]  # the GPU clock asked and the one that runs (None: not pinned)
    model: str
    precision: str
    batch: int
    runtime: str = TORCH

    @property
    def gpu_hz(self) -> Optional[int]:
        """The GPU clock this point runs at (None: not pinned)."""
        return self.gpu.resolved_hz if self.gpu is not None else None

    @property
    def id(self) -> str:
        stem = point_id(self.model, self.precision, self.batch, self.gpu_hz)
        return stem if self.runtime == TORCH else f"{stem}-{self.runtime}"

    @property
    def label(self) -> str:
        text = f"{self.model} {self.precision} b{self.batch}"
        text += "" if self.runtime == TORCH else f" {self.runtime}"
        return text + (f" @ {format_hz(self.gpu_hz)}" if self.gpu_hz else "")


def validate(request: MeasureRequest) -> None:
    if request.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    if min(request.duration_s, request.warmup_s, request.idle_s) < 0:
        raise UsageError("durations must not be negative")
    if not request.batches or min(request.batches) < 1:
        raise UsageError("batch sizes must be at least 1")
    if request.workload_python and (request.command is not None or request.provider):
        raise UsageError("--workload-python runs a built-in network with PyTorch: not with "
                         "--cmd or --provider")
    eff = request.regulator_efficiency
    if eff is not None and not 0 < eff <= 1:
        raise UsageError(f"--regulator-efficiency must be in (0, 1], not {eff}",
                         hint="the whitepaper assumed 0.8 (80%)")


@dataclass(frozen=True)
class MeasureOptions:
    """The options of measure/sweep/tune as the user typed them (strings, before any rule).
    `given`: the options given on the command line (the others hold their defaults)."""

    model: str = "alexnet"
    precision: str = "fp32"
    batch: str = "1"
    freq: Optional[str] = None
    cpu_freq: Optional[str] = None
    emc_freq: Optional[str] = None
    profile: Optional[str] = None
    meter: Tuple[str, ...] = ()
    iterations: int = 10
    duration: str = "3s"
    warmup: str = "1s"
    idle: str = "0"
    idle_unpinned: bool = False
    keep_clocks: bool = False
    regulator_efficiency: Optional[float] = None
    out: Optional[Path] = None
    resume: bool = False
    device: str = "auto"
    input_shape: Optional[str] = None
    provider: Optional[str] = None
    beyond_power_mode: bool = False
    cmd: Optional[str] = None
    throughput_from: Optional[str] = None
    unit: Optional[str] = None
    cmd_log: Optional[Path] = None
    cmd_output_to_stderr: bool = False  # --json: the command's output must not mix with it
    wait_s: Optional[float] = 0.0
    devices: Optional[str] = None
    scaling: bool = False
    workload_python: Optional[str] = None
    runtime: Optional[str] = None
    given: FrozenSet[str] = frozenset()


def split_list(text: str) -> List[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _gpu_freqs(text: Optional[str]) -> Tuple[Optional[FreqSpec], ...]:
    """--freq's list, parsed once (the same request twice is one); (None,): no --freq."""
    if text is None:
        return (None,)
    specs = tuple(dict.fromkeys(parse_freq_option("--freq", f) for f in split_list(text)))
    if not specs:
        raise UsageError(f"--freq: no frequency in {text!r}",
                         hint="a frequency reads 690MHz, 0.69GHz, 690000000 (Hz), max or min")
    return specs


def parse_freq_option(option: str, text: str) -> FreqSpec:
    """One clock option's value, parsed once, before anything opens the board: a typo is a
    usage error naming the option (exit 1), even while another command holds the board."""
    try:
        return parse_freq(text)
    except UsageError as err:
        raise UsageError(f"{option}: {err.message}", hint=err.hint) from None


@dataclass(frozen=True)
class FreqSelection:
    """sweep's --freq, parsed once (before the board is opened): `all`, a range `lo..hi`, or a
    list; each bound or item a FreqSpec (Hz exactly as typed, or MAX/MIN)."""

    text: str
    kind: str  # "all", "range" or "list"
    specs: Tuple[FreqSpec, ...] = ()


def parse_selection(text: str) -> FreqSelection:
    """'307MHz..998MHz' / 'all' / '614MHz,max' -> a FreqSelection, or UsageError naming
    --freq (a typo answered at once, even while another command holds the board)."""
    word = text.strip()
    example = "use e.g. 307MHz..998MHz, all, or 614MHz,691MHz"
    if word.lower() == "all":
        return FreqSelection(text, "all")
    if ".." in word:
        ends = [e.strip() for e in re.split(r"\.{2,}", word)]
        if len(ends) != 2 or not all(ends):
            meant = f"did you mean {ends[0] or 'min'}..{ends[-1] or 'max'}? " \
                if len(ends) == 2 else ""
            raise UsageError(f"--freq: a range has two ends, low..high: {word!r}",
                             hint=f"{meant}{example}; min and max stand for the table's ends")
        return FreqSelection(text, "range", (parse_freq_option("--freq", ends[0]),
                                             parse_freq_option("--freq", ends[1])))
    if word.lower() in ("al", "a", "every", "each", "any"):
        raise UsageError(f"--freq: not a frequency selection: {word!r}",
                         hint=f"did you mean all? {example}")
    dash = re.fullmatch(r"(.+?)\s*-\s*(.+)", word)
    if dash and "," not in word:
        try:
            parse_freq(dash.group(1)), parse_freq(dash.group(2))
        except UsageError:
            pass
        else:
            raise UsageError(f"--freq: not a frequency selection: {word!r}",
                             hint=f"did you mean {dash.group(1)}..{dash.group(2)}? {example}")
    specs = tuple(parse_freq_option("--freq", p) for p in word.split(",") if p.strip())
    if not specs:
        raise UsageError(f"--freq: no frequency in {text!r}", hint=example)
    return FreqSelection(text, "list", specs)


def build_request(o: MeasureOptions, ranked: bool = False) -> MeasureRequest:
    """The request, or UsageError naming the option at fault (nothing run, nothing created).
    `ranked`: this run is one of several devices (--devices, or under torchrun)."""
    if o.cmd is None:
        check_model_names(split_list(o.model))  # a misspelt name: at once, before torch loads
    batches = parse_batches(o.batch, sweep=False)
    assert not isinstance(batches, str)  # sweep=False: sizes only
    if ranked and o.cmd is not None:
        raise UsageError("--cmd runs one command; several devices (--devices, torchrun) run "
                         "a network on each", hint="measure the command alone, without ranks")
    if ranked and o.provider is not None:
        raise UsageError("--provider is ONNX Runtime's, for a model run on one device; several "
                         "devices (--devices, torchrun) run a built-in network on each",
                         hint="drop --provider, or measure the ONNX model without ranks")
    if o.scaling and not ranked:
        raise UsageError("--scaling compares several devices with one",
                         hint="add --devices N (or run under torchrun)")
    if o.workload_python and o.devices:
        raise UsageError("--workload-python runs one child on one device: not with --devices")
    runtimes = parse_runtimes(o.runtime)
    if o.cmd is None:
        if ranked and runtimes != DEFAULT:
            raise UsageError("--runtime compares runtimes on one device; several devices "
                             "(--devices, torchrun) run PyTorch eager on each",
                             hint="drop --runtime, or measure without ranks")
        check_runtimes(runtimes, split_list(o.model), o.provider, False, o.workload_python)
    request = MeasureRequest(
        models=tuple(split_list(o.model)), precisions=tuple(parse_precisions(o.precision)),
        batches=batches, gpu_freqs=_gpu_freqs(o.freq),
        cpu_freq=parse_freq_option("--cpu-freq", o.cpu_freq) if o.cpu_freq is not None else None,
        emc_freq=parse_freq_option("--emc-freq", o.emc_freq) if o.emc_freq is not None else None,
        profile=o.profile, meters=tuple(o.meter),
        device=o.device,
        input_shape=parse_shape_option(o.input_shape) if o.input_shape else None,
        provider=o.provider, iterations=o.iterations, duration_s=parse_duration_s(o.duration),
        warmup_s=parse_duration_s(o.warmup), idle_s=parse_duration_s(o.idle),
        idle_unpinned=o.idle_unpinned, keep_clocks=o.keep_clocks,
        regulator_efficiency=o.regulator_efficiency, out_dir=o.out, resume=o.resume,
        beyond_power_mode=o.beyond_power_mode, wait_s=o.wait_s,
        workload_python=o.workload_python, runtimes=runtimes)
    request = _with_command(o, request)
    validate(request)
    return request


def _with_command(o: MeasureOptions, request: MeasureRequest) -> MeasureRequest:
    """--cmd and its options checked and folded into the request (nothing run yet)."""
    if o.cmd is None:
        given = [name for name, value in (("--throughput-from", o.throughput_from),
                                          ("--unit", o.unit), ("--cmd-log", o.cmd_log)) if value]
        if given:
            raise UsageError(f"{', '.join(given)} only go with --cmd")
        return request
    for name in ("model", "precision", "input_shape", "provider", "runtime"):
        if name in o.given:
            raise UsageError(f"--{name.replace('_', '-')} does not go with --cmd (the "
                             "command is the workload)")
    if len(request.batches) > 1:
        raise UsageError("--cmd takes one --batch (the batch its output counts)")
    batch = request.batches[0] if "batch" in o.given else None
    spec = command_spec(o.cmd, o.throughput_from, o.unit, batch, o.cmd_log,
                        stdout_to_stderr=o.cmd_output_to_stderr)
    # measured instead of a network: one point per clock
    return replace(request, models=(spec.name,), precisions=(COMMAND_PRECISION,),
                   batches=(spec.batch,), command=spec)


def build_profile(request: MeasureRequest, gpu: Optional[Requested], root_base: Path
                  ) -> Optional[Profile]:
    """The profile to pin for one point: --profile (if any) with --freq/--cpu-freq/--emc-freq
    on top, the GPU clock as planning resolved it (`gpu`, from --freq or from the profile's own
    [gpu] freq). None when nothing is to be pinned."""
    # `gpu` is --freq's, or (a --profile and no --freq) the profile's own [gpu] freq
    by_option = not request.profile or any(f is not None for f in request.gpu_freqs)
    if request.profile:
        profile = load_profile(request.profile, root_base)
    elif gpu is not None or request.cpu_freq is not None or request.emc_freq is not None:
        profile = Profile(name="measure", source=COMMAND_LINE)
    else:
        return None
    sections = list(profile.sections)
    railgate = profile.gpu_railgate
    cpu, governors, emc = profile.cpu_freq, profile.cpu_governors, profile.emc_freq
    gpu_range = profile.gpu_freq
    options: List[str] = []
    if gpu is not None and by_option:
        assert not isinstance(gpu.requested, str) or gpu.requested in (MAX, MIN)
        gpu_range = FreqRange(gpu.requested, gpu.requested)
        if railgate is None:
            railgate = False  # a railgated GPU wakes up slowly: never measure it
        sections.append("gpu")
        options.append("gpu")
    if request.cpu_freq is not None:
        cpu = FreqRange(request.cpu_freq, request.cpu_freq)
        governors = governors or ("userspace", "performance")
        sections.append("cpu")
        options.append("cpu")
    if request.emc_freq is not None:
        emc = request.emc_freq
        sections.append("emc")
        options.append("emc")
    return replace(profile, gpu_freq=gpu_range, gpu_railgate=railgate, cpu_freq=cpu,
                   cpu_governors=governors, emc_freq=emc, sections=tuple(dict.fromkeys(sections)),
                   beyond_power_mode=request.beyond_power_mode, from_options=tuple(options))


def resolve_gpu(root: Root, board: Board, spec: FreqSpec, beyond_power_mode: bool,
                profile: Optional[Profile] = None) -> Requested:
    """A GPU clock request resolved against the board by the pin's own rules
    (profiles/targets.py: table entry, the kernel's rule, the power mode's cap): the clock that
    will run, and why it is not the request. `profile`: the --profile whose [gpu] freq this is
    (named in a note or refusal instead of --freq)."""
    if board.gpu is None and not board.nvml_gpus:
        raise UsageError("--freq: this board has no GPU clock jetbench can set")
    if profile is None:
        profile = Profile(name="measure", source=COMMAND_LINE, gpu_freq=FreqRange(spec, spec),
                          sections=("gpu",), beyond_power_mode=beyond_power_mode)
    return next(r for r in resolve(profile, board, root).requested if r.domain == "gpu")


def _profile_gpu(request: MeasureRequest, board: Board, root: Root) -> Optional[Requested]:
    """The GPU clock a --profile pins by itself (its [gpu] freq, no --freq), resolved as
    --freq would be, so that the file name and the progress line name it too; None where the
    profile pins no single GPU clock (a range, or no [gpu])."""
    profile = build_profile(request, None, root.base)
    rng = profile.gpu_freq if profile is not None else None
    if profile is None or rng is None or not rng.pinned or rng.min is None or \
            (board.gpu is None and not board.nvml_gpus):
        return None
    return resolve_gpu(root, board, rng.min, request.beyond_power_mode, profile)


def plan_points(request: MeasureRequest, board: Board, root: Root,
                said: Optional[List[str]] = None) -> List[Point]:
    """Every point of the request, each GPU clock resolved once: the file name, the progress
    line and the pin all name the clock that runs. Two requests that run one clock are
    measured once (`said` gets a line saying so)."""
    check_simulated(request.models if request.command is None else (), board)
    points = []
    planned: Dict[Optional[int], Requested] = {}
    for freq in request.gpu_freqs:
        gpu: Optional[Requested]
        if freq is not None:
            gpu = resolve_gpu(root, board, freq, request.beyond_power_mode)
        else:
            gpu = _profile_gpu(request, board, root) if request.profile else None
        hz = gpu.resolved_hz if gpu is not None else None
        if gpu is not None and hz in planned:
            if said is not None:
                said.append(f"--freq {gpu.text} runs {format_hz(hz)}, as --freq "
                            f"{planned[hz].text} does: measured once")
            continue
        if gpu is not None:
            planned[hz] = gpu
        for model in request.models:
            for runtime in request.runtimes:
                for precision in request.precisions:
                    for batch in request.batches:
                        points.append(Point(gpu, model, precision, batch, runtime))
    return points
