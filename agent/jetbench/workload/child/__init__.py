"""`--workload-python`: the workload timed in a child process under another interpreter
(JetPack 4's Python 3.6): `parent.py` starts and talks to it, `runner.py` is the child."""
