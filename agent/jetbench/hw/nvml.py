"""Discrete NVIDIA GPUs' clocks and power limit through NVML (`pip install 'jetbench[nvml]'`).

On a generic host (not a Jetson) the GPUs the NVIDIA driver lists under /proc/driver/nvidia/gpus
(read under the root) are controlled through NVML: locked graphics clocks
(`nvmlDeviceSetGpuLockedClocks`, Volta and newer), locked memory clocks
(`nvmlDeviceSetMemoryLockedClocks`, Ampere and newer), their resets, and the power limit
(`nvmlDeviceSetPowerManagementLimit`, mW). Setting any of them needs root.

NVML state is not a file, so each setting is addressed by a knob key that the planner, the
journal and restore treat like a path: `nvml:<PCI bus id>/<setting>`. NVML cannot read a lock
back (there is no nvmlDeviceGetGpuLockedClocks), so the value journalled for a lock is
`default` (what `nvmlDeviceReset*LockedClocks` gives back) and restore resets it; the power limit
is read (`nvmlDeviceGetPowerManagementLimit`) and put back as it was. NVML is initialised once per
process, and a GPU is found by its PCI bus id each time, never by an
index that may change between boots.

Also the rest of what jetbench asks NVML: whether it sees a GPU, power/energy support and
utilisation (the `nvml` meter, hw/meters/nvml.py, reads through these), and which NVML index is a
CUDA device. Every pynvml call of the package is in this file.

*Unverified on hardware*: written against nvidia-ml-py's signatures and tested with a stand-in.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple

from ..errors import HardwareError, PermissionDenied, UnsafePath, WriteRejected
from .clocks.types import ClockReading

if TYPE_CHECKING:
    from .fs import Root

KEY_PREFIX = "nvml:"
GPU_LOCK = "gpu_locked_clocks"  # "MIN_MHZ,MAX_MHZ" or DEFAULT
MEMORY_LOCK = "memory_locked_clocks"  # "MIN_MHZ,MAX_MHZ" or DEFAULT
POWER_LIMIT = "power_limit_mw"  # milliwatts, as NVML takes it
SETTINGS = (POWER_LIMIT, MEMORY_LOCK, GPU_LOCK)  # the order a pin writes them in
DEFAULT = "default"  # a lock as the driver has it after a reset
MHZ = 1_000_000
# NVML's return codes (nvml.h): the two whose meaning the user can act on.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
# nvmlDeviceArchitecture_t: locked GPU clocks from Volta, locked memory clocks from Ampere.
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_AMPERE = 7
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_MEM = 2
_BUS_ID = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_LOCK_VALUE = re.compile(r"^(\d{1,5}),(\d{1,5})$")


@dataclass(frozen=True)
class NvmlGpu:
    """One discrete GPU NVML controls. Frequencies in Hz (NVML says MHz)."""

    bus_id: str  # "0000:01:00.0", as /proc/driver/nvidia/gpus names it
    name: str
    graphics_hz: Tuple[int, ...]  # supported graphics clocks at the highest memory clock
    memory_hz: Tuple[int, ...]
    power_limits_mw: Optional[Tuple[int, int]]  # (min, max) the driver accepts; None: fixed
    default_power_mw: Optional[int]
    architecture: Optional[int] = None  # nvmlDeviceArchitecture_t; None: NVML did not say
    # Persistence mode (nvidia-smi -pm): off, the driver may unload when no process holds the
    # GPU, and locked clocks and the power limit go with it. None: NVML did not say.
    persistence: Optional[bool] = None
    # This nvidia-ml-py has the memory-lock calls (nvmlDevice{Set,Reset}MemoryLockedClocks):
    # the older releases the `nvml` extra admits (11.450) have none, so nothing is pinned that
    # restore could not put back.
    memory_lock_calls: bool = True

    @property
    def can_lock_graphics(self) -> bool:
        return bool(self.graphics_hz) and (self.architecture is None
                                           or self.architecture >= NVML_DEVICE_ARCH_VOLTA)

    @property
    def can_lock_memory(self) -> bool:
        return bool(self.memory_hz) and self.memory_lock_calls and (
            self.architecture is None or self.architecture >= NVML_DEVICE_ARCH_AMPERE)

    @property
    def label(self) -> str:
        return f"GPU {self.bus_id} ({self.name})"


def normalise_bus_id(text: str) -> Optional[str]:
    """'00000000:01:00.0' (NVML) or '0000:01:00.0' (procfs) -> '0000:01:00.0'; None if neither."""
    match = _BUS_ID.match(text.strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}"


def key(bus_id: str, setting: str) -> str:
    return f"{KEY_PREFIX}{bus_id}/{setting}"


def is_key(path: str) -> bool:
    return path.startswith(KEY_PREFIX)


def parse_key(path: str) -> Tuple[str, str]:
    """(bus id, setting) of a knob key; UnsafePath for anything else."""
    bus, _, setting = path[len(KEY_PREFIX):].partition("/")
    norm = normalise_bus_id(bus)
    if not is_key(path) or norm is None or norm != bus or setting not in SETTINGS:
        raise UnsafePath(f"not an NVML setting jetbench writes: {path[:80]!r}")
    return bus, setting


def check_value(path: str, raw: str) -> None:
    """A value restore could write to this key (UnsafePath otherwise)."""
    _bus, setting = parse_key(path)
    text = raw.strip()
    if setting == POWER_LIMIT:
        ok = text.isdigit() and len(text) <= 9
    else:
        ok = text == DEFAULT or _LOCK_VALUE.match(text) is not None
    if not ok:
        raise UnsafePath(f"{raw[:40]!r} is not a value for {setting}", path=path)


def lock_value(lo_hz: int, hi_hz: int) -> str:
    return f"{lo_hz // MHZ},{hi_hz // MHZ}"


# pynvml (nvidia-ml-py) ships no types: its device handles (ctypes pointers it hands out and
# takes back) and its answers (ints, lists, structs, bytes or str by release) are Any here.
NvmlHandle = Any
NvmlAnswer = Any  # pynvml: as above


# -- NVML sessions ---------------------------------------------------------------------------
def _hardware_error(nv: ModuleType, err: Exception, what: str, path: Optional[str]
                    ) -> HardwareError:
    code = getattr(err, "value", None)
    if code == NVML_ERROR_NO_PERMISSION:
        return PermissionDenied(f"{what}: NVML says no permission ({err})", path=path,
                                hint="locking clocks and setting the power limit need root: "
                                     "run with sudo")
    if code == NVML_ERROR_NOT_SUPPORTED:
        return WriteRejected(f"{what}: not supported by this GPU or driver ({err})", path=path,
                             hint="locked GPU clocks need Volta or newer, locked memory clocks "
                                  "Ampere or newer; a GeForce board may refuse either")
    return HardwareError(f"{what}: NVML error ({err})", path=path)


# (pid, library) that initialised NVML: nvmlInit can take a large fraction of a second without
# persistence mode, too slow for every clock read of `monitor` or a measure window, so it is
# called once per process and library, and never undone (NVML counts inits: the power source's
# own init/shutdown pairs leave this one standing).
_initialised: Optional[Tuple[int, ModuleType]] = None


@contextmanager
def _session() -> Iterator[ModuleType]:
    global _initialised
    nv = load_pynvml("the GPUs' clocks cannot be set")
    if _initialised is None or _initialised[0] != os.getpid() or _initialised[1] is not nv:
        try:
            nv.nvmlInit()
        except nv.NVMLError as err:
            raise _hardware_error(nv, err, "NVML does not start", None) from err
        _initialised = (os.getpid(), nv)
    try:
        yield nv
    except nv.NVMLError as err:  # a query the caller did not expect to fail
        raise _hardware_error(nv, err, "NVML", None) from err


def _handles(nv: ModuleType) -> List[Tuple[str, NvmlHandle]]:
    """(normalised bus id, handle) of every GPU NVML sees."""
    out = []
    for index in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        bus = normalise_bus_id(nvml_text(nv.nvmlDeviceGetPciInfo(handle).busId))
        if bus is not None:
            out.append((bus, handle))
    return out


def _handle(nv: ModuleType, bus_id: str, path: Optional[str]) -> NvmlHandle:
    for bus, handle in _handles(nv):
        if bus == bus_id:
            return handle
    raise HardwareError(f"NVML does not see the GPU at {bus_id}", path=path,
                        hint="was it removed, or is the driver reloading? `nvidia-smi` lists "
                             "the GPUs NVML sees")


# -- detection -------------------------------------------------------------------------------
def detect(bus_ids: Sequence[str], notes: List[str]) -> Tuple[NvmlGpu, ...]:
    """The GPUs of `bus_ids` (the driver's list, read under the root) as NVML describes them.
    No NVML, or NVML not starting: none, with a note saying why (never a crash)."""
    wanted = [b for b in (normalise_bus_id(x) for x in bus_ids) if b is not None]
    if not wanted:
        return ()
    try:
        with _session() as nv:
            found = dict(_handles(nv))
            gpus = []
            for bus in wanted:
                if bus not in found:
                    notes.append(f"GPU {bus}: listed by the driver, not seen by NVML")
                    continue
                gpus.append(_describe(nv, bus, found[bus], notes))
            return tuple(gpus)
    except HardwareError as err:
        notes.append(f"NVIDIA GPU(s) {', '.join(wanted)}: clocks not controllable "
                     f"({err.message})")
        return ()


def _describe(nv: ModuleType, bus: str, handle: NvmlHandle, notes: List[str]) -> NvmlGpu:
    name = nvml_text(nv.nvmlDeviceGetName(handle))
    memory_mhz = sorted(set(_optional(nv, nv.nvmlDeviceGetSupportedMemoryClocks, handle) or ()))
    graphics_mhz: List[int] = []
    if memory_mhz:
        graphics_mhz = sorted(set(_optional(nv, nv.nvmlDeviceGetSupportedGraphicsClocks, handle,
                                            memory_mhz[-1]) or ()))
    if not graphics_mhz:
        notes.append(f"GPU {bus} ({name}): NVML lists no supported clocks: not pinned")
    limits = _optional(nv, nv.nvmlDeviceGetPowerManagementLimitConstraints, handle)
    memory_calls = all(hasattr(nv, f) for f in ("nvmlDeviceSetMemoryLockedClocks",
                                                "nvmlDeviceResetMemoryLockedClocks"))
    if not memory_calls and memory_mhz:
        notes.append(f"GPU {bus} ({name}): this nvidia-ml-py has no memory-lock calls: the "
                     "memory clock is not pinned (pip install -U nvidia-ml-py)")
    return NvmlGpu(
        bus_id=bus, name=name,
        graphics_hz=tuple(m * MHZ for m in graphics_mhz),
        memory_hz=tuple(m * MHZ for m in memory_mhz),
        power_limits_mw=(int(limits[0]), int(limits[1])) if limits else None,
        default_power_mw=_optional(nv, nv.nvmlDeviceGetPowerManagementDefaultLimit, handle),
        architecture=_optional(nv, getattr(nv, "nvmlDeviceGetArchitecture", None), handle),
        persistence=_persistence(nv, handle),
        memory_lock_calls=memory_calls,
    )


def _persistence(nv: ModuleType, handle: NvmlHandle) -> Optional[bool]:
    mode = _optional(nv, getattr(nv, "nvmlDeviceGetPersistenceMode", None), handle)
    return None if mode is None else bool(mode)


def _optional(nv: ModuleType, call: Optional[Callable[..., NvmlAnswer]], *args: object
              ) -> NvmlAnswer:
    """A query's answer, or None where this GPU (or this nvidia-ml-py) does not support it."""
    if call is None:
        return None
    try:
        return call(*args)
    except nv.NVMLError:
        return None


# -- reading and writing settings ------------------------------------------------------------
def read_setting(path: str) -> str:
    """The setting's current value as the journal keeps it (a lock: always DEFAULT, since NVML
    cannot read a lock back; the power limit: mW as NVML reports it)."""
    bus, setting = parse_key(path)
    if setting != POWER_LIMIT:
        return DEFAULT
    with _session() as nv:
        try:
            return str(int(nv.nvmlDeviceGetPowerManagementLimit(_handle(nv, bus, path))))
        except nv.NVMLError as err:
            raise _hardware_error(nv, err, "reading the power limit", path) from err


def write_setting(path: str, value: str) -> None:
    """Set one NVML setting (DEFAULT resets a lock)."""
    check_value(path, value)
    bus, setting = parse_key(path)
    text = value.strip()
    with _session() as nv:
        handle = _handle(nv, bus, path)
        try:
            if setting == POWER_LIMIT:
                nv.nvmlDeviceSetPowerManagementLimit(handle, int(text))
            elif text == DEFAULT:
                reset = (nv.nvmlDeviceResetGpuLockedClocks if setting == GPU_LOCK
                         else nv.nvmlDeviceResetMemoryLockedClocks)
                reset(handle)
            else:
                lo, hi = (int(v) for v in text.split(","))
                lock = (nv.nvmlDeviceSetGpuLockedClocks if setting == GPU_LOCK
                        else nv.nvmlDeviceSetMemoryLockedClocks)
                lock(handle, lo, hi)
        except nv.NVMLError as err:
            if text == DEFAULT and getattr(err, "value", None) == NVML_ERROR_NOT_SUPPORTED:
                return  # a GPU that cannot hold this lock holds none: it is at its default
            raise _hardware_error(nv, err, f"setting {setting} to {text}", path) from err


def read_clocks(gpus: Sequence[NvmlGpu]) -> List[ClockReading]:
    """Each GPU's graphics clock (domain `gpu`) and memory clock (`gpu-mem`) as running now.
    min/max are the supported range: NVML cannot read a lock back."""
    if not gpus:
        return []
    out: List[ClockReading] = []
    try:
        with _session() as nv:
            _read_into(nv, gpus, out)
    except HardwareError:  # NVML gone since detection: the clocks are unknown, not 0
        out = [ClockReading(domain, f"{g.bus_id} {g.name}", "nvml", None, None, None)
               for g in gpus for domain in ("gpu", "gpu-mem")]
    return out


def _read_into(nv: ModuleType, gpus: Sequence[NvmlGpu], out: List[ClockReading]) -> None:
    handles = dict(_handles(nv))
    for gpu in gpus:
        handle = handles.get(gpu.bus_id)
        for domain, clock, table in (("gpu", NVML_CLOCK_GRAPHICS, gpu.graphics_hz),
                                     ("gpu-mem", NVML_CLOCK_MEM, gpu.memory_hz)):
            cur = _optional(nv, nv.nvmlDeviceGetClockInfo, handle, clock) \
                if handle is not None else None
            out.append(ClockReading(
                domain=domain, name=f"{gpu.bus_id} {gpu.name}", governor="nvml",
                min_hz=min(table) if table else None, max_hz=max(table) if table else None,
                cur_hz=int(cur) * MHZ if cur is not None else None, available_hz=table))


def load_pynvml(consequence: str = "") -> ModuleType:
    """The pynvml module, or HardwareError "NVML is not installed[: consequence]"."""
    try:
        import pynvml
    except ImportError as err:
        what = "NVML is not installed" + (f": {consequence}" if consequence else "")
        raise HardwareError(what, hint="pip install 'jetbench[nvml]' (nvidia-ml-py)") from err
    return pynvml


def nvml_text(value: object) -> str:
    """An NVML string: bytes in older nvidia-ml-py releases, str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_available() -> bool:
    """True when NVML loads and sees at least one GPU (cheap enough for `auto`)."""
    try:
        nv = load_pynvml()
        nv.nvmlInit()
    except Exception:
        return False
    try:
        return nv.nvmlDeviceGetCount() > 0
    except Exception:
        return False
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def nvml_power_supported(index: int = 0) -> bool:
    """True when NVML reports power or energy for GPU `index`: discrete GPUs and Thor. On Orin
    and older Jetsons NVML initialises and answers NotSupported: False (never 0 W)."""
    return _nvml_probe(index, lambda nv, h: (
        _answers(nv, nv.nvmlDeviceGetTotalEnergyConsumption, h)
        or _answers(nv, nv.nvmlDeviceGetPowerUsage, h))) is True


def gpu_utilisation_pct(index: int = 0) -> Optional[float]:
    """The GPU's utilisation (%) from NVML, or None where NVML is absent or does not say."""
    def util(nv: ModuleType, h: NvmlHandle) -> Optional[float]:
        try:
            return float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
        except nv.NVMLError:
            return None
    value = _nvml_probe(index, util)
    return value if isinstance(value, float) else None


def _answers(nv: ModuleType, call: Callable[[NvmlHandle], object], handle: NvmlHandle) -> bool:
    try:
        call(handle)
        return True
    except nv.NVMLError:
        return False


def _nvml_probe(index: int, probe: Callable[[ModuleType, NvmlHandle], object]) -> object:
    """Run `probe(nvml, handle)` between init and shutdown; None when NVML cannot start."""
    try:
        nv = load_pynvml()
        nv.nvmlInit()
    except Exception:
        return None
    try:
        return probe(nv, nv.nvmlDeviceGetHandleByIndex(index))
    except Exception:
        return None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def shutdown(nv: ModuleType) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - nothing more to release
        pass


# The knob backend (hw/knob_io.py): NVML settings are not under the root.
def read_knob(root: Root, path: str) -> str:
    return read_setting(path)


def write_knob(root: Root, path: str, value: str) -> None:
    write_setting(path, value)


def readable(path: str) -> bool:
    """Only the power limit reads back: NVML has no getter for a clock lock."""
    return parse_key(path)[1] == POWER_LIMIT
