"""Workloads: the seeds' networks, precisions, and the timing runner.

Nothing here imports torch at import time; torch loads inside the functions that need it.
The API the measure orchestrator uses:

    from jetbench.workload.build import build_workload
    from jetbench.workload.base import RunOptions
    from jetbench.workload.timing.plan import TimingPlan
    from jetbench.workload.timing.runner import run_timed, TimingResult

`jetbench time` as one call: `jetbench.run.timing.time_models(TimeRequest(...))`.
"""
