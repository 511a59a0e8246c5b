"""NVIDIA discrete GPUs through NVML (optional extra: `pip install jetbench[nvml]`).

The total-energy counter (mJ, Volta and newer) is used where the GPU supports it: the energy
between two reads as the driver counts it, which is not exact: it integrates the board's power
sensor, and on A100/H100 that sensor samples only part of the time (about a quarter: Yang et
al., arXiv 2312.02741), so a window shorter than a few seconds can miss or double short bursts;
its uncertainty stays "unknown" (hw/meters/accuracy.py). Otherwise power is polled (mW; a 1 s
trailing average on Ampere and newer, so short windows are smeared). On a Jetson NVML
initialises and then answers NotSupported: that is "not available here", never 0 J.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Optional, Tuple

from ...errors import HardwareError
from ..cuda_map import CudaGpu, nvml_index
from ..nvml import NvmlHandle, load_pynvml, shutdown
from .base import KIND_ENERGY, KIND_POWER, Channel, Reading, Total

SOURCE_NAME = "nvml"


class NvmlSource:
    pushed = False
    # what the result's uncertainty says of it (hw/meters/accuracy.py)
    accuracy_unknown_because = (
        "NVML publishes no accuracy; its energy counter integrates a power sensor that samples "
        "only part of the time on A100/H100 (about a quarter: arXiv 2312.02741), so short "
        "windows can miss or double bursts")

    def __init__(self, index: int = 0, *, name: str = SOURCE_NAME,
                 gpu: Optional[CudaGpu] = None):
        """`gpu`: the workload's CUDA device, mapped to NVML's index at open (else `index`)."""
        self.index = index
        self.gpu = gpu
        self.name = name if index == 0 else f"{name}{index}"
        self.mode = KIND_ENERGY  # decided at open
        self.period_s = 0.02
        self._nv: Optional[ModuleType] = None
        self._handle: NvmlHandle = None

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
            shutdown(nv)  # initialised: every nvmlInit has its nvmlShutdown
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
        if nv is None:
            raise HardwareError(f"NVML source GPU{self.index} read before open()")
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
            shutdown(self._nv)
        self._nv = None
        self._handle = None
