"""`daemon --tune --phases`' Prometheus metrics (metrics.py collects them; nothing without
--phases):

    jetbench_workload_phase{phase}                    1 for the phase that runs (or idle)
    jetbench_workload_phase_items_total{phase}        its counter's items in its windows' pieces
    jetbench_workload_phase_energy_joules_total{phase}   the energy over them
    jetbench_workload_phase_seconds_total{phase}      their time
    jetbench_workload_phase_items_per_joule{phase}    items (tokens) per joule over all of them
    jetbench_workload_phase_point_hz{phase,knob}      the point pinned while the phase runs
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, cast

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from .held import StatusDoc


def phase_metrics(snap: StatusDoc) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    tune = cast(dict, snap.get("tune") or {})
    phases = tune.get("workload_phases")
    if not phases:
        return
    running = GaugeMetricFamily("jetbench_workload_phase", "1 for the workload phase that "
                                "runs now (or idle)", labels=["phase"])
    for name in list(phases) + ["idle"]:
        running.add_metric([name], 1.0 if tune.get("workload_phase") == name else 0.0)
    yield running
    families = (
        (CounterMetricFamily, "jetbench_workload_phase_items", "items_total",
         "The phase's counter's items in its windows (tokens)"),
        (CounterMetricFamily, "jetbench_workload_phase_energy_joules", "energy_j",
         "The energy over the phase's windows (J)"),
        (CounterMetricFamily, "jetbench_workload_phase_seconds", "seconds_total",
         "The phase's own time in its windows (s)"),
        (GaugeMetricFamily, "jetbench_workload_phase_items_per_joule", "items_per_j",
         "Items (tokens) per joule over all the phase's windows"),
    )
    for cls, name, key, text in families:
        family = cls(name, text, labels=["phase"])
        for phase, doc in phases.items():
            if doc.get(key) is not None:
                family.add_metric([phase], float(doc[key]))
        yield family
    point = GaugeMetricFamily("jetbench_workload_phase_point_hz", "The clocks pinned while "
                              "the phase runs", labels=["phase", "knob"])
    for phase, doc in phases.items():
        for knob, hz in sorted(doc.get("point_hz", {}).items()):
            point.add_metric([phase, knob], float(hz))
    yield point
