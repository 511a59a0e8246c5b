"""The make targets (the torch step of `make setup` is tests/test_torch_setup.py)."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")

# The base interpreter with -S: no site-packages, so certainly no torch.
_BARE_PYTHON = f"{os.path.join(sys.base_prefix, 'bin', 'python3')} -S"


def _make(*args, tmp_path):
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *args],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_demo_passes_out(tmp_path):
    res = _make("-n", "demo", "OUT=/some/dir", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert 'jetbench demo --out "/some/dir"' in res.stdout
