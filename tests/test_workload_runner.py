"""The runner's rules and statistics against known timings (a fake clock), and OOM handling."""

from __future__ import annotations

import contextlib
from typing import Iterator, List

import pytest

from jetbench.errors import OutOfMemory, UsageError
from jetbench.run.timing import TimeRequest, TimeRow, parse_batches, precision_advice, time_models
from jetbench.workload.base import RunOptions, Workload
from jetbench.workload.build import build_workload
from jetbench.workload.macs import ModelCost
from jetbench.workload.pytorch import oom_guard
from jetbench.workload.timing import loop
from jetbench.workload.timing.plan import TimingPlan
from jetbench.workload.timing.runner import run_timed
from jetbench.workload.timing.stats import (
    coefficient_of_variation,
    is_stable,
    latency_stats,
    percentile,
)

torch = pytest.importorskip("torch")

TINY = (3, 32, 32)


class FakeClock:
    """perf_counter that only moves when a fake step 'runs' for a scripted time."""

    def __init__(self, durations_s: Iterator[float]):
        self.now = 100.0
        self.durations = durations_s
        self.steps = 0

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += next(self.durations)
        self.steps += 1


def fake_workload(clock: FakeClock, batch: int = 4, macs: int = 1_000_000) -> Workload:
    return Workload(
        model="fake", precision="fp32", batch=batch, device="cpu", input_mode="constant",
        options=RunOptions(), module=None, input=torch.zeros(batch, *TINY),
        cost=ModelCost(10, macs, 0, 0), footprint_bytes=0, step=clock.step,
        sync=lambda: None, context=contextlib.nullcontext,
    )


def constant(seconds: float) -> Iterator[float]:
    while True:
        yield seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(constant(0.010))
    monkeypatch.setattr(loop.time, "perf_counter", fake)
    return fake


def test_percentiles_and_stats() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 90) == pytest.approx(90.1)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    stats = latency_stats(list(reversed(values)))
    assert (stats.min_ms, stats.max_ms, stats.mean_ms) == (1.0, 100.0, 50.5)
    assert set(stats.to_dict()) == {"min", "mean", "p50", "p90", "p99", "max"}
    assert coefficient_of_variation([10.0, 10.0, 10.0]) == 0.0
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(2 ** 0.5 / 10)
    assert is_stable([5, 4, 3, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert not is_stable([1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    assert not is_stable([1.0, 1.0])


def test_timed_phase_meets_both_count_and_duration(clock: FakeClock) -> None:
    # 10 ms iterations: 5 iterations are not enough for 0.1 s, so it runs 10
    result = run_timed(fake_workload(clock), TimingPlan(iterations=5, duration_s=0.1, warmup_s=0,
                                                        warmup_iterations=0))
    assert result.iterations == 10
    assert result.wall_s == pytest.approx(0.1)
    assert result.images_per_s == pytest.approx(4 * 10 / 0.1)
    assert result.latency_ms.p50_ms == pytest.approx(10.0)
    assert result.cv == pytest.approx(0.0, abs=1e-9)
    assert result.gflops == pytest.approx(2 * 1e6 * 4 * 10 / 0.1 / 1e9)
    # and the count wins when the duration is short
    result = run_timed(fake_workload(clock), TimingPlan(iterations=25, duration_s=0.01, warmup_s=0,
                                                        warmup_iterations=0))
    assert result.iterations == 25


def test_known_latencies_give_known_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    timings = [0.010, 0.020, 0.030, 0.040, 0.050]
    fake = FakeClock(iter(timings))
    monkeypatch.setattr(loop.time, "perf_counter", fake)
    result = run_timed(fake_workload(fake, batch=1), TimingPlan(iterations=5, duration_s=0,
                                                                warmup_s=0, warmup_iterations=0))
    assert result.latencies_ms == pytest.approx((10, 20, 30, 40, 50))
    lat = result.latency_ms
    assert (lat.min_ms, lat.mean_ms, lat.p50_ms, lat.max_ms) == pytest.approx((10, 30, 30, 50))
    assert lat.p90_ms == pytest.approx(46.0)
    assert result.images_per_s == pytest.approx(5 / 0.150)
    assert any("lock the clocks" in w for w in result.warnings)  # CV ~53% > 2.5%


def test_warmup_runs_until_stable(monkeypatch: pytest.MonkeyPatch) -> None:
    # slow first iterations (caches, autotuning), then steady 10 ms
    fake = FakeClock(iter([0.5, 0.2, 0.1, 0.05] + [0.010] * 1000))
    monkeypatch.setattr(loop.time, "perf_counter", fake)
    result = run_timed(fake_workload(fake), TimingPlan(iterations=3, duration_s=0, warmup_s=0,
                                                       warmup_iterations=2))
    # medians of the last two windows of 3 agree at 9: [.05, .01, .01] vs [.01, .01, .01]
    assert result.warmup_iterations == 9
    assert result.latency_ms.max_ms == pytest.approx(10.0)
    assert not result.warnings


def test_warmup_respects_minimum_time_and_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeClock(constant(0.010))
    monkeypatch.setattr(loop.time, "perf_counter", fake)
    result = run_timed(fake_workload(fake), TimingPlan(iterations=1, duration_s=0, warmup_s=0.2))
    assert result.warmup_s == pytest.approx(0.2)
    # never stable (alternating), so the cap ends it, with a warning
    fake2 = FakeClock(iter([0.01, 0.03] * 10000))
    monkeypatch.setattr(loop.time, "perf_counter", fake2)
    result = run_timed(fake_workload(fake2), TimingPlan(iterations=1, duration_s=0, warmup_s=0.1,
                                                        max_warmup_s=0.5))
    assert 0.5 <= result.warmup_s < 0.55
    assert any("still changing" in w for w in result.warnings)


def test_callbacks_bracket_exactly_the_timed_iterations(clock: FakeClock) -> None:
    seen: List[tuple] = []
    plan = TimingPlan(iterations=4, duration_s=0, warmup_s=0, warmup_iterations=3,
                      max_warmup_s=0.0,
                      on_timed_start=lambda: seen.append(("start", clock.steps, clock.now)),
                      on_timed_end=lambda: seen.append(("end", clock.steps, clock.now)))
    result = run_timed(fake_workload(clock), plan)
    (_, steps0, t0), (_, steps1, t1) = seen
    assert steps0 == result.warmup_iterations == 3
    assert steps1 - steps0 == result.iterations == 4
    assert t1 - t0 == pytest.approx(result.wall_s)


def test_progress_is_reported(clock: FakeClock) -> None:
    calls: List[tuple] = []
    run_timed(fake_workload(clock), TimingPlan(iterations=1, duration_s=1.0, warmup_s=0.5,
                                               progress=lambda phase, f: calls.append((phase, f))))
    assert {"warmup", "timed"} <= {p for p, _ in calls}
    assert all(0.0 <= f <= 1.0 for _, f in calls)


def test_bad_arguments(clock: FakeClock) -> None:
    with pytest.raises(UsageError):
        run_timed(fake_workload(clock), TimingPlan(iterations=0))
    with pytest.raises(UsageError):
        parse_batches("1,x")
    assert parse_batches("1, 32") == (1, 32) and parse_batches("SWEEP") == "sweep"


def test_real_workload_runs_on_cpu() -> None:
    work = build_workload("resnet18", "fp32", 2, "cpu", input_shape=TINY,
                          options=RunOptions(threads=1))
    result = run_timed(work, TimingPlan(iterations=3, duration_s=0, warmup_s=0,
                                        warmup_iterations=1))
    assert result.iterations == 3 and result.images_per_s > 0
    assert result.workload["model"] == "resnet18" and result.gflops > 0
    doc = result.to_dict()
    assert set(doc["throughput"]["latency_ms"]) == {"min", "mean", "p50", "p90", "p99", "max"}


def test_oom_guard_maps_allocator_failures() -> None:
    with pytest.raises(OutOfMemory):
        with oom_guard("x"):
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(OutOfMemory):
        with oom_guard("x"):
            raise torch.OutOfMemoryError("out of memory")
    with pytest.raises(UsageError, match="shape mismatch"):
        with oom_guard("x"):
            raise RuntimeError("shape mismatch")


def test_memory_limit_refuses_like_a_real_oom() -> None:
    opts = RunOptions(memory_limit_bytes=1_000_000)
    with pytest.raises(OutOfMemory) as info:
        build_workload("resnet18", "fp32", 4, "cpu", input_shape=TINY, options=opts)
    assert "memory limit" in str(info.value)


def test_batch_sweep_records_oom_and_carries_on() -> None:
    # A limit that fits batch 1 and 2 of resnet18 (at 32x32) but not 4, by hand from the
    # documented estimate (weights + per image: input + the largest layer's input and output):
    # resnet18 has 11,689,512 parameters (fp32: 46,758,048 B); at 3x32x32 the largest layer is
    # bn1/relu after the stride-2 conv1, 64x16x16 in and out = 32,768 elements; with the
    # 3,072-element input an image adds (3,072 + 32,768) x 4 B = 143,360 B.
    shape = TINY
    weights_b = 11_689_512 * 4
    per_image_b = (3 * 32 * 32 + 2 * 64 * 16 * 16) * 4
    fits = weights_b + 2 * per_image_b  # 47,044,768 B
    request = TimeRequest(
        models=("resnet18",), precisions=("fp32", "bf16"), batches="sweep", device="cpu",
        iterations=1, duration_s=0, warmup_s=0, input_shape=shape,
        options=RunOptions(memory_limit_bytes=fits + 1), sweep_max_batch=4,
    )
    report = time_models(request)
    summary = [(r.precision, r.batch, r.status) for r in report.rows]
    assert summary[:3] == [("fp32", 1, "ok"), ("fp32", 2, "ok"), ("fp32", 4, "oom")]
    # then the next configuration: bf16 halves the weights, so its sweep goes further
    assert summary[3:] == [("bf16", 1, "ok"), ("bf16", 2, "ok"), ("bf16", 4, "ok")]
    oom = report.to_dict()["results"][2]
    assert oom["status"] == "oom" and oom["throughput"] is None and "out of memory" in \
        oom["message"]


def test_precision_advice_names_the_faster_choice() -> None:
    def row(precision: str, ips: float) -> TimeRow:
        result = type("R", (), {"images_per_s": ips, "cv": 0.01})()
        return TimeRow("alexnet", precision, 1, "cpu", "ok", result)  # type: ignore[arg-type]

    advice = precision_advice([row("fp32", 30.0), row("fp16", 2.0), row("bf16", 45.0)])
    assert len(advice) == 1
    assert "fp16 is 15.0x slower than fp32" in advice[0] and "use bf16" in advice[0]
    assert precision_advice([row("fp32", 30.0), row("bf16", 29.0)]) == []  # within noise
    only = precision_advice([row("fp32", 30.0), row("fp16", 2.0)])
    assert "use fp32" in only[0] and "bf16 was not measured" in only[0]
