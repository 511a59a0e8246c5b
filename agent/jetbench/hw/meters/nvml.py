"""NVIDIA discrete GPUs through NVML (optional extra: `pip install jetbench[nvml]`).

The total-energy counter (mJ, Volta and newer) is used where the GPU supports it: exact energy
between two reads. Otherwise power is polled (mW; a 1 s trailing average on Ampere and newer, so
short windows are smeared). On a Jetson NVML initialises and then answers NotSupported: that is
"not available here", never 0 J.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ...errors import HardwareError
from ..nvml_lib import load_pynvml, nvml_text
from .base import KIND_ENERGY, KIND_POWER, Channel, Reading, Total

SOURCE_NAME = "nvml"


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
    def util(nv: Any, h: Any) -> Optional[float]:
        try:
            return float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
        except nv.NVMLError:
            return None
    value = _nvml_probe(index, util)
    return value if isinstance(value, float) else None


def _answers(nv: Any, call: Any, handle: Any) -> bool:
    try:
        call(handle)
        return True
    except nv.NVMLError:
        return False


def _nvml_probe(index: int, probe: Any) -> Any:
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


@dataclass(frozen=True)
class CudaGpu:
    """The workload's GPU as CUDA numbers it: `cuda:ordinal` among `visible`
    (CUDA_VISIBLE_DEVICES, None when unset), enumerated in `order` (CUDA_DEVICE_ORDER)."""

    ordinal: int = 0
    visible: Optional[str] = None
    order: Optional[str] = None


def cuda_gpu(device: str, environ: Mapping[str, str]) -> Optional[CudaGpu]:
    """The CudaGpu of a workload's --device ('cuda:N', 'cuda' and 'auto' are CUDA device 0 or N)
    under `environ` (the caller's os.environ); None for the CPU."""
    word = (device or "auto").lower()
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if word == "cpu" or (visible is not None and not visible_entries(visible)):
        return None  # on the CPU, or CUDA sees no GPU: NVML's GPU 0, as without a workload
    ordinal = int(word.split(":", 1)[1]) if word.startswith("cuda:") else 0
    return CudaGpu(ordinal, visible, environ.get("CUDA_DEVICE_ORDER"))


def visible_entries(visible: str) -> List[str]:
    """CUDA_VISIBLE_DEVICES's devices: integers or UUIDs, up to the first entry that is
    neither (CUDA ignores the rest, so "-1" hides every GPU)."""
    entries: List[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not (entry.isdigit() or entry.upper().startswith(("GPU-", "MIG-"))):
            break
        entries.append(entry)
    return entries


def nvml_index(nv: Any, gpu: CudaGpu) -> int:
    """NVML's index of CUDA's device `gpu.ordinal`. NVML numbers GPUs by PCI bus id whatever
    CUDA_VISIBLE_DEVICES says; CUDA numbers the visible ones from 0, fastest first unless
    CUDA_DEVICE_ORDER=PCI_BUS_ID. A UUID entry (GPU-..., a prefix is enough) is matched by UUID;
    an integer entry is the PCI-order index when the order is PCI_BUS_ID or every GPU is the
    same model (fastest-first then has no fastest); otherwise it cannot be told."""
    count = nv.nvmlDeviceGetCount()
    if gpu.visible is None:
        entry = str(gpu.ordinal)
    else:
        entries = visible_entries(gpu.visible)
        if gpu.ordinal >= len(entries):
            raise HardwareError(f"cuda:{gpu.ordinal} is not among CUDA_VISIBLE_DEVICES="
                                f"{gpu.visible!r}")
        entry = entries[gpu.ordinal]
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    if entry.upper().startswith("GPU-"):
        uuids = [nvml_text(nv.nvmlDeviceGetUUID(h)) for h in handles]
        found = [i for i, uuid in enumerate(uuids) if uuid.upper().startswith(entry.upper())]
        if len(found) != 1:
            raise HardwareError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches "
                                f"{len(found)} of NVML's GPUs ({', '.join(uuids)})")
        return found[0]
    if not entry.isdigit() or int(entry) >= count:
        raise HardwareError(f"CUDA device {entry!r} is not one of NVML's {count} GPU(s)")
    pci_order = (gpu.order or "").upper() == "PCI_BUS_ID"
    same_model = pci_order or count == 1 or len(
        {nvml_text(nv.nvmlDeviceGetName(h)) for h in handles}) == 1
    if not same_model:
        raise HardwareError(
            f"cannot tell which NVML GPU is cuda:{gpu.ordinal}: CUDA enumerates these "
            f"{count} different GPUs fastest first, NVML by PCI bus id",
            hint="set CUDA_DEVICE_ORDER=PCI_BUS_ID, or CUDA_VISIBLE_DEVICES to the GPU's UUID "
                 "(nvidia-smi -L)")
    return int(entry)


class NvmlSource:
    pushed = False

    def __init__(self, index: int = 0, *, name: str = SOURCE_NAME,
                 gpu: Optional[CudaGpu] = None):
        """`gpu`: the workload's CUDA device, mapped to NVML's index at open (else `index`)."""
        self.index = index
        self.gpu = gpu
        self.name = name if index == 0 else f"{name}{index}"
        self.mode = KIND_ENERGY  # decided at open
        self.period_s = 0.02
        self._nv: Any = None
        self._handle: Any = None

    def channels(self) -> Tuple[Channel, ...]:
        unit = "mJ counter" if self.mode == KIND_ENERGY else "mW"
        return (Channel(f"GPU{self.index}", self.name, "gpu_board", kind=self.mode, unit=unit),)

    def total(self) -> Optional[Total]:
        n = f"GPU{self.index}"
        return Total(n, "channel", (n,), "gpu_board")

    def open(self) -> None:
        nv = load_pynvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as err:
            raise HardwareError(f"NVML does not start ({err})") from err
        try:
            if self.gpu is not None:
                self.index = nvml_index(nv, self.gpu)
            self._handle = nv.nvmlDeviceGetHandleByIndex(self.index)
        except (nv.NVMLError, HardwareError) as err:
            _shutdown(nv)  # initialised: every nvmlInit has its nvmlShutdown
            if isinstance(err, HardwareError):
                raise
            raise HardwareError(f"NVML cannot open GPU {self.index} ({err})") from err
        self._nv = nv
        try:
            nv.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self.mode, self.period_s = KIND_ENERGY, 0.02
            return
        except nv.NVMLError:
            pass  # pre-Volta, or a Jetson: try power
        try:
            nv.nvmlDeviceGetPowerUsage(self._handle)
            self.mode, self.period_s = KIND_POWER, 0.1
        except nv.NVMLError as err:
            self.close()
            raise HardwareError(
                f"NVML reports neither energy nor power for GPU {self.index} ({err}): "
                "not available here",
                hint="on a Jetson use --meter ina3221 (the board's rails) or an external meter",
            ) from err

    def read(self) -> Reading:
        nv, h = self._nv, self._handle
        t_a = time.monotonic()
        value: Optional[float]
        try:
            if self.mode == KIND_ENERGY:
                value = nv.nvmlDeviceGetTotalEnergyConsumption(h) * 1e-3
            else:
                value = nv.nvmlDeviceGetPowerUsage(h) * 1e-3
        except nv.NVMLError:
            value = None
        return Reading((t_a + time.monotonic()) * 0.5, (value,))

    def close(self) -> None:
        if self._nv is not None:
            _shutdown(self._nv)
        self._nv = None
        self._handle = None


def _shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - nothing more to release
        pass
