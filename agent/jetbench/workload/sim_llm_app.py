"""`jetbench sim app --llm`: a simulated LLM server, for `daemon --tune --phases`' tests and demo.

Requests arrive at a demand (requests per second, `--demand` as the frame app takes it, `max`:
the next request arrives as the last one ends), each a prompt of `prompt_tokens` tokens and
`output_tokens` tokens to generate. One engine serves them as vLLM's does, a step at a time
(continuous batching): a step is a prefill chunk of at most `chunk_tokens` prompt tokens of the
oldest request still prefilling (admitted up to `max_seqs` running), or, when none prefills, a
decode step that generates one token for every running request. Each step's time comes from the
speed model (sim/llm_model.py: prefill compute-bound, following the GPU clock; decode
memory-bound, following the EMC clock) at the clocks the board runs when it starts, read as the
frame app reads them; the GPU's `load` file shows the share of time the GPU is busy (the
simulated power model reads it). Paced by the model's times, not the host's: a busy host wakes
late but the counters show what the model served by then.

Metrics, with vLLM's names and meaning (vLLM's production metrics,
https://docs.vllm.ai/en/stable/usage/metrics/ and vllm/engine/metrics.py: `vllm:prompt_tokens_total`
"Number of prefill tokens processed", `vllm:generation_tokens_total` "Number of generation
tokens processed", `vllm:time_to_first_token_seconds` "Histogram of time to first token in
seconds", `vllm:e2e_request_latency_seconds`, `vllm:time_per_output_token_seconds`,
`vllm:num_requests_running`/`_waiting`, `vllm:request_success_total{finished_reason}`), each
labelled `model_name`; the histograms' buckets are finer than vLLM's (25 ms for the time to
first token) so that a p99 is read within a few percent. The phase runs where its counter moves:
the prompt counter during prefill (each chunk counted as it ends), the generation counter
during decode (the first token at the end of the prefill). `sim_llm_dropped_total` counts
requests that found the queue full (`MAX_WAITING_S` of the demand: a simulator's bound, not
vLLM's). Everything it serves is simulated.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Deque, List, Optional, Tuple

from ..errors import UsageError
from ..hw.board import Board
from ..hw.fs import Root
from ..sim import gpu_load
from ..sim.llm_model import LLMS, decode_time, prefill_time
from ..sim.workload_model import BatchTime, Clocks, family_constants
from .sim_app import LOAD_EVERY_S, DemandStep, read_demand_file
from .sim_run import CLOCK_READ_EVERY_S, running_clocks

DEMAND_POLL_S = 0.2
MAX_WAITING_S = 30.0  # requests waiting beyond this many seconds of the demand are dropped
TTFT_BUCKETS_S = tuple(round(0.025 * k, 3) for k in range(1, 81)) + (2.5, 5.0, 10.0, 20.0, 40.0)
E2E_BUCKETS_S = tuple(0.25 * k for k in range(1, 81)) + (30.0, 60.0, 120.0)
TPOT_BUCKETS_S = tuple(round(0.005 * k, 3) for k in range(1, 41)) + (0.25, 0.5, 1.0)
PROMPT, DECODE = "prefill", "decode"


@dataclass
class _Request:
    arrival: float
    prompt_left: int
    generated: int = 0


@dataclass(frozen=True)
class _Step:
    kind: str  # PROMPT or DECODE
    start: float
    end: float
    tokens: int  # prompt tokens of the chunk, or requests decoded
    request: Optional[_Request]  # the prefilling request


class SimLlmApp:
    """The server's loop (a thread) and its metrics. `step_until` is its whole logic, run by
    the thread in real time; tests drive it with their own times."""

    def __init__(self, root: Root, board: Board, llm: str, precision: str,
                 demand: Tuple[DemandStep, ...], demand_file: Optional[Path] = None,
                 prompt_tokens: int = 1536, output_tokens: int = 128, chunk_tokens: int = 256,
                 max_seqs: int = 8, registry=None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        _check(board, llm, precision)
        if min(prompt_tokens, output_tokens, chunk_tokens, max_seqs) < 1:
            raise UsageError("--prompt-tokens, --output-tokens, --chunk-tokens and --max-seqs "
                             "must be at least 1")
        self.root, self.board = root, board
        self.constants = family_constants(board.family)
        self.shape, self.precision = LLMS[llm], precision
        self.prompt_tokens, self.output_tokens = prompt_tokens, output_tokens
        self.chunk_tokens, self.max_seqs = chunk_tokens, max_seqs
        self.demand, self.demand_file = demand, demand_file
        self.registry = registry if registry is not None else CollectorRegistry()
        labels, model = ["model_name"], [f"sim:{llm}"]
        r = self.registry
        self.prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                              labels, registry=r).labels(*model)
        self.generation = Counter("vllm:generation_tokens", "Number of generation tokens "
                                  "processed.", labels, registry=r).labels(*model)
        self.success = Counter("vllm:request_success", "Count of successfully processed "
                               "requests.", labels + ["finished_reason"],
                               registry=r).labels(*model, "length")
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first "
                              "token in seconds.", labels, buckets=TTFT_BUCKETS_S,
                              registry=r).labels(*model)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end "
                             "request latency in seconds.", labels, buckets=E2E_BUCKETS_S,
                             registry=r).labels(*model)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per "
                              "output token in seconds.", labels, buckets=TPOT_BUCKETS_S,
                              registry=r).labels(*model)
        self.running_gauge = Gauge("vllm:num_requests_running", "Number of requests currently "
                                   "running on GPU.", labels, registry=r).labels(*model)
        self.waiting_gauge = Gauge("vllm:num_requests_waiting", "Number of requests waiting "
                                   "to be processed.", labels, registry=r).labels(*model)
        self.dropped = Counter("sim_llm_dropped", "requests dropped at a full queue "
                               "(simulated)", registry=r)
        self.ttfts_s: List[float] = []  # every request's time to first token, exactly
        self._load_file = gpu_load.load_path(root.base, board.gpu.device if board.gpu else None)
        self._waiting: Deque[_Request] = collections.deque()
        self._running: List[_Request] = []
        self._step: Optional[_Step] = None
        self._t0: Optional[float] = None
        self._next_arrival: Optional[float] = None
        self._busy_s = 0.0
        self._load_at: Optional[float] = None
        self._file_read_at = -1.0
        self._file_value: Tuple[bool, Optional[float]] = (False, None)
        self._clocks_at = -1.0
        self._clocks: Optional[Clocks] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- the demand ----------------------------------------------------------------------------
    def demand_at(self, now: float) -> Optional[float]:
        """Requests per second now (None: max, one after another)."""
        if self.demand_file is not None and now - self._file_read_at >= DEMAND_POLL_S:
            self._file_read_at = now
            self._file_value = read_demand_file(self.demand_file)
        if self._file_value[0]:
            return self._file_value[1]
        assert self._t0 is not None
        current = self.demand[0]
        for step in self.demand:
            if step.at_s <= now - self._t0:
                current = step
        return current.per_s

    # -- the engine ----------------------------------------------------------------------------
    def step_until(self, now: float) -> float:
        """Everything that happened up to `now`, in time order: arrivals, steps ended and the
        next ones begun. Returns when something next happens (the thread sleeps until then)."""
        if self._t0 is None:
            self._t0 = self._load_at = now
        per_s = self.demand_at(now)
        if per_s is None:
            self._next_arrival = None
        elif self._next_arrival is None:
            self._next_arrival = now
        while True:
            arrival = self._next_arrival if per_s is not None else None
            end = self._step.end if self._step is not None else None
            if end is not None and end <= now and (arrival is None or end <= arrival):
                self._finish(self._step)  # type: ignore[arg-type]
                self._begin(end, per_s)
            elif arrival is not None and arrival <= now:
                limit = max(1, int(per_s * MAX_WAITING_S)) if per_s else 1
                if len(self._waiting) >= limit:
                    self.dropped.inc()
                else:
                    self._waiting.append(_Request(arrival, self.prompt_tokens))
                assert per_s is not None
                self._next_arrival = arrival + 1.0 / per_s
                if self._step is None:
                    self._begin(arrival, per_s)
            else:
                break
        if self._step is None:
            self._begin(now, per_s)
        self.running_gauge.set(len(self._running))
        self.waiting_gauge.set(len(self._waiting))
        self._write_load(now)
        wake = [now + LOAD_EVERY_S]
        for t in (self._step.end if self._step else None, self._next_arrival):
            if t is not None:
                wake.append(t)
        return min(wake)

    def _begin(self, t: float, per_s: Optional[float]) -> None:
        """The next step from `t` (none when nothing is waiting or running)."""
        if per_s is None and not self._waiting and not self._running:
            self._waiting.append(_Request(t, self.prompt_tokens))  # max: the next at once
        while self._waiting and len(self._running) < self.max_seqs:
            self._running.append(self._waiting.popleft())
        prefilling = next((r for r in self._running if r.prompt_left > 0), None)
        if prefilling is not None:
            n = min(self.chunk_tokens, prefilling.prompt_left)
            took = self._time(PROMPT, n)
            self._step = _Step(PROMPT, t, t + took.total_s, n, prefilling)
        elif self._running:
            took = self._time(DECODE, len(self._running))
            self._step = _Step(DECODE, t, t + took.total_s, len(self._running), None)
        else:
            self._step = None
            return
        self._busy_s += took.gpu_s

    def _time(self, kind: str, n: int) -> BatchTime:
        assert self.constants is not None
        now = time.monotonic()
        if self._clocks is None or now - self._clocks_at >= CLOCK_READ_EVERY_S:
            self._clocks, self._clocks_at = running_clocks(self.root, self.board), now
        clocks = self._clocks
        if kind == PROMPT:
            return prefill_time(self.constants, self.shape, self.precision, n, clocks)
        context = sum(self.prompt_tokens + r.generated for r in self._running) / n
        return decode_time(self.constants, self.shape, self.precision, n, context, clocks)

    def _finish(self, step: _Step) -> None:
        """What a step did, counted at its end."""
        self._step = None
        if step.kind == PROMPT:
            request = step.request
            assert request is not None
            request.prompt_left -= step.tokens
            self.prompt.inc(step.tokens)
            if request.prompt_left == 0:  # the prefill's last chunk gives the first token
                request.generated = 1
                self.generation.inc()
                self.ttft.observe(step.end - request.arrival)
                self.ttfts_s.append(step.end - request.arrival)
            return
        self.generation.inc(step.tokens)
        for request in [r for r in self._running if r.prompt_left == 0]:
            request.generated += 1
            self.tpot.observe(step.end - step.start)
            if request.generated >= self.output_tokens:
                self._running.remove(request)
                self.e2e.observe(step.end - request.arrival)
                self.success.inc()

    def _write_load(self, now: float) -> None:
        assert self._load_at is not None
        span = now - self._load_at
        if span < LOAD_EVERY_S:
            return
        gpu_load.write_load(self._load_file, min(1.0, self._busy_s / span))
        self._busy_s, self._load_at = 0.0, now

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            wake = self.step_until(time.monotonic())
            self._stop.wait(max(0.0, wake - time.monotonic()))

    def counts(self) -> Tuple[float, float, float]:
        """Requests served, prompt tokens and generated tokens so far."""
        def value(name: str) -> float:
            return sum(s.value for m in self.registry.collect() for s in m.samples
                       if s.name == name)
        return (value("vllm:request_success_total"), value("vllm:prompt_tokens_total"),
                value("vllm:generation_tokens_total"))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jetbench-sim-llm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        gpu_load.write_load(self._load_file, 0.0)


def _check(board: Board, llm: str, precision: str) -> None:
    """A simulated board of a modelled family, a model and a precision it has (UsageError)."""
    if not board.simulated:
        raise UsageError("sim app --llm runs on a simulated board only")
    constants = family_constants(board.family)
    if constants is None:
        raise UsageError(f"no speed model for this board family ({board.family or 'unknown'})",
                         hint="sim/workload_model.py lists the families it models")
    if llm not in LLMS:
        raise UsageError(f"--llm-model {llm!r}: one of {', '.join(LLMS)}")
    if precision not in constants.flop_per_clock:
        raise UsageError(f"{precision} is not modelled on a simulated {board.family}",
                         hint=f"it runs {', '.join(constants.flop_per_clock)}")
