"""A measure result document built by hand, for the report and table tests."""

from jetbench.report.schema import SCHEMA, point_id


def result_doc(mhz, batch=1, ips=47.0, watts=5.5, precision="fp32", simulated=True, path=None,
           power_pct=4.0, throughput_pct=1.0, reasons=()):
    doc = {
        "schema": SCHEMA, "status": "ok", "simulated": simulated,
        "id": point_id("alexnet", precision, batch, int(mhz * 1e6)),
        "board": {"model": "NVIDIA Jetson TX1 Developer Kit"},
        "settings": {"applied": {"gpu_hz": int(mhz * 1e6)}},
        "workload": {"model": "alexnet", "precision": precision, "batch": batch},
        "throughput": {"images_per_s": ips, "latency_ms": {"p50": 1000 / ips, "p99": 30.0}},
        "power": {"total": {"name": "VDD_IN", "point": "module_input", "source": "ina3221",
                            "mean_w": watts, "mean_w_uncertainty_pct": power_pct},
                  "totals": [{"name": "VDD_IN", "point": "module_input",
                              "source": "ina3221", "mean_w": watts}],
                  "channels": [{"name": "VDD_IN", "point": "module_input",
                                "source": "ina3221"},
                               {"name": "VDD_GPU", "point": "rail", "source": "ina3221"}],
                  "phases_s": {"start": 0.0, "warmup_start": 0.2, "timed_start": 0.6,
                               "timed_end": 1.6, "end": 1.7},
                  "trace_csv": "t.csv"},
        "efficiency": {"images_per_j": ips / watts, "by_point": [
            {"name": "VDD_IN", "source": "ina3221", "point": "module_input", "kind": "total",
             "mean_w": watts, "images_per_j": ips / watts,
             "mean_w_uncertainty_pct": power_pct},
            {"name": "VDD_GPU", "source": "ina3221", "point": "rail", "kind": "channel",
             "mean_w": 2.0, "images_per_j": ips / 2.0, "mean_w_uncertainty_pct": 10.0}],
            "uncertainty": {"power_pct": power_pct, "throughput_pct": throughput_pct,
                            "images_per_j_pct": None if power_pct is None
                            else power_pct + throughput_pct,
                            "basis": "test", "lower_it": ["a longer window"]}},
        "thermal": {"throttled": False},
        "validity": {"valid": not reasons, "reasons": list(reasons)},
        "warnings": [],
    }
    if path is not None:
        doc["_path"] = str(path)
    return doc


def computed_report(rate: float, watts: float):
    """What `measure` returns for one valid point whose figures a test computed from the
    pinned clocks (a stand-in for timing a workload: a loaded host cannot move it)."""
    from jetbench.run.measure import MeasureReport

    return MeasureReport(results=[{
        "status": "ok", "validity": {"valid": True, "reasons": []},
        "throughput": {"items_per_s": rate},
        "power": {"total": {"mean_w": watts, "mean_w_uncertainty_pct": 0.5}},
        "efficiency": {"items_per_j": rate / watts,
                       "uncertainty": {"throughput_pct": 0.3, "images_per_j_pct": 0.6}}}])
