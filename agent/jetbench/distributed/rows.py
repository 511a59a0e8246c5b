"""What rank 0 makes of the gathered rows (pure): the node's aggregate timing, one `devices[]`
entry per rank with the power of its own source, and the scaling efficiency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..documents import DeviceDoc, DevicePower, PowerPoint, ScalingDoc
from ..workload.timing.runner import TimingResult
from ..workload.timing.stats import coefficient_of_variation, latency_stats
from .devices import describe_devices

# hw/meters/nvml.py names CUDA device i's source nvml (i = 0) or nvml<i> when it is made; its one
# channel is named after NVML's index (GPU<n>), known only once it opens (CUDA_VISIBLE_DEVICES
# renumbers: cuda:0 under "2,3" is NVML's GPU2), so a device's channel is found by its source.
NVML_SOURCE = "nvml"


@dataclass(frozen=True)
class RankRow:
    """One rank's share of a point, as gathered to rank 0 (picklable)."""

    rank: int
    device: str
    pid: int
    threads: Optional[int]
    cpu_cores: Optional[List[int]]
    timing: TimingResult
    start_wait_s: float  # in the start barrier (waiting for the slowest warm-up)
    end_wait_s: float  # in the end barrier (waiting for the slowest timed run)
    t_start_s: Optional[float] = None  # time.monotonic() (one clock for every process on
    t_end_s: Optional[float] = None  # Linux) at the first and after the last timed iteration
    open_wait_s: float = 0.0  # in the barrier after rank 0 opened the window (inside it)


def aggregate_timing(rows: Sequence[RankRow]) -> TimingResult:
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
        gflops=sum(g for g in gflops if g is not None) if None not in gflops else None,
        warmup_iterations=sum(t.warmup_iterations for t in timings),
        warmup_s=max(t.warmup_s for t in timings),
        latencies_ms=pooled,
        warnings=tuple(warnings),
    )


def own_channels(device: str, channels: Sequence[PowerPoint]) -> List[PowerPoint]:
    """The power channels of a device's own source: NVML's for CUDA device i, none for a CPU
    rank (a CPU share has no sensor of its own; the node's sources cover it)."""
    if not device.startswith("cuda:"):
        return []
    index = int(device.split(":", 1)[1])
    source = NVML_SOURCE if index == 0 else f"{NVML_SOURCE}{index}"
    return [c for c in channels if c.get("source") == source]


def device_docs(rows: Sequence[RankRow], channels: Sequence[PowerPoint],
                window_s: Optional[float], edges: Optional[Dict[str, float]] = None
                ) -> List[DeviceDoc]:
    """The result's `devices[]`: per rank, its workload, throughput, latency, own power, and
    when its timed run began and ended against the window rank 0 opened (`timed_in_window_s`,
    seconds from the window's start: every rank runs inside it)."""
    t0 = (edges or {}).get("t_start")
    out: List[DeviceDoc] = []
    for row in rows:
        t = row.timing
        own = own_channels(row.device, channels)
        watts = [w for w in (c.get("mean_w") for c in own) if w is not None]
        mean_w = sum(watts) if own and len(watts) == len(own) else None
        power: Optional[DevicePower] = {"channels": own, "mean_w": mean_w} if own else None
        in_window = [row.t_start_s - t0, row.t_end_s - t0] \
            if t0 is not None and row.t_start_s is not None and row.t_end_s is not None \
            else None
        out.append({
            "rank": row.rank, "device": row.device, "pid": row.pid,
            "threads": row.threads, "cpu_cores": row.cpu_cores,
            "workload": dict(t.workload, iterations=t.iterations),
            "throughput": {"images_per_s": t.images_per_s, "latency_ms": t.latency_ms.to_dict(),
                           "cv": t.cv, "iterations": t.iterations, "wall_s": t.wall_s},
            "timed_in_window_s": in_window,
            "sync_s": {"start_barrier": row.start_wait_s, "open_barrier": row.open_wait_s,
                       "end_barrier": row.end_wait_s,
                       "in_window_share": (row.open_wait_s + row.end_wait_s) / window_s
                       if window_s else None},
            "power": power,
            "efficiency": {"images_per_j": t.images_per_s / mean_w if mean_w else None},
        })
    return out


def devices_power_sum(devices: Sequence[DeviceDoc]) -> Optional[PowerPoint]:
    """The sum of the devices' own sources (NVML GPU0 + GPU1 + ...), when every rank has one."""
    powers = [p for p in (d.get("power") for d in devices) if p is not None]
    watts = [w for w in (p["mean_w"] for p in powers) if w is not None]
    if not devices or len(watts) < len(devices):
        return None
    channels = [c for p in powers for c in p["channels"]]
    energies = [e for e in (c.get("energy_j") for c in channels) if e is not None]
    return {"name": "+".join(c.get("name", "?") for c in channels), "source": NVML_SOURCE,
            "point": "gpu_board", "kind": "sum of the devices' own sources",
            "mean_w": sum(watts),
            "energy_j": sum(energies) if len(energies) == len(channels) else None}


def scaling_doc(aggregate_ips: float, devices: int, baseline_ips: float,
                baseline_device: str) -> ScalingDoc:
    """efficiency = aggregate / (N x one device alone); 1.0 is perfectly linear."""
    return {"baseline_images_per_s": baseline_ips, "baseline_device": baseline_device,
            "devices": devices, "aggregate_images_per_s": aggregate_ips,
            "efficiency": aggregate_ips / (devices * baseline_ips) if baseline_ips else None}
