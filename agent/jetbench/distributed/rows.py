"""What rank 0 makes of the gathered rows (pure): the node's aggregate timing, one `devices[]`
entry per rank with the power of its own source, and the scaling efficiency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..workload.timing.runner import TimingResult
from ..workload.timing.stats import coefficient_of_variation, latency_stats
from .devices import describe_devices

NVML_SOURCE = "nvml"  # hw/meters/nvml.py names GPU i's source nvml (i = 0) or nvml<i>


@dataclass(frozen=True)
class RankRow:
    """One rank's share of a point, as gathered to rank 0 (picklable)."""

    rank: int
    device: str
    pid: int
    threads: Optional[int]
    cpu_cores: Optional[List[int]]
    timing: Any  # workload.runner.TimingResult
    start_wait_s: float  # in the start barrier (waiting for the slowest warm-up)
    end_wait_s: float  # in the end barrier (waiting for the slowest timed run)
    t_start_s: Optional[float] = None  # time.monotonic() (one clock for every process on
    t_end_s: Optional[float] = None  # Linux) at the first and after the last timed iteration
    open_wait_s: float = 0.0  # in the barrier after rank 0 opened the window (inside it)


def aggregate_timing(rows: Sequence[RankRow]) -> Any:
    """The node as one workload: img/s is the sum over the ranks, latencies pooled."""
    timings = [r.timing for r in rows]
    pooled = tuple(x for t in timings for x in t.latencies_ms)
    gflops = [t.gflops for t in timings]
    devices = [r.device for r in rows]
    workload = dict(timings[0].workload, device=describe_devices(devices), devices=devices)
    warnings = list(dict.fromkeys(f"rank {r.rank} ({r.device}): {w}"
                                  for r in rows for w in r.timing.warnings))
    return TimingResult(
        workload=workload,
        iterations=sum(t.iterations for t in timings),
        wall_s=max(t.wall_s for t in timings),
        images_per_s=sum(t.images_per_s for t in timings),
        latency_ms=latency_stats(pooled),
        cv=coefficient_of_variation(pooled),
        gflops=None if None in gflops else sum(gflops),  # type: ignore[arg-type]
        warmup_iterations=sum(t.warmup_iterations for t in timings),
        warmup_s=max(t.warmup_s for t in timings),
        latencies_ms=pooled,
        warnings=tuple(warnings),
    )


def own_channels(device: str, channels: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The power channels of a device's own source: NVML for GPU i, none for a CPU rank
    (a CPU share has no sensor of its own; the node's sources cover it)."""
    if not device.startswith("cuda:"):
        return []
    index = int(device.split(":", 1)[1])
    source = NVML_SOURCE if index == 0 else f"{NVML_SOURCE}{index}"
    return [c for c in channels if c.get("source") == source and c.get("name") == f"GPU{index}"]


def device_docs(rows: Sequence[RankRow], channels: Sequence[Dict[str, Any]],
                window_s: Optional[float], edges: Optional[Dict[str, float]] = None
                ) -> List[Dict[str, Any]]:
    """The result's `devices[]`: per rank, its workload, throughput, latency, own power, and
    when its timed run began and ended against the window rank 0 opened (`timed_in_window_s`,
    seconds from the window's start: every rank runs inside it)."""
    t0 = (edges or {}).get("t_start")
    out = []
    for row in rows:
        t = row.timing
        own = own_channels(row.device, channels)
        mean_w = sum(c["mean_w"] for c in own) if own and all(
            c.get("mean_w") is not None for c in own) else None
        out.append({
            "rank": row.rank, "device": row.device, "pid": row.pid,
            "threads": row.threads, "cpu_cores": row.cpu_cores,
            "workload": dict(t.workload, iterations=t.iterations),
            "throughput": {"images_per_s": t.images_per_s, "latency_ms": t.latency_ms.to_dict(),
                           "cv": t.cv, "iterations": t.iterations, "wall_s": t.wall_s},
            "timed_in_window_s": [row.t_start_s - t0, row.t_end_s - t0]
            if None not in (t0, row.t_start_s, row.t_end_s) else None,
            "sync_s": {"start_barrier": row.start_wait_s, "open_barrier": row.open_wait_s,
                       "end_barrier": row.end_wait_s,
                       "in_window_share": (row.open_wait_s + row.end_wait_s) / window_s
                       if window_s else None},
            "power": {"channels": own, "mean_w": mean_w} if own else None,
            "efficiency": {"images_per_j": t.images_per_s / mean_w if mean_w else None},
        })
    return out


def devices_power_sum(devices: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The sum of the devices' own sources (NVML GPU0 + GPU1 + ...), when every rank has one."""
    powers = [d.get("power") for d in devices]
    if not powers or any(p is None or p.get("mean_w") is None for p in powers):
        return None
    channels = [c for p in powers for c in p["channels"]]  # type: ignore[union-attr]
    energies = [c.get("energy_j") for c in channels]
    return {"name": "+".join(c["name"] for c in channels), "source": NVML_SOURCE,
            "point": "gpu_board", "kind": "sum of the devices' own sources",
            "mean_w": sum(p["mean_w"] for p in powers),  # type: ignore[index]
            "energy_j": None if None in energies else sum(energies)}  # type: ignore[arg-type]


def scaling_doc(aggregate_ips: float, devices: int, baseline_ips: float,
                baseline_device: str) -> Dict[str, Any]:
    """efficiency = aggregate / (N x one device alone); 1.0 is perfectly linear."""
    return {"baseline_images_per_s": baseline_ips, "baseline_device": baseline_device,
            "devices": devices, "aggregate_images_per_s": aggregate_ips,
            "efficiency": aggregate_ips / (devices * baseline_ips) if baseline_ips else None}
