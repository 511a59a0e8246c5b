"""Power: sources, the samplers, compact traces and exact energy over windows.

The maths here is pure (no files, no threads except the samplers' own); hardware readers live
in `jetbench.hw.meters`. The sampler measure and monitor use reads in a process of its own
(`sampler_process.ProcessSampler`, whose child is `sampler_child`; both run the loop in
`poll.py` and speak `records.py`); `sampler.Sampler` is the same API in threads of this
process. Typical use (the measure orchestrator)::

    from jetbench.sampling.sampler_process import ProcessSampler

    sampler = ProcessSampler([source, ...])
    sampler.start()
    with sampler.window() as w:
        ...  # timed iterations
    result = w.result          # WindowResult; raises MeasurementInvalid when too short
    sampler.stop()
"""
