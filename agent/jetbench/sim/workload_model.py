"""The simulated workload's latency model (`--model sim:NAME`, docs/boards.md, "Simulated
workloads").

One batch of a network on a simulated board takes

    t_batch   = t_cpu + max(t_compute, t_memory) + (1 - OVERLAP) * min(t_compute, t_memory)
    t_compute = batch * 2 * MACs / (cuda_cores * flop_per_clock[precision] * f_gpu * EFF[precision])
    t_memory  = (params + batch * 2 * activations) * bytes[precision]
                / (f_emc * 2 * bus_bits / 8 * MEMORY_EFFICIENCY)
    t_cpu     = CPU_CYCLES_PER_BATCH / f_cpu

with f_gpu, f_emc and f_cpu the clocks the simulated board runs now. Memory traffic is the
weights read once per batch and every layer's output written and read back once (activations
from workload/macs.py's count); the EMC moves 2 transfers per clock on a bus of `bus_bits`
(LPDDR4/4x/5: 1600 MHz x 2 x 64 bit = 25.6 GB/s on a TX1, NVIDIA's figure). Compute and memory
overlap in part (OVERLAP = 1 would be a pure roofline, 0 no overlap at all).

Calibration: the efficiencies, OVERLAP and CPU_CYCLES_PER_BATCH are fitted, for the TX1 only,
to NVIDIA's TX1 whitepaper ("GPU-Based Deep Learning Inference: A Performance and Power
Analysis", 2015), AlexNet at a 690 MHz GPU clock (EMC and CPU at their maximum): batch 1
47 / 67 img/s and batch 128 155 / 258 img/s in FP32 / FP16. The model reproduces those four
figures within 1% (tests/test_sim_workload.py checks 10%). The other families use their own
cores, FLOP per clock and bus width with the TX1's efficiencies: plausible, not calibrated.
A simulated workload is for demos, tests and tuning runs without a board, never a claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

# Fitted on the TX1 whitepaper's four AlexNet figures (see the module docstring).
EFFICIENCY: Dict[str, float] = {"fp32": 0.66, "tf32": 0.55, "fp16": 0.55, "bf16": 0.55,
                                "int8": 0.55}
MEMORY_EFFICIENCY = 0.90  # of the bus's peak bandwidth
OVERLAP = 0.75  # share of the shorter of compute and memory hidden under the longer
CPU_CYCLES_PER_BATCH = 16e6  # the framework's host work per batch (dispatch, copies)
BYTES: Dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1}


@dataclass(frozen=True)
class FamilyConstants:
    """One board family's GPU and memory. `flop_per_clock`: per CUDA core and clock (an FMA is
    2), per precision the family runs; a precision missing is one it does not have."""

    cuda_cores: int
    flop_per_clock: Dict[str, float]
    bus_bits: int
    source: str


_MAXWELL_PASCAL = {"fp32": 2.0, "fp16": 4.0}  # native FP16x2: twice the FP32 rate
# Volta/Ampere tensor cores (dense): FP16 8x the FP32 CUDA-core rate, INT8 16x.
_TENSOR = {"fp32": 2.0, "tf32": 8.0, "fp16": 16.0, "bf16": 16.0, "int8": 32.0}

# ONE table of the simulated boards' GPU and memory, by board family (hw/board_tables.py's).
FAMILIES: Dict[str, FamilyConstants] = {
    "tx1": FamilyConstants(256, _MAXWELL_PASCAL, 64,
                           "TX1 whitepaper / module datasheet: 256 Maxwell CUDA cores, FP16 at "
                           "2x FP32, 64-bit LPDDR4 at 25.6 GB/s"),
    "nano": FamilyConstants(128, _MAXWELL_PASCAL, 64,
                            "Jetson Nano datasheet: 128 Maxwell CUDA cores, 64-bit LPDDR4, "
                            "25.6 GB/s"),
    "tx2": FamilyConstants(256, _MAXWELL_PASCAL, 128,
                           "Jetson TX2 datasheet: 256 Pascal CUDA cores, 128-bit LPDDR4, "
                           "59.7 GB/s"),
    "tx2-nx": FamilyConstants(256, _MAXWELL_PASCAL, 128,
                              "Jetson TX2 NX datasheet: 256 Pascal CUDA cores, 128-bit LPDDR4, "
                              "51.2 GB/s"),
    "xavier-agx": FamilyConstants(512, {k: v for k, v in _TENSOR.items()
                                        if k not in ("tf32", "bf16")}, 256,
                                  "Jetson AGX Xavier datasheet: 512 Volta CUDA cores, 64 tensor "
                                  "cores (11 FP16 TFLOPS, 22 INT8 TOPS), 256-bit LPDDR4x, "
                                  "137 GB/s"),
    "xavier-nx": FamilyConstants(384, {k: v for k, v in _TENSOR.items()
                                       if k not in ("tf32", "bf16")}, 128,
                                 "Jetson Xavier NX datasheet: 384 Volta CUDA cores, 48 tensor "
                                 "cores, 128-bit LPDDR4x, 51.2 GB/s"),
    "orin-agx": FamilyConstants(2048, _TENSOR, 256,
                                "Jetson AGX Orin datasheet: 2048 Ampere CUDA cores, 64 tensor "
                                "cores (170 sparse INT8 TOPS), 256-bit LPDDR5, 204.8 GB/s"),
    "orin-nano": FamilyConstants(1024, _TENSOR, 128,
                                 "Jetson Orin Nano / NX datasheet: 1024 Ampere CUDA cores, 32 "
                                 "tensor cores, 128-bit LPDDR5 (68 GB/s Nano, 102 GB/s NX)"),
    "orin-nano-super": FamilyConstants(1024, _TENSOR, 128,
                                       "Jetson Orin Nano Super: 1024 Ampere CUDA cores, 32 tensor "
                                       "cores, 128-bit LPDDR5, 102 GB/s"),
    # FP16 per clock derived from the published 2070 sparse FP4 TFLOPS (dense half, FP16 a
    # quarter of FP4): *unconfirmed*.
    "thor": FamilyConstants(2560, {"fp32": 2.0, "tf32": 16.0, "fp16": 32.0, "bf16": 32.0,
                                   "int8": 64.0}, 256,
                            "Jetson AGX Thor datasheet: 2560 Blackwell CUDA cores, 96 tensor "
                            "cores, 256-bit LPDDR5X, 273 GB/s"),
}


@dataclass(frozen=True)
class NetworkCost:
    """Per image: multiply-accumulates, and the elements every layer outputs; params: weights."""

    macs_per_image: int
    params: int
    activation_elems_per_image: int


@dataclass(frozen=True)
class Clocks:
    gpu_hz: float
    emc_hz: float
    cpu_hz: float


@dataclass(frozen=True)
class BatchTime:
    """One batch's time and its parts (seconds)."""

    compute_s: float
    memory_s: float
    cpu_s: float

    @property
    def gpu_s(self) -> float:
        longer, shorter = max(self.compute_s, self.memory_s), min(self.compute_s, self.memory_s)
        return longer + (1.0 - OVERLAP) * shorter

    @property
    def total_s(self) -> float:
        return self.cpu_s + self.gpu_s

    @property
    def gpu_busy(self) -> float:
        """The share of the batch the GPU is busy (what its `load` file would show)."""
        return self.gpu_s / self.total_s if self.total_s > 0 else 0.0


_SAME_HARDWARE = {"tx1-r24": "tx1"}  # hw/board.py's key for a TX1 on L4T R24


def family_constants(family: Optional[str]) -> Optional[FamilyConstants]:
    key = family or ""
    return FAMILIES.get(_SAME_HARDWARE.get(key, key))


def peak_bandwidth_bytes_per_s(constants: FamilyConstants, emc_hz: float) -> float:
    return emc_hz * 2.0 * constants.bus_bits / 8.0


def batch_time(constants: FamilyConstants, cost: NetworkCost, precision: str, batch: int,
               clocks: Clocks) -> BatchTime:
    """One batch's time at `clocks` (see the module docstring). A precision the family does not
    run raises KeyError (the caller says so in its own words)."""
    per_clock = constants.flop_per_clock[precision]
    flops = 2.0 * cost.macs_per_image * batch
    compute_s = flops / (constants.cuda_cores * per_clock * clocks.gpu_hz * EFFICIENCY[precision])
    traffic = (cost.params + batch * 2.0 * cost.activation_elems_per_image) * BYTES[precision]
    memory_s = traffic / (peak_bandwidth_bytes_per_s(constants, clocks.emc_hz)
                          * MEMORY_EFFICIENCY)
    return BatchTime(compute_s, memory_s, CPU_CYCLES_PER_BATCH / clocks.cpu_hz)
