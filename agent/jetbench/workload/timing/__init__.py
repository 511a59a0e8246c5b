"""The timing loop and what it returns: `loop.py` the rules (portable: the workload child runs
them under Python 3.6), `runner.py` the in-process loop, `stats.py` latency statistics,
`timed.py` the `TimedRun` protocol the measure orchestrator times every workload kind through.
"""
