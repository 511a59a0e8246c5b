"""jetbench: pin clocks, run inference workloads, measure img/s/W on NVIDIA Jetson boards.

Importing this package is cheap on purpose: it must not pull in torch or matplotlib
(the agent runs on 4 GB boards, and the CLI must start in well under a second).
"""

__version__ = "0.1.0"
