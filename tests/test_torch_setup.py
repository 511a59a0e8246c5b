"""The torch step of `make setup` (issue 13.3): a torch that exists for the running Python,
never a CUDA build by surprise, never a replacement for an installed torch (a Jetson's NVIDIA
wheel). pip itself is replaced by recorders here: the plans are what `pip install --dry-run
--report` writes (its "install" list of items with "metadata"."name")."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("torch_setup", REPO / "tools" / "torch_setup.py")
torch_setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(torch_setup)


def _report(*names):
    return {"install": [{"metadata": {"name": n}} for n in names]}


CUDA_PLAN = _report("torch", "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "triton", "sympy")
CPU_PLAN = _report("torch", "sympy", "filelock")


@pytest.fixture
def pip(monkeypatch):
    """Records what would be planned and installed; plans are looked up by index URL."""
    calls = {"plans": [], "installs": [], "by_index": {}}

    def plan(pin, index_url=None):
        calls["plans"].append((pin, index_url))
        return calls["by_index"].get(index_url, (None, "ERROR: no plan given"))

    def call(argv):
        calls["installs"].append(argv)
        return 0

    monkeypatch.setattr(torch_setup, "plan", plan)
    monkeypatch.setattr(torch_setup, "installed_torch", lambda: None)
    monkeypatch.setattr(torch_setup, "pip_can_plan", lambda: True)
    monkeypatch.setattr(torch_setup.subprocess, "call", call)
    monkeypatch.delenv("TORCH_PIN", raising=False)
    monkeypatch.delenv("ALLOW_CUDA_TORCH", raising=False)
    return calls


def test_every_python_the_readme_names_has_a_pin():
    # docs/setup.md: "Python 3.8 to 3.13"; torch 2.4 was the last release for 3.8 (PyPI wheel tags).
    for minor in range(8, 14):
        assert torch_setup.pin_for((3, minor)) is not None, minor
    assert torch_setup.pin_for((3, 8)) == "torch==2.4.1"
    assert torch_setup.pin_for((3, 7)) is None


def test_pins_this_python_can_install_agree_with_the_installed_torch():
    """Where the installed torch is a table pin, its own Requires-Python admits every Python the
    table maps to it."""
    from importlib.metadata import PackageNotFoundError, metadata
    try:
        meta = metadata("torch")
    except PackageNotFoundError:
        pytest.skip("torch not installed")
    from packaging.specifiers import SpecifierSet
    version = meta["Version"].split("+")[0]
    pythons = [v for v, pin in torch_setup.TORCH_PINS.items() if pin == f"torch=={version}"]
    if not pythons:
        pytest.skip(f"installed torch {version} is no table pin")
    allowed = SpecifierSet(meta["Requires-Python"])
    assert all(f"{major}.{minor}" in allowed for major, minor in pythons)


def test_an_installed_torch_is_kept_and_nothing_is_planned(pip, monkeypatch, capsys):
    monkeypatch.setattr(torch_setup, "installed_torch", lambda: "2.1.0a0+nv23.06")
    assert torch_setup.install() == 0
    assert pip["plans"] == [] and pip["installs"] == []
    assert "torch 2.1.0a0+nv23.06 already present (kept)" in capsys.readouterr().out


def test_a_cpu_plan_installs_the_pin_from_the_default_index(pip):
    pip["by_index"][None] = (CPU_PLAN, None)
    assert torch_setup.install() == 0
    pin = torch_setup.pin_for(sys.version_info)
    assert pip["installs"] == [[sys.executable, "-m", "pip", "install", "-q", pin]]


def test_a_cuda_plan_goes_to_pytorchs_cpu_index(pip, capsys):
    pip["by_index"][None] = (CUDA_PLAN, None)
    pip["by_index"]["https://download.pytorch.org/whl/cpu"] = (CPU_PLAN, None)
    assert torch_setup.install() == 0
    [argv] = pip["installs"]
    assert argv[-3:-1] == ["--index-url", "https://download.pytorch.org/whl/cpu"]
    assert "CUDA build (3 CUDA packages" in capsys.readouterr().out


def test_no_cpu_build_anywhere_is_refused_before_any_download(pip, capsys):
    pip["by_index"][None] = (CUDA_PLAN, None)  # and the CPU index is unreachable
    assert torch_setup.install() == 1
    assert pip["installs"] == []
    err = capsys.readouterr().err
    assert "no CPU build of torch==" in err and "ERROR: no plan given" in err
    assert "fix: or make setup TORCH_PIN=none" in err
    assert "fix: or make setup ALLOW_CUDA_TORCH=1" in err


def test_allow_cuda_torch_installs_the_cuda_build(pip, monkeypatch):
    monkeypatch.setenv("ALLOW_CUDA_TORCH", "1")
    pip["by_index"][None] = (CUDA_PLAN, None)
    assert torch_setup.install() == 0
    assert len(pip["installs"]) == 1 and "--index-url" not in pip["installs"][0]


def test_torch_pin_none_sets_up_without_torch(pip, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_PIN", "none")
    assert torch_setup.install() == 0
    assert pip["plans"] == [] and pip["installs"] == []
    assert "no torch (TORCH_PIN=none)" in capsys.readouterr().out


def test_a_python_with_no_known_torch_is_refused_at_check(monkeypatch, capsys):
    monkeypatch.setattr(torch_setup, "installed_torch", lambda: None)
    monkeypatch.setattr(torch_setup, "TORCH_PINS", {(3, 8): "torch==2.4.1"})
    monkeypatch.delenv("TORCH_PIN", raising=False)
    assert torch_setup.check() == 1
    err = capsys.readouterr().err
    assert "no torch is known for Python" in err
    assert "fix: make setup PYTHON=python3.11 (any of 3.8 to 3.8)" in err


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_setup_refuses_python_37_before_creating_anything(tmp_path):
    py37 = shutil.which("python3.7") or "/root/.pyenv/versions/3.7.16/bin/python"
    if not os.path.exists(py37):
        pytest.skip("no Python 3.7 on this machine")
    venv = tmp_path / "venv"
    res = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "setup",
                          f"PYTHON={py37}", f"VENV={venv}"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "jetbench needs Python 3.8 or newer" in res.stderr
    assert not venv.exists()
