"""The make targets (the torch step of `make setup` is tests/test_torch_setup.py)."""

import glob
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


def _fake_bin(tmp_path, uid: str, apt_rc: int = 0):
    """A PATH with only sh's basics, a fake `id` and a fake `apt-get` that logs its arguments:
    no fusermount3, no ldconfig, no systemd-analyze, as on a fresh machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "grep", "cat"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    log = tmp_path / "apt.log"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit {apt_rc}\n')
    for name in ("id", "apt-get"):
        (bin_dir / name).chmod(0o755)
    return bin_dir, log


# The script also finds PostgreSQL in Debian's folder, off PATH: where this machine has it there,
# the fake PATH does not hide it.
_PG = [] if glob.glob("/usr/lib/postgresql/*/bin/initdb") else ["postgresql"]
_MISSING = " ".join(["fuse3", "libfuse3-3", "systemd", *_PG])


def _system_deps(bin_dir):
    env = {"PATH": str(bin_dir)}
    return subprocess.run([shutil.which("sh"), str(REPO / "tools/system_deps.sh")], env=env,
                          capture_output=True, text=True, timeout=60)


def test_setup_installs_fuse_as_root_with_apt(tmp_path):
    bin_dir, log = _fake_bin(tmp_path, uid="0")
    res = _system_deps(bin_dir)
    assert res.returncode == 0, res.stderr
    assert f"installing {_MISSING} with apt-get" in res.stdout
    calls = log.read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].split()[-len(_MISSING.split()):] == _MISSING.split()


def test_setup_without_root_prints_the_command_and_goes_on(tmp_path):
    bin_dir, log = _fake_bin(tmp_path, uid="1000")
    res = _system_deps(bin_dir)
    assert res.returncode == 0
    assert f"sudo apt-get install {_MISSING}" in res.stdout
    assert not log.exists()


def test_setup_says_so_when_apt_fails_and_goes_on(tmp_path):
    bin_dir, _ = _fake_bin(tmp_path, uid="0", apt_rc=100)
    res = _system_deps(bin_dir)
    assert res.returncode == 0
    assert "could not install" in res.stderr


def test_test_target_provides_the_system_programs_and_ci_runs_only_make_test(tmp_path):
    res = _make("-n", "test", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "tools/system_deps.sh" in res.stdout
    lines = [ln.strip() for ln in (REPO / ".ci/run").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[-1] == "make test"
    assert not any("apt-get" in ln for ln in lines)


def test_gpu_check_on_a_machine_without_a_gpu_says_so_in_one_line(tmp_path):
    """`make gpu-check` (tools/gpu_check.py) where nvidia-smi lists no GPU: one line, exit 0."""
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # a driver that sees no GPU: lists nothing
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    res = subprocess.run([sys.executable, str(REPO / "tools/gpu_check.py")],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "gpu-check: no NVIDIA GPU here (nvidia-smi lists none): nothing to check"]
    assert "gpu-check:" in (REPO / "Makefile").read_text()
