"""The workload's GPU as CUDA numbers it, and NVML's index for it: CUDA_VISIBLE_DEVICES (integers,
GPU UUIDs, MIG slices) and CUDA_DEVICE_ORDER, which renumber what NVML numbers by PCI bus id."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import List, Mapping, Optional

from ..errors import HardwareError
from .nvml import nvml_text


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


def nvml_index(nv: ModuleType, gpu: CudaGpu) -> int:
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
    if entry.upper().startswith("MIG-"):
        return _mig_parent_index(nv, entry)
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


def _mig_parent_index(nv: ModuleType, entry: str) -> int:
    """NVML's index of the GPU a MIG slice (CUDA_VISIBLE_DEVICES=MIG-...) is part of: NVML
    reads power and energy per GPU, not per slice."""
    try:
        mig = nv.nvmlDeviceGetHandleByUUID(entry)
        parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
        return int(nv.nvmlDeviceGetIndex(parent))
    except (nv.NVMLError, AttributeError) as err:
        raise HardwareError(f"CUDA_VISIBLE_DEVICES entry {entry!r}: NVML does not find the GPU "
                            f"this MIG slice is part of ({err})") from err


def mig_note(gpu: Optional[CudaGpu]) -> Optional[str]:
    """What a result says when the workload's GPU is a MIG slice: NVML's power is the whole
    GPU's (every slice of it), not the slice's."""
    if gpu is None or gpu.visible is None:
        return None
    entries = visible_entries(gpu.visible)
    if gpu.ordinal < len(entries) and entries[gpu.ordinal].upper().startswith("MIG-"):
        return (f"cuda:{gpu.ordinal} is a MIG slice ({entries[gpu.ordinal]}): NVML measures "
                "the GPU it is part of, every slice together, so its power and img/J are the "
                "whole GPU's")
    return None
