"""RAPL: counter wraparound, top-level zones only, the permission error's fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jetbench.errors import PermissionDenied
from jetbench.hw.fs import Root
from jetbench.hw.meters.rapl import RaplSource, rapl_zones, unwrap

PC = "sys/class/powercap"


def _zone(base: Path, zone: str, name: str, uj: int, max_uj: int = 1000) -> Path:
    d = base / PC / zone
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def test_unwrap():
    assert unwrap(100, 250, 1000) == 150
    assert unwrap(900, 50, 1000) == 150  # wrapped once
    assert unwrap(5, 5, 1000) == 0


def test_counter_wraparound_is_unwrapped(tmp_path):
    pkg = _zone(tmp_path, "intel-rapl:0", "package-0", 800, max_uj=1_000_000)
    src = RaplSource(Root(tmp_path))
    src.open()
    try:
        assert src.read().power_w == (0.0,)
        for raw, total_uj in [(999_000, 998_200), (200_000, 1_199_200), (300_000, 1_299_200)]:
            (pkg / "energy_uj").write_text(f"{raw}\n")
            assert src.read().power_w == (pytest.approx(total_uj * 1e-6),)
    finally:
        src.close()


def test_nested_zones_and_psys_are_never_summed(tmp_path):
    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    _zone(tmp_path, "intel-rapl:0/intel-rapl:0:0", "core", 1)
    _zone(tmp_path, "intel-rapl:0:0", "core", 1)  # the class symlink of the sub-zone
    _zone(tmp_path, "intel-rapl:1", "package-1", 1)
    _zone(tmp_path, "intel-rapl:2", "psys", 1)
    root = Root(tmp_path)
    assert [z.rsplit("/", 1)[-1] for z in rapl_zones(root)] == [
        "intel-rapl:0", "intel-rapl:1", "intel-rapl:2"]
    src = RaplSource(root)
    assert [c.name for c in src.channels()] == ["package-0", "package-1", "psys"]
    assert all(c.kind == "energy" and c.point == "package" for c in src.channels())
    total = src.total()
    assert total.kind == "sum" and total.channels == ("package-0", "package-1")


def test_permission_error_says_how_to_fix(tmp_path, monkeypatch):
    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real_open = os.open

    def denied(path, flags, *args):  # what Linux >= 5.10 answers a non-root user
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)
    src = RaplSource(Root(tmp_path))
    with pytest.raises(PermissionDenied) as err:
        src.open()
    assert "CVE-2020-8694" in err.value.hint and "chmod" in err.value.hint
    assert "energy_uj" in str(err.value)


# -- --meter auto on a PC: RAPL is the CPU package, NVML the CUDA GPU (issue 24, item 1) -----------
class _HostRoot(Root):
    """A PC's tree under tmp_path that `auto` treats as the running machine (NVML is asked)."""

    @property
    def is_host(self) -> bool:
        return True


@pytest.fixture
def nvml_present(monkeypatch):
    import jetbench.hw.nvml as nvml

    monkeypatch.setattr(nvml, "nvml_available", lambda: True)
    monkeypatch.setattr(nvml, "nvml_power_supported", lambda: True)


def _deny_energy(monkeypatch):
    real_open = os.open

    def denied(path, flags, *args):  # Linux >= 5.10 to a non-root user
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)


def test_auto_takes_nvml_for_a_cuda_workload_on_a_pc_with_rapl(tmp_path, nvml_present):
    from jetbench.hw.cuda_map import CudaGpu
    from jetbench.hw.meters.nvml import NvmlSource
    from jetbench.hw.meters.registry import auto_sources

    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    notes = []
    [source] = auto_sources(_HostRoot(tmp_path), gpu=CudaGpu(0, None, None), notes=notes)
    assert isinstance(source, NvmlSource)
    assert any("not RAPL (the CPU package)" in n for n in notes), notes
    # a CPU workload (no CUDA device) keeps RAPL: its power is the package's
    [cpu] = auto_sources(_HostRoot(tmp_path), gpu=None)
    assert isinstance(cpu, RaplSource)


def test_auto_skips_an_unreadable_rapl_for_the_next_source(tmp_path, monkeypatch, nvml_present):
    from jetbench.hw.meters.base import EmptySource
    from jetbench.hw.meters.nvml import NvmlSource
    from jetbench.hw.meters.registry import auto_sources

    _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    _deny_energy(monkeypatch)
    notes = []
    [source] = auto_sources(_HostRoot(tmp_path), gpu=None, notes=notes)
    assert isinstance(source, NvmlSource)
    assert notes and "RAPL skipped" in notes[0] and "root only" in notes[0]
    # nothing else here: "not measured", not a failed run
    [none] = auto_sources(Root(tmp_path), gpu=None)
    assert isinstance(none, EmptySource)


def test_a_cpu_torch_workload_under_device_auto_is_metered_as_the_cpus(tmp_path, monkeypatch):
    """N4: on a PC with the CPU torch and an NVIDIA GPU, `--device auto` runs the network on the
    CPU; `--meter auto` measured the idle GPU through NVML because it took `auto` as GPU 0."""
    from jetbench.hw.board import detect
    from jetbench.run import meters as run_meters
    from jetbench.run.meters import Meters
    from jetbench.run.request import MeasureRequest
    from jetbench.workload.command.spec import command_spec

    monkeypatch.setattr(run_meters, "resolve_device", lambda device: "cpu")  # the CPU torch
    board = detect(Root(tmp_path))

    def device(**kw):
        return Meters(Root(tmp_path), board, MeasureRequest(**kw)).workload_device()

    assert device(models=("resnet18",)) == "cpu"
    assert device(models=("resnet18",), device="cuda:1") == "cuda:1"  # said: kept
    # a command (trtexec) or an ONNX model: no torch decides, the GPU when there is one
    assert device(command=command_spec("trtexec --onnx=m.onnx", "trtexec")) == "auto"
    assert device(models=(str(tmp_path / "m.onnx"),)) == "auto"
