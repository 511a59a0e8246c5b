"""Discrete GPUs' clocks through NVML, against a stand-in `pynvml` (tests/nvml_stand_in) that
records every setter in order: detection, maxperf's call sequence, the journal's NVML entries,
restore, profile validation before any call, a rejected call rolled back, `info`, and kill -9 of a
real `jetbench measure --freq 1410MHz` then `jetbench restore` putting the GPU back.

The A100-SXM4-40GB facts the stand-in describes: memory 1215 MHz, graphics 210..1410 MHz in
15 MHz steps, power limit settable 100..400 W (default 400 W); the GPU starts at 300 W."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.daemons import Daemon
from helpers.workloads import write_tiny

from jetbench.errors import JetbenchError, ProfileError
from jetbench.hw.board import detect
from jetbench.hw.fs import Root
from jetbench.ownership import journal
from jetbench.profiles.apply import apply_profile
from jetbench.profiles.profile import load_profile, parse_profile

from conftest import REPO, bound_s, make_generic_host, run_cli
from conftest import wait_until as _wait

STAND_IN = REPO / "tests/nvml_stand_in"
BUS = "0000:01:00.0"  # as /proc/driver/nvidia/gpus names it; NVML says 00000000:01:00.0


def _load_stand_in():
    spec = importlib.util.spec_from_file_location("pynvml", STAND_IN / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _host_with_gpu(base: Path) -> Path:
    make_generic_host(base)
    info = base / "proc/driver/nvidia/gpus" / BUS / "information"
    info.parent.mkdir(parents=True)
    info.write_text("Model: \t\t NVIDIA A100-SXM4-40GB\nBus Location: \t 0000:01:00.0\n")
    return base


@pytest.fixture
def gpu_host(tmp_path, monkeypatch):
    """A generic host with one A100 at 300 W, the stand-in as `pynvml`: (root, state file)."""
    nv = _load_stand_in()
    state = tmp_path / "nvml.json"
    nv.write_state(state, [nv.a100()])
    monkeypatch.setenv("JETBENCH_TEST_NVML_STATE", str(state))
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    return _host_with_gpu(tmp_path / "host"), state


def board_state(path: Path) -> dict:
    return json.loads(path.read_text())


def _calls(path: Path) -> list:
    return [tuple(c) for c in board_state(path)["calls"]]


def test_detected_with_its_tables(gpu_host):
    base, _state_file = gpu_host
    board = detect(Root(base))
    assert board.soc is None and board.can_pin
    (gpu,) = board.nvml_gpus
    assert gpu.bus_id == BUS and gpu.name == "NVIDIA A100-SXM4-40GB"
    assert max(gpu.graphics_hz) == 1_410_000_000 and min(gpu.graphics_hz) == 210_000_000
    assert len(gpu.graphics_hz) == 81  # (1410 - 210) / 15 + 1
    assert gpu.memory_hz == (1_215_000_000,)
    assert gpu.power_limits_mw == (100_000, 400_000) and gpu.default_power_mw == 400_000


def test_maxperf_locks_at_max_journals_first_and_restore_puts_back(gpu_host):
    base, state = gpu_host
    root = Root(base)
    board = detect(root)
    apply_profile(root, board, load_profile("maxperf", base))
    assert _calls(state) == [
        ("SetPowerManagementLimit", "00000000:01:00.0", 400_000),
        ("SetMemoryLockedClocks", "00000000:01:00.0", 1215, 1215),
        ("SetGpuLockedClocks", "00000000:01:00.0", 1410, 1410),
    ]
    gpu = board_state(state)["gpus"][0]
    assert gpu["locked_gpu"] == [1410, 1410] and gpu["power_limit_mw"] == 400_000
    # The journal: an NVML entry kind, the original power limit, locks recorded as "default".
    doc = json.loads((base / "var/lib/jetbench/journal.json").read_text())
    nvml = {e["path"]: e for e in doc["entries"] if e.get("kind") == "nvml"}
    assert nvml[f"nvml:{BUS}/power_limit_mw"]["raw"] == "300000\n"
    assert nvml[f"nvml:{BUS}/gpu_locked_clocks"]["raw"] == "default\n"
    assert nvml[f"nvml:{BUS}/memory_locked_clocks"]["raw"] == "default\n"
    # A second maxperf never overwrites the originals.
    apply_profile(root, detect(root), load_profile("maxperf", base))
    assert json.loads((base / "var/lib/jetbench/journal.json").read_text())["entries"] == \
        doc["entries"]
    n = len(_calls(state))
    journal.restore(root)
    assert _calls(state)[n:] == [
        ("ResetGpuLockedClocks", "00000000:01:00.0"),
        ("ResetMemoryLockedClocks", "00000000:01:00.0"),
        ("SetPowerManagementLimit", "00000000:01:00.0", 300_000),
    ]
    gpu = board_state(state)["gpus"][0]
    assert gpu["locked_gpu"] is None and gpu["locked_mem"] is None
    assert gpu["power_limit_mw"] == 300_000
    assert not (base / "var/lib/jetbench/journal.json").exists()


@pytest.mark.parametrize("gpu_section, words", [
    ('freq = "2000MHz"', "outside this board's range"),
    ('freq = "max"\npower_limit = "500W"', "outside this GPU's 100 .. 400 W"),
])
def test_invalid_profile_makes_no_call(gpu_host, gpu_section, words):
    base, state = gpu_host
    root = Root(base)
    profile = parse_profile(f"[gpu]\n{gpu_section}\n", "bad")
    with pytest.raises(ProfileError, match=words):
        apply_profile(root, detect(root), profile)
    assert _calls(state) == []
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_a_refused_lock_rolls_its_step_back_and_restore_finishes(gpu_host, monkeypatch):
    base, state = gpu_host
    doc = board_state(state)
    doc["gpus"][0]["memory_lock_supported"] = False  # a board that refuses memory locks
    doc["gpus"][0]["architecture"] = None  # and does not say its architecture
    state.write_text(json.dumps(doc))
    root = Root(base)
    with pytest.raises(JetbenchError, match="not supported"):
        apply_profile(root, detect(root), load_profile("maxperf", base))
    gpu = board_state(state)["gpus"][0]
    assert gpu["locked_gpu"] is None  # the graphics lock after it was never written
    assert gpu["power_limit_mw"] == 400_000  # an earlier step stays, journalled
    journal.restore(root)
    assert board_state(state)["gpus"][0]["power_limit_mw"] == 300_000


def test_a_pre_ampere_gpu_is_pinned_without_a_memory_lock(gpu_host):
    base, state = gpu_host
    doc = board_state(state)
    doc["gpus"][0]["architecture"] = 6  # Turing: locked graphics clocks, no memory locks
    state.write_text(json.dumps(doc))
    root = Root(base)
    result = apply_profile(root, detect(root), load_profile("maxperf", base))
    assert [c[0] for c in _calls(state)] == ["SetPowerManagementLimit", "SetGpuLockedClocks"]
    assert any("memory clock not lockable" in n for n in result.targets.notes)


def test_an_nvidia_ml_py_without_memory_lock_calls_pins_no_memory_clock(gpu_host, monkeypatch):
    """N14: nvidia-ml-py 11.450 (the `nvml` extra's floor) has no memory-lock calls: a memory
    lock pinned through them could not be reset on restore. Nothing is pinned that cannot be
    put back: the graphics clock only, and the result says why."""
    base, state = gpu_host
    nv = sys.modules["pynvml"]
    monkeypatch.delattr(nv, "nvmlDeviceSetMemoryLockedClocks")
    monkeypatch.delattr(nv, "nvmlDeviceResetMemoryLockedClocks")
    root = Root(base)
    board = detect(root)
    assert any("no memory-lock calls" in n for n in board.notes)
    apply_profile(root, board, load_profile("maxperf", base))
    assert [c[0] for c in _calls(state)] == ["SetPowerManagementLimit", "SetGpuLockedClocks"]


def test_no_pynvml_is_a_note_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    base = _host_with_gpu(tmp_path / "host")
    board = detect(Root(base))
    assert board.nvml_gpus == ()
    assert any("NVML is not installed" in n for n in board.notes), board.notes


# -- real subprocesses: the stand-in on PYTHONPATH, its state in a file ------------------------
def _env(state: Path) -> dict:
    return dict(os.environ, PYTHONPATH=f"{STAND_IN}{os.pathsep}{REPO / 'agent'}",
                JETBENCH_TEST_NVML_STATE=str(state))


def _subprocess_host(tmp_path: Path) -> tuple:
    nv = _load_stand_in()
    state = tmp_path / "nvml.json"
    nv.write_state(state, [nv.a100()])
    return _host_with_gpu(tmp_path / "host"), state


def test_info_lists_the_gpu(tmp_path):
    base, state = _subprocess_host(tmp_path)
    out = run_cli("--root", str(base), "info", "--json", env=_env(state))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    (gpu,) = doc["nvml_gpus"]
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB" and gpu["power_limit_mw"] == 300_000
    clocks = {c["domain"]: c for c in doc["clocks"] if c["governor"] == "nvml"}
    assert clocks["gpu"]["max_hz"] == 1_410_000_000 and clocks["gpu-mem"]["cur_hz"] == 1_215_000_000
    text = run_cli("--root", str(base), "info", env=_env(state))
    assert "A100" in text.stdout and "300 W" in text.stdout, text.stdout


def test_kill9_of_measure_then_restore_puts_nvml_back(tmp_path):
    base, state = _subprocess_host(tmp_path)
    write_tiny(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetbench.cli.main", "--root", str(base), "measure",
         "--model", "jb_tinynet:marked", "--input-shape", "3,16,16", "--iterations", "2",
         "--warmup", "0", "--device", "cpu", "--freq", "1410MHz", "--duration", "60",
         "--meter", "none", "--out", str(tmp_path / "out")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(state))
    try:
        deadline = time.monotonic() + bound_s(120)
        while not (tmp_path / "inference.mark").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the network never ran"
            time.sleep(0.02)
        assert board_state(state)["gpus"][0]["locked_gpu"] == [1410, 1410]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert board_state(state)["gpus"][0]["locked_gpu"] == [1410, 1410]  # nothing ran to undo it
    out = run_cli("--root", str(base), "restore", env=_env(state))
    assert out.returncode == 0, out.stderr
    assert _calls(state) == [("SetGpuLockedClocks", "00000000:01:00.0", 1410, 1410),
                             ("ResetGpuLockedClocks", "00000000:01:00.0")]
    assert board_state(state)["gpus"][0]["locked_gpu"] is None
    assert board_state(state)["gpus"][0]["power_limit_mw"] == 300_000
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_daemon_holds_the_locks_without_fighting_them_and_restores(tmp_path, monkeypatch,
                                                                    started):
    """NVML cannot read a lock back: the daemon locks once, never counts it as drift (no
    re-pin every interval), and resets it when stopped."""
    base, state = _subprocess_host(tmp_path)
    for key, value in _env(state).items():
        monkeypatch.setenv(key, value)
    d = Daemon(tmp_path, base, "--profile", "maxperf", interval="0.1s")
    started.append(d)
    d.ready()
    checks = d.ask("status")["counters"]["checks"]
    assert _wait(lambda: d.ask("status")["counters"]["checks"] >= checks + 5)
    status = d.ask("status")
    assert status["counters"]["repins"] == 0 and status["pinned"], status
    assert [c[0] for c in _calls(state)] == [
        "SetPowerManagementLimit", "SetMemoryLockedClocks", "SetGpuLockedClocks"]
    assert d.stop() == 0, d.output()
    gpu = board_state(state)["gpus"][0]
    assert gpu["locked_gpu"] is None and gpu["locked_mem"] is None
    assert gpu["power_limit_mw"] == 300_000


@pytest.mark.parametrize("entry, words", [
    ({"path": f"nvml:{BUS}/power_limit_mw", "raw": "300000\n"}, "does not match"),  # no kind
    ({"path": "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "raw": "x\n",
      "kind": "nvml"}, "does not match"),
    ({"path": "nvml:0000:01:00.0/../../etc/shadow", "raw": "1\n", "kind": "nvml"}, "not an NVML"),
    ({"path": "nvml:00000000:01:00.0/gpu_locked_clocks", "raw": "default\n", "kind": "nvml"},
     "not an NVML"),  # NVML's spelling of the bus id, not the journal's
    ({"path": f"nvml:{BUS}/gpu_locked_clocks", "raw": "1410;reboot\n", "kind": "nvml"},
     "not a value"),
    ({"path": f"nvml:{BUS}/power_limit_mw", "raw": "-5\n", "kind": "nvml"}, "not a value"),
])
def test_a_hostile_nvml_journal_entry_restores_nothing(gpu_host, entry, words):
    base, state = gpu_host
    path = base / "var/lib/jetbench/journal.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": journal.SCHEMA, "entries": [entry]}))
    with pytest.raises(journal.JournalInvalid, match=words):
        journal.restore(Root(base))
    assert _calls(state) == []


def test_locks_without_persistence_mode_are_warned(tmp_path, monkeypatch):
    """Without persistence mode the driver may unload between processes, and NVML's locks and
    power limit vanish with it (issue 24, item 11): the pin says so."""
    nv = _load_stand_in()
    state = tmp_path / "nvml.json"
    nv.write_state(state, [nv.a100(persistence=0)])
    monkeypatch.setenv("JETBENCH_TEST_NVML_STATE", str(state))
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    base = _host_with_gpu(tmp_path / "host")
    root = Root(base)
    board = detect(root)
    assert board.nvml_gpus[0].persistence is False
    result = apply_profile(root, board, load_profile("maxperf", base))
    assert any("persistence mode is off" in n and "nvidia-smi -pm 1" in n
               for n in result.targets.notes), result.targets.notes


def test_locks_with_persistence_mode_say_nothing_of_it(gpu_host):
    base, _state_file = gpu_host
    root = Root(base)
    result = apply_profile(root, detect(root), load_profile("maxperf", base))
    assert not any("persistence" in n for n in result.targets.notes)


def test_tune_searches_a_discrete_gpus_nvml_clocks(gpu_host):
    """N12: `tune --knobs gpu` needed a devfreq table; on a PC it refused the NVML GPU whose
    clocks `measure --freq` locks."""
    from jetbench.run.tune.space import search_space

    base, state = gpu_host
    root = Root(base)
    board = detect(root)
    space = search_space(root, board, ["gpu"], False)
    # the stand-in A100's supported graphics clocks: 210 .. 1410 MHz in 15 MHz steps
    assert space["gpu"] == [mhz * 1_000_000 for mhz in range(210, 1411, 15)]
    assert _calls(state) == []  # reading the space locks nothing
