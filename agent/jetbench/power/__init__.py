"""Power: sources, the background sampler, compact traces and exact energy over windows.

The maths here is pure (no files, no threads except the sampler's own); hardware readers live
in `jetbench.hw.power`. Typical use (the measure orchestrator)::

    from jetbench.power.sampler import Sampler

    sampler = Sampler([source, ...])
    sampler.start()
    with sampler.window() as w:
        ...  # timed iterations
    result = w.result          # WindowResult; raises MeasurementInvalid when too short
    sampler.stop()
"""
