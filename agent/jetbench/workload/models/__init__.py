"""Network definitions (plain torch.nn, no torchvision, no downloads).

Every module here imports torch at module level: import them only from code that already
needs torch (the registry imports them lazily, by name). They also run in the workload child
under JetPack 4's Python 3.6 and torch 1.10 (child/runner.py): keep them to Python 3.6 syntax
(no `from __future__ import annotations`); tests/test_workload_child.py checks with vermin.
"""
