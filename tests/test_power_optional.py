"""NVML and jetson-stats sources against stand-in modules (the real ones need hardware)."""

from __future__ import annotations

import sys
import types

import pytest

from jetbench.errors import HardwareError
from jetbench.hw.meters.jtop import JtopSource
from jetbench.hw.meters.nvml import NvmlSource


class _NVMLError(Exception):
    pass


def _fake_pynvml(energy=True, power=True):
    nv = types.ModuleType("pynvml")
    nv.NVMLError = _NVMLError
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    state = {"mj": 1000}

    def get_energy(h):
        if not energy:
            raise _NVMLError("Not Supported")
        state["mj"] += 500
        return state["mj"]

    def get_power(h):
        if not power:
            raise _NVMLError("Not Supported")
        return 61500

    nv.nvmlDeviceGetTotalEnergyConsumption = get_energy
    nv.nvmlDeviceGetPowerUsage = get_power
    return nv


def test_nvml_prefers_the_energy_counter(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    src = NvmlSource()
    src.open()
    assert src.channels()[0].kind == "energy"
    assert src.read().power_w == (pytest.approx(2.0),)  # 2000 mJ cumulative
    src.close()


def test_nvml_falls_back_to_power(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(energy=False))
    src = NvmlSource()
    src.open()
    assert src.channels()[0].kind == "power"
    assert src.read().power_w == (pytest.approx(61.5),)
    src.close()


def test_nvml_on_a_jetson_is_not_available_never_zero(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(energy=False, power=False))
    with pytest.raises(HardwareError, match="not available here") as err:
        NvmlSource().open()
    assert "ina3221" in err.value.hint


def _fake_jtop(running=True, rails=None):
    mod = types.ModuleType("jtop")

    class JtopException(Exception):
        pass

    class jtop:  # noqa: N801 - the real class name
        def __init__(self, interval=0.5):
            self.power = {"rail": rails or {}, "tot": {}}

        def start(self):
            if not running:
                raise JtopException("The jtop.service is not active")

        def close(self):
            pass

    mod.jtop = jtop
    mod.JtopException = JtopException
    return mod


def test_jtop_reads_rails_and_uses_jetbench_total(monkeypatch):
    rails = {"VDD_GPU_SOC": {"power": 4000}, "VDD_CPU_CV": {"power": 2000},
             "VIN_SYS_5V0": {"power": 3000}}
    monkeypatch.setitem(sys.modules, "jtop", _fake_jtop(rails=rails))
    src = JtopSource()
    src.open()
    assert src.read().power_w == (2.0, 4.0, 3.0)
    assert src.total().kind == "sum"  # AGX Orin: not VIN_SYS_5V0 alone
    src.close()


def test_jtop_service_not_running(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", _fake_jtop(running=False))
    with pytest.raises(HardwareError, match="not reachable") as err:
        JtopSource().open()
    assert "systemctl start jtop" in err.value.hint
