"""The simulated LLM's speed model (`jetbench sim app --llm`, docs/daemon.md "Phases").

Serving a language model has two phases (vLLM's engine steps, continuous batching):

- **prefill**: a prompt of N tokens goes through the network at once, in chunks of at most
  `chunk` tokens (vLLM's chunked prefill). A chunk is compute-bound: every weight multiplies
  every token of the chunk,

      t_compute = 2 * params * n / (cuda_cores * flop_per_clock * f_gpu * EFFICIENCY)
      t_memory  = (params + n * kv_elems_per_token) * bytes / (bandwidth(f_emc) * MEMORY_EFF.)

  so its time follows the GPU clock;
- **decode**: one token for each running request per step; every weight is read once per step
  and every request's KV cache once,

      t_compute = 2 * params * batch / (...f_gpu...)
      t_memory  = (params + batch * context * kv_elems_per_token) * bytes / (...f_emc...)

  so a step is memory-bound: its time follows the EMC clock and barely the GPU's (at batch 1 the
  compute is about 1% of the memory time on an Orin Nano; the GPU's clock a sixth lower still
  hides it under the memory traffic).

The two parts of a step combine as the network model's do (sim/workload_model.py: the longer
plus (1 - OVERLAP) of the shorter), with the same efficiencies, plus a host cost per step.
That decode is barely sensitive to the GPU clock is what was measured on datacenter GPUs
(arXiv 2501.08219: 2842 -> 180 MHz saved 42% of the energy for 1-6% more latency), and decode
is 77-91% of the time in LLM serving there; the numbers here are plausible for a Jetson, not
calibrated on one. Everything it gives is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from .workload_model import (
    BYTES,
    EFFICIENCY,
    MEMORY_EFFICIENCY,
    BatchTime,
    Clocks,
    FamilyConstants,
    peak_bandwidth_bytes_per_s,
)

HOST_CYCLES_PER_STEP = 3e6  # the engine's own work per step (scheduling, sampling): 2 ms at 1.5 GHz


@dataclass(frozen=True)
class LlmShape:
    """A decoder-only model: its weights and the KV cache one token keeps (2 x layers x KV
    heads x head size elements), from the model's published configuration."""

    params: float
    kv_elems_per_token: int
    source: str


LLMS: Dict[str, LlmShape] = {
    "llama-3.2-1b": LlmShape(1.24e9, 2 * 16 * 8 * 64,
                             "Llama 3.2 1B: 1.24 B parameters, 16 layers, 8 KV heads of 64"),
    "llama-3.2-3b": LlmShape(3.21e9, 2 * 28 * 8 * 128,
                             "Llama 3.2 3B: 3.21 B parameters, 28 layers, 8 KV heads of 128"),
}


def _step(constants: FamilyConstants, precision: str, flops: float, traffic_elems: float,
          clocks: Clocks) -> BatchTime:
    per_clock = constants.flop_per_clock[precision]
    compute_s = flops / (constants.cuda_cores * per_clock * clocks.gpu_hz * EFFICIENCY[precision])
    memory_s = traffic_elems * BYTES[precision] / (
        peak_bandwidth_bytes_per_s(constants, clocks.emc_hz) * MEMORY_EFFICIENCY)
    return BatchTime(compute_s, memory_s, HOST_CYCLES_PER_STEP / clocks.cpu_hz)


def prefill_time(constants: FamilyConstants, llm: LlmShape, precision: str, tokens: int,
                 clocks: Clocks) -> BatchTime:
    """One prefill chunk of `tokens` prompt tokens (see the module docstring)."""
    return _step(constants, precision, 2.0 * llm.params * tokens,
                 llm.params + tokens * llm.kv_elems_per_token, clocks)


def decode_time(constants: FamilyConstants, llm: LlmShape, precision: str, batch: int,
                context_tokens: float, clocks: Clocks) -> BatchTime:
    """One decode step: a token for each of `batch` requests whose contexts hold
    `context_tokens` tokens on average."""
    return _step(constants, precision, 2.0 * llm.params * batch,
                 llm.params + batch * context_tokens * llm.kv_elems_per_token, clocks)
