"""Resolve a profile against a board: nearest table frequencies, available governors, and every
check that needs the board. Raises ProfileError (naming the key) before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

from ..errors import JetbenchError, PowerModeCap, ProfileError
from ..hw.board import Board
from ..hw.boot_facts import EmcCeiling
from ..hw.clocks.runs import at_or_below, is_entry
from ..hw.clocks.types import CpuTarget, EmcTarget, FanTarget, GpuTarget, NvmlGpuTarget
from ..hw.fs import Root
from ..hw.mode_caps import ModeCaps, cpu_online_file, read_mode_caps
from ..hw.nvml import NvmlGpu
from ..ownership import journal
from ..units import MAX, MIN, FreqSpec, format_hz, format_spec, resolve_freq
from .profile import FreqRange, Profile

RANGE_TOLERANCE = 0.02  # "1000MHz" on a 998.4 MHz clock is a rounding, not an error
# A request this close to the entry that runs is that entry as printed (624.8 MHz for
# 624.75 MHz): resolved to it without a note.
_SAME_ENTRY = 0.0005


@dataclass(frozen=True)
class Requested:
    """One knob's request resolved against the board, once: what was asked (Hz exactly as
    typed, `max`/`min`, or a governor's name), the clock that runs for it, and why that
    differs from the request ("" where it does not)."""

    domain: str
    setting: str
    requested: Union[FreqSpec, str]
    resolved_hz: Optional[int]
    why: str = ""

    @property
    def text(self) -> str:
        """The request as typed: '624.75 MHz', 'max', 'userspace'."""
        return self.requested if self.resolved_hz is None and isinstance(self.requested, str) \
            else format_spec(self.requested)

    def said(self, who: str) -> str:
        """'--freq 600 MHz -> 624.8 MHz: nearest table entry (522.8 MHz is below)'."""
        return f"{who} {self.text} -> {format_hz(self.resolved_hz)}: {self.why}"


@dataclass(frozen=True)
class Targets:
    cpu: CpuTarget = CpuTarget()
    gpu: GpuTarget = GpuTarget()
    emc: EmcTarget = EmcTarget()
    fan: FanTarget = FanTarget()
    writes: Tuple[Tuple[str, str], ...] = ()
    nvml: Tuple[NvmlGpuTarget, ...] = ()  # discrete GPUs (generic hosts)
    requested: Tuple[Requested, ...] = ()
    notes: Tuple[str, ...] = field(default=())
    # --beyond-power-mode: the mode's caps this pin goes past ("gpu 614.4 MHz -> 921.6 MHz")
    caps_lifted: Tuple[str, ...] = ()


_MISSING = {"cpu": "no cpufreq policy found", "gpu": "no GPU clock jetbench can set",
            "emc": "no EMC clock control found", "fan": "no fan found"}


def fitting_profiles(board: Board, root: Root) -> List[str]:
    """The named profiles whose [match] this board meets (for a hint when one does not)."""
    from .profile import list_profiles, load_profile

    out = []
    for name, _path in list_profiles(root.base):
        try:
            p = load_profile(name, root.base)
        except JetbenchError:
            continue
        if (not p.match_soc or board.soc in p.match_soc) and \
                (not p.match_family or board.family in p.match_family):
            out.append(name)
    return out


# A profile made from measure's/sweep's/tune's options (run/request.build_profile) is spoken of
# in the options the user gave, not in the profile's sections.
COMMAND_LINE = "command line"
_OPTION_OF = {"[gpu]": "--freq", "[cpu]": "--cpu-freq", "[emc]": "--emc-freq"}


def _who(profile: Profile, where: str) -> str:
    """'profile NAME: [gpu] min_freq' for a profile; '--freq' for the command line's, or for
    a section an option set over a profile's."""
    for section, option in _OPTION_OF.items():
        if where.startswith(section) and (profile.source == COMMAND_LINE or
                                          section[1:-1] in profile.from_options):
            return option
    return f"profile {profile.name}: {where}"


def _fail(profile: Profile, where: str, message: str, hint: str = "") -> ProfileError:
    return ProfileError(f"{_who(profile, where)}: {message}",
                        hint=hint or "nothing was written; `jetbench info` shows this board's "
                                     "ranges")


def table_hint(table: Sequence[int], spec: int, lo: int, hi: int) -> str:
    """The entries nearest a refused request, and `max`: what the user can give instead."""
    if not table:
        return f"give a clock in {format_hz(lo)} .. {format_hz(hi)}, or max"
    nearest = sorted(sorted(table, key=lambda hz: abs(hz - spec))[:2])
    return (f"nothing was written; the nearest table entries are "
            f"{' and '.join(format_hz(hz) for hz in nearest)}; max is {format_hz(max(table))} "
            f"(`jetbench info` lists the whole table)")


@dataclass(frozen=True)
class Cap:
    """The power mode's limit on one clock, for resolve_spec."""

    hz: int
    caps: ModeCaps
    clock: str  # "the GPU", "CPU policy0"


def resolve_spec(
    profile: Profile, where: str, spec: FreqSpec, table: Sequence[int], lo: int, hi: int,
    cap: Optional[Cap] = None,
) -> int:
    """A frequency request -> Hz: nearest table entry, or the value itself where no table.
    Under a power mode's `cap`, "max" is the cap (what jetson_clocks pins) and a request above
    it is refused (PowerModeCap)."""
    if spec == MAX and cap is not None:
        return cap.hz
    if spec in (MAX, MIN):
        if table:
            return resolve_freq(spec, table)
        return hi if spec == MAX else lo
    assert isinstance(spec, int)
    if cap is not None and spec > cap.hz * (1 + RANGE_TOLERANCE):
        allowed = f" (the highest table entry it allows: {format_hz(at_or_below(table, cap.hz))})" \
            if table else ""
        raise PowerModeCap(
            f"{_who(profile, where)}: {format_hz(spec)} is above the power mode's cap: "
            f"mode {cap.caps.mode.text} holds {cap.clock} at {format_hz(cap.hz)} or "
            f"below{allowed}",
            hint=f"nothing was written; {cap.caps.way_out()}")
    if spec > hi * (1 + RANGE_TOLERANCE) or (lo and spec < lo * (1 - RANGE_TOLERANCE)):
        if cap is None:
            raise _fail(profile, where, f"{format_hz(spec)} is outside this board's range "
                                        f"{format_hz(lo)} .. {format_hz(hi)}",
                        hint=table_hint(table, spec, lo, hi))
        # under a cap, the range and the entries this mode runs (never one above the cap)
        allowed_table = [f for f in table if f <= cap.hz]
        top = at_or_below(table, cap.hz) if table else cap.hz
        raise _fail(profile, where, f"{format_hz(spec)} is outside the range power mode "
                                    f"{cap.caps.mode.text} runs {cap.clock} at: "
                                    f"{format_hz(lo)} .. {format_hz(top)}",
                    hint=table_hint(allowed_table, spec, lo, top))
    hz = resolve_freq(spec, table) if table else min(max(spec, lo), hi)
    return min(hz, cap.hz) if cap is not None else hz


def resolve(profile: Profile, board: Board, root: Root) -> Targets:
    if profile.match_soc and board.soc not in profile.match_soc:
        fit = fitting_profiles(board, root)
        raise ProfileError(
            f"profile {profile.name}: [match] soc: this board's SoC is "
            f"{board.soc or 'not a Tegra'}, the profile is for {', '.join(profile.match_soc)}",
            hint="nothing was written; profiles for this board: " +
                 (", ".join(fit) if fit else "none named (maxperf pins every clock at max)"))
    if profile.match_family and board.family not in profile.match_family:
        raise _fail(profile, "[match] family", f"this board is {board.family}, the profile is "
                                               f"for {', '.join(profile.match_family)}")
    requested: List[Requested] = []
    notes: List[str] = []
    present = {"cpu": bool(board.cpu.policies),
               "gpu": board.gpu is not None or bool(board.nvml_gpus),
               "emc": board.emc is not None, "fan": board.fan is not None}
    for section in profile.sections:
        if not present[section]:
            if not profile.skip_missing:
                raise _fail(profile, f"[{section}]", f"this board has no {section} clock "
                                                     "jetbench can set")
            notes.append(f"no {section} control on this board ({_MISSING[section]}): "
                         f"[{section}] skipped")

    caps = mode_caps_now(root, board)
    limit = None if profile.beyond_power_mode else caps
    if profile.tuned_mode_id is not None and board.power_mode is not None and \
            board.power_mode.id != profile.tuned_mode_id:
        bound = f" under its caps ({'; '.join(profile.tuned_caps)})" if profile.tuned_caps \
            else ""
        notes.append(f"profile {profile.name} was tuned in power mode "
                     f"{profile.tuned_mode or profile.tuned_mode_id}{bound}; the board is in "
                     f"mode {board.power_mode.text} now: its point was found under other caps")
    cpu = CpuTarget()
    if present["cpu"] and "cpu" in profile.sections:
        cpu = _cpu_target(profile, board, requested, limit, notes)
    gpu = GpuTarget()
    nvml: Tuple[NvmlGpuTarget, ...] = ()
    if present["gpu"] and "gpu" in profile.sections and board.nvml_gpus:
        nvml = tuple(_nvml_target(profile, g, requested if k == 0 else [], notes)
                     for k, g in enumerate(board.nvml_gpus))
    elif (profile.gpu_memory_freq is not None or profile.gpu_power_limit is not None) \
            and not profile.skip_missing:
        raise _fail(profile, "[gpu] memory_freq / power_limit",
                    "only discrete NVIDIA GPUs (NVML) have these, and this board has none")
    if present["gpu"] and "gpu" in profile.sections and board.gpu is not None:
        g = board.gpu
        cap = Cap(limit.gpu_max_hz, limit, "the GPU") \
            if limit is not None and limit.gpu_max_hz is not None else None
        lo, hi = _range(profile, "[gpu]", profile.gpu_freq, g.available_hz, g.min_hz, g.max_hz,
                        requested, "gpu", cap, notes)
        at_max = profile.gpu_freq is not None and profile.gpu_freq.pinned and \
            profile.gpu_freq.max == MAX
        gpu = GpuTarget(min_hz=lo, max_hz=hi, railgate=profile.gpu_railgate,
                        side_at_max=at_max)
    emc = EmcTarget()
    if present["emc"] and profile.emc_freq is not None:
        assert board.emc is not None
        emc = _emc_target(profile, board, limit, requested, notes)
    fan = FanTarget(pwm=profile.fan_pwm) if present["fan"] else FanTarget()
    for k, (path, _value) in enumerate(profile.writes):
        try:
            root.check_writable(path)
            root.read(path)
        except JetbenchError as err:
            raise _fail(profile, f"[[write]] #{k + 1} path", str(err)) from err
    lifted = _lifted(caps, board, cpu, gpu, emc) if profile.beyond_power_mode else ()
    if lifted:
        assert caps is not None
        notes.append(f"--beyond-power-mode: past power mode {caps.mode.text}'s caps: "
                     + "; ".join(lifted))
    return Targets(cpu=cpu, gpu=gpu, emc=emc, fan=fan, writes=profile.writes, nvml=nvml,
                   requested=tuple(requested), notes=tuple(notes), caps_lifted=lifted)


def mode_caps_now(root: Root, board: Board) -> Optional[ModeCaps]:
    """The active mode's caps as the mode set them: the journal's originals win over values
    jetbench itself wrote since."""
    if board.power_mode is None:  # no nvpmodel (read at detection): no caps, no journal read
        return None
    originals = {e.path: e.raw for e in journal.load(root)}
    return read_mode_caps(root, board, originals)


def _emc_target(profile: Profile, board: Board, limit: Optional[ModeCaps],
                requested: List[Requested], notes: List[str]) -> EmcTarget:
    """The EMC rate for the profile's request: under the power mode's cap (R35 emc_iso_cap, R36+
    nvpmodel_clk_cap/emc; lifted by --beyond-power-mode, the cap file then written up to the
    rate and journalled) and under a firmware ceiling found this boot (never lifted: the rate
    above it does not run, so the request runs the ceiling and says so)."""
    e = board.emc
    assert e is not None and profile.emc_freq is not None
    cap = Cap(limit.emc_max_hz, limit, "the EMC") \
        if limit is not None and limit.emc_max_hz is not None else None
    # no mode read (no nvpmodel status): a cap file in force still binds, unless told otherwise
    hi = e.top_hz if limit is not None or profile.beyond_power_mode else \
        min(e.top_hz, e.cap_hz or e.top_hz)
    hz = resolve_spec(profile, "[emc] freq", profile.emc_freq, e.available_hz, e.min_hz, hi,
                      cap)
    why = _why(profile.emc_freq, hz, hz, e.available_hz, cap)
    if cap is not None and why and cap.caps.emc_cap_file:
        why += f" ({cap.caps.emc_cap_file})"
    if e.ceiling is not None and hz > e.ceiling.hz:
        hz = e.ceiling.hz
        why = emc_ceiling_said(e.ceiling)
    requested.append(Requested("emc", "freq", profile.emc_freq, hz, why))
    if why:
        notes.append(requested[-1].said(_who(profile, "[emc] freq")))
    lift = None
    if profile.beyond_power_mode and e.cap_file and e.cap_hz is not None and hz > e.cap_hz:
        lift = (e.cap_file, hz)  # the cap in force is below the rate: raise it first
    return EmcTarget(freq_hz=hz, cap_lift=lift)


def emc_ceiling_said(ceiling: EmcCeiling) -> str:
    """'the firmware runs the EMC at most at 2.133 GHz this boot (...)'."""
    return (f"the firmware runs the EMC at most at {format_hz(ceiling.hz)} this boot "
            f"({ceiling.why}; found reading the rate back after asking "
            f"{format_hz(ceiling.asked_hz)})")


def _lifted(caps: Optional[ModeCaps], board: Board, cpu: CpuTarget,
            gpu: GpuTarget, emc: EmcTarget) -> Tuple[str, ...]:
    """What a pin goes past, for the warning and the result's power_mode.caps_lifted."""
    if caps is None:
        return ()
    out = []
    for path, _lo, hi in cpu.policy_hz:
        cap = caps.cpu_max_hz.get(path)
        if cap is not None and hi is not None and hi > cap:
            out.append(f"cpu {path.rsplit('/', 1)[-1]} {format_hz(cap)} -> {format_hz(hi)}")
    if caps.gpu_max_hz is not None and gpu.max_hz is not None and gpu.max_hz > caps.gpu_max_hz:
        out.append(f"gpu {format_hz(caps.gpu_max_hz)} -> {format_hz(gpu.max_hz)}")
    if caps.emc_max_hz is not None and emc.freq_hz is not None and \
            emc.freq_hz > caps.emc_max_hz:
        out.append(f"emc {format_hz(caps.emc_max_hz)} -> {format_hz(emc.freq_hz)}")
    if cpu.online and caps.offline:
        cores = [f.split("/")[-2] for f in caps.offline]
        out.append(f"{', '.join(cores)} brought online")
    return tuple(out)


def _nvml_target(profile: Profile, gpu: NvmlGpu, requested: List[Requested],
                 notes: List[str]) -> NvmlGpuTarget:
    """One discrete GPU's locks and power limit, resolved against its own tables."""
    where = f"[gpu] ({gpu.bus_id})"
    table = gpu.graphics_hz
    graphics: Optional[Tuple[int, int]] = None
    if profile.gpu_freq is not None and not gpu.can_lock_graphics:
        if not profile.skip_missing:
            raise _fail(profile, where, f"{gpu.name}: NVML cannot lock its graphics clock "
                                        "(no supported clocks listed, or older than Volta)")
        notes.append(f"{gpu.label}: graphics clock not lockable: skipped")
    elif profile.gpu_freq is not None:
        lo, hi = _range(profile, where, profile.gpu_freq, table, min(table), max(table),
                        requested, "gpu")
        graphics = (lo if lo is not None else min(table), hi if hi is not None else max(table))
    memory: Optional[Tuple[int, int]] = None
    if profile.gpu_memory_freq is not None and not gpu.can_lock_memory:
        notes.append(f"{gpu.label}: memory clock not lockable (Ampere or newer): skipped")
    elif profile.gpu_memory_freq is not None:
        mem = gpu.memory_hz
        hz = resolve_spec(profile, f"{where} memory_freq", profile.gpu_memory_freq, mem,
                          min(mem), max(mem))
        requested.append(Requested("gpu-mem", "freq", profile.gpu_memory_freq, hz))
        memory = (hz, hz)
    power = _power_limit_mw(profile, gpu, where, notes)
    if gpu.persistence is False and (graphics or memory or power is not None):
        notes.append(f"{gpu.label}: persistence mode is off: when no process holds the GPU the "
                     "driver may unload it, and the locked clocks and power limit go with it "
                     "(`sudo nvidia-smi -pm 1`, or the nvidia-persistenced service)")
    return NvmlGpuTarget(gpu.bus_id, graphics, memory, power)


def _power_limit_mw(profile: Profile, gpu: NvmlGpu, where: str,
                    notes: List[str]) -> Optional[int]:
    spec = profile.gpu_power_limit
    if spec is None:
        return None
    if gpu.power_limits_mw is None:
        notes.append(f"{gpu.label}: the power limit is not settable: [gpu] power_limit skipped")
        return None
    lo, hi = gpu.power_limits_mw
    if spec == "default":
        return gpu.default_power_mw
    if isinstance(spec, str):
        return hi if spec == "max" else lo
    if not lo <= spec <= hi:
        raise _fail(profile, f"{where} power_limit", f"{spec / 1000:g} W is outside this GPU's "
                                                     f"{lo / 1000:g} .. {hi / 1000:g} W")
    return spec


def _why(spec: FreqSpec, knob_hz: int, runs_hz: int, table: Sequence[int],
         cap: Optional[Cap]) -> str:
    """Why the clock that runs (`runs_hz`, for knob value `knob_hz`) is not the request, said
    so that a user can check it against `jetbench info`; "" where it is what was asked."""
    mode = f"power mode {cap.caps.mode.text}" if cap is not None else ""
    if cap is not None and knob_hz == cap.hz and (spec == MAX or
                                                  (isinstance(spec, int) and spec > cap.hz)):
        if runs_hz != knob_hz:
            return (f"{mode} caps {cap.clock} at {format_hz(cap.hz)}, no table entry: the "
                    "kernel runs the highest entry not above it")
        return f"{mode}'s cap on {cap.clock}"
    if not isinstance(spec, int) or abs(spec - runs_hz) <= runs_hz * _SAME_ENTRY:
        return ""  # the entry itself, as jetbench prints it (624.8MHz for 624.75 MHz)
    if not table:
        return "the edge of this clock's range"
    if runs_hz != knob_hz:
        return (f"{mode} caps {cap.clock if cap else 'it'} at {format_hz(knob_hz)}, no table "
                "entry: the kernel runs the highest entry not above it")
    # the entry on the other side of the request, among those this mode runs
    allowed = [f for f in table if cap is None or f <= cap.hz]
    other = [f for f in allowed if (f < spec if runs_hz > spec else f > spec)]
    if not other:
        if cap is not None and runs_hz < spec:
            return f"the highest table entry {mode} runs {cap.clock} at"
        return "the nearest table entry (the table's " + \
            ("lowest)" if runs_hz > spec else "highest)")
    near = max(other) if runs_hz > spec else min(other)
    return (f"the nearest table entry ({format_hz(near)} is "
            f"{'below' if near < spec else 'above'})")


def _range(
    profile: Profile, where: str, freq: Optional[FreqRange], table: Sequence[int], lo: int,
    hi: int, requested: List[Requested], domain: str, cap: Optional[Cap] = None,
    notes: Optional[List[str]] = None,
) -> Tuple[Optional[int], Optional[int]]:
    """A clock's min/max knob values for `freq`, each request recorded (`requested`) with the
    clock that runs for it and why that is not what was asked (said once in `notes`)."""
    if freq is None:
        return None, None
    new_lo = resolve_spec(profile, f"{where} {'freq' if freq.pinned else 'min_freq'}",
                          freq.min, table, lo, hi, cap) if freq.min is not None else None
    new_hi = resolve_spec(profile, f"{where} max_freq", freq.max, table, lo, hi, cap) \
        if freq.max is not None else None

    def record(setting: str, spec: FreqSpec, knob_hz: int) -> None:
        # a knob that is no table entry (a cap) runs the highest entry not above it
        # (hw/clocks/runs.py)
        runs = knob_hz if is_entry(table, knob_hz) else at_or_below(table, knob_hz)
        said = Requested(domain, setting, spec, runs, _why(spec, knob_hz, runs, table, cap))
        requested.append(said)
        line = said.said(_who(profile, f"{where} {setting}"))
        if said.why and notes is not None and line not in notes:
            notes.append(line)
    if freq.pinned:
        assert freq.min is not None and new_lo is not None
        record("freq", freq.min, new_lo)
    else:
        if new_lo is not None and freq.min is not None:
            record("min_freq", freq.min, new_lo)
        if new_hi is not None and freq.max is not None:
            record("max_freq", freq.max, new_hi)
    if new_lo is not None and new_hi is not None and new_lo > new_hi:
        raise _fail(profile, where, "min_freq resolves above max_freq")
    return new_lo, new_hi


def _cpu_target(profile: Profile, board: Board, requested: List[Requested],
                limit: Optional[ModeCaps], notes: List[str]) -> CpuTarget:
    governor = None
    if profile.cpu_governors:
        common = set(board.cpu.policies[0].governors)
        for policy in board.cpu.policies[1:]:
            common &= set(policy.governors)
        governor = next((g for g in profile.cpu_governors if g in common), None)
        if governor is None:
            raise _fail(profile, "[cpu] governor",
                        f"{' or '.join(profile.cpu_governors)} not available here "
                        f"(available: {', '.join(sorted(common))})")
    per_policy = []
    offline = limit.offline if limit is not None else ()
    if profile.cpu_freq is not None:
        # Clusters may have different tables: resolve each one against its own. A cluster
        # whose cores the power mode took offline is left as it is (as jetson_clocks does).
        policies = [p for p in board.cpu.policies
                    if not all(cpu_online_file(c) in offline for c in p.cpus)]
        for policy in policies:
            cap_hz = limit.cpu_max_hz.get(policy.path) if limit is not None else None
            cap = Cap(cap_hz, limit, f"CPU {policy.name}") \
                if limit is not None and cap_hz is not None else None
            first_cap = limit.cpu_max_hz.get(policies[0].path) if limit is not None else None
            # one note per distinct cap (Thor's 14 one-core policies share theirs)
            said = notes if policy is policies[0] or cap_hz != first_cap else None
            lo, hi = _range(profile, f"[cpu] ({policy.name})", profile.cpu_freq,
                            policy.available_hz, policy.min_hz, policy.max_hz,
                            requested if policy is policies[0] else [], "cpu", cap, said)
            per_policy.append((policy.path, lo, hi))
    if governor:
        requested.append(Requested("cpu", "governor", governor, None))
    pinned = bool(profile.cpu_freq and profile.cpu_freq.pinned)
    return CpuTarget(governor=governor, policy_hz=tuple(per_policy),
                     setspeed=governor == "userspace" and pinned,
                     online=profile.cpu_online, idle=profile.cpu_idle, keep_offline=offline)
