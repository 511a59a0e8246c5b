"""`make setup` checks the Python before doing anything (issue 13.3): the CPU torch pin has
no wheel for Python below TORCH_PIN_MIN_PYTHON, so such a Python without a torch of its own is
refused with a message, and nothing is created."""

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


def test_setup_refuses_a_python_older_than_the_pin_before_creating_anything(tmp_path):
    if not os.path.exists(_BARE_PYTHON.split()[0]):
        pytest.skip("no base interpreter")
    venv = tmp_path / "venv"
    res = _make("setup", f"PYTHON={_BARE_PYTHON}", "TORCH_PIN_MIN_PYTHON=3.99",
                f"VENV={venv}", tmp_path=tmp_path)
    assert res.returncode != 0
    assert "needs Python 3.99 or newer" in res.stderr
    assert "fix: make setup PYTHON=" in res.stderr
    assert not venv.exists()


def test_the_pin_and_its_minimum_agree_with_the_installed_torch():
    """The Makefile's TORCH_PIN_MIN_PYTHON is the pinned wheel's own Requires-Python."""
    try:
        from importlib.metadata import PackageNotFoundError, metadata
        meta = metadata("torch")
    except PackageNotFoundError:
        pytest.skip("torch not installed")
    text = (REPO / "Makefile").read_text()
    pin = next(ln.split("?=")[1].strip() for ln in text.splitlines()
               if ln.startswith("TORCH_PIN ?="))
    minimum = next(ln.split("?=")[1].strip() for ln in text.splitlines()
                   if ln.startswith("TORCH_PIN_MIN_PYTHON ?="))
    if pin != f"torch=={meta['Version'].split('+')[0]}":
        pytest.skip(f"installed torch {meta['Version']} is not the pin {pin}")
    assert meta["Requires-Python"] == f">={minimum}"


def test_demo_passes_out(tmp_path):
    res = _make("-n", "demo", "OUT=/some/dir", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert 'jetbench demo --out "/some/dir"' in res.stdout
