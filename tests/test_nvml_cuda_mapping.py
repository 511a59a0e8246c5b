"""NVML measures the workload's GPU: CUDA's `cuda:N` mapped to NVML's index through
CUDA_VISIBLE_DEVICES (UUIDs or integers) and CUDA_DEVICE_ORDER, against a stand-in pynvml with
three GPUs; and every nvmlInit has its nvmlShutdown, also when the GPU cannot be found."""

import sys
import types

import pytest

from jetbench.errors import HardwareError
from jetbench.hw.cuda_map import CudaGpu, cuda_gpu, nvml_index
from jetbench.hw.meters.nvml import NvmlSource


class _NVMLError(Exception):
    pass


# NVML's order is PCI bus order: index 0, 1, 2.
GPUS = [("GPU-aaaa1111-0000", b"NVIDIA A100"), ("GPU-bbbb2222-0000", b"NVIDIA A100"),
        ("GPU-cccc3333-0000", b"NVIDIA T4")]


def fake_pynvml(gpus=GPUS, handle_fails=False):
    nv = types.ModuleType("pynvml")
    nv.NVMLError = _NVMLError
    nv.calls = []
    nv.nvmlInit = lambda: nv.calls.append("init")
    nv.nvmlShutdown = lambda: nv.calls.append("shutdown")
    nv.nvmlDeviceGetCount = lambda: len(gpus)

    def handle(i):
        if handle_fails or i >= len(gpus):
            raise _NVMLError("Invalid Argument")
        return i

    nv.nvmlDeviceGetHandleByIndex = handle
    nv.nvmlDeviceGetUUID = lambda h: gpus[h][0]
    nv.nvmlDeviceGetName = lambda h: gpus[h][1]
    nv.nvmlDeviceGetTotalEnergyConsumption = lambda h: 1000 * (h + 1)
    nv.nvmlDeviceGetPowerUsage = lambda h: 50_000
    return nv


@pytest.mark.parametrize("device, env, expected", [
    ("cuda:1", {}, CudaGpu(1, None, None)),
    ("cuda", {"CUDA_VISIBLE_DEVICES": "2"}, CudaGpu(0, "2", None)),
    ("auto", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, CudaGpu(0, None, "PCI_BUS_ID")),
    ("cpu", {"CUDA_VISIBLE_DEVICES": "1"}, None),
    ("auto", {"CUDA_VISIBLE_DEVICES": ""}, None),  # CUDA sees no GPU: the workload is not on one
    ("auto", {"CUDA_VISIBLE_DEVICES": "-1"}, None),
    ("cuda:1", {"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, CudaGpu(1, "0,2,-1,1", None)),
])
def test_the_workloads_cuda_device(device, env, expected):
    assert cuda_gpu(device, env) == expected


@pytest.mark.parametrize("gpu, expected", [
    (CudaGpu(0, "GPU-cccc3333-0000,GPU-aaaa1111-0000"), 2),  # UUID: whatever the order
    (CudaGpu(1, "GPU-cccc3333-0000,GPU-aaaa1111-0000"), 0),
    (CudaGpu(0, "GPU-bbbb"), 1),  # a prefix, as CUDA accepts
    (CudaGpu(0, "2", "PCI_BUS_ID"), 2),  # integers in PCI order are NVML's indices
    (CudaGpu(1, "0,2", "PCI_BUS_ID"), 2),
    (CudaGpu(2, None, "PCI_BUS_ID"), 2),
])
def test_cuda_ordinal_to_nvml_index(gpu, expected):
    assert nvml_index(fake_pynvml(), gpu) == expected


def test_same_model_gpus_need_no_pci_order():
    two_a100 = GPUS[:2]
    assert nvml_index(fake_pynvml(two_a100), CudaGpu(0, "1")) == 1


@pytest.mark.parametrize("gpu, message", [
    (CudaGpu(1, "2"), "not among CUDA_VISIBLE_DEVICES"),
    (CudaGpu(1, "2,x,1", "PCI_BUS_ID"), "not among CUDA_VISIBLE_DEVICES"),  # CUDA stops at x
    (CudaGpu(0, "GPU-dddd"), "matches 0 of NVML's GPUs"),
    (CudaGpu(0, "GPU-"), "matches 3 of NVML's GPUs"),
    (CudaGpu(0, "5", "PCI_BUS_ID"), "not one of NVML's 3 GPU"),
    (CudaGpu(0, "2"), "cannot tell which NVML GPU is cuda:0"),  # A100s and a T4, fastest first
])
def test_unmappable_devices_are_said(gpu, message):
    with pytest.raises(HardwareError, match=message):
        nvml_index(fake_pynvml(), gpu)


def test_source_measures_the_mapped_gpu(monkeypatch):
    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    src = NvmlSource(gpu=CudaGpu(0, "GPU-cccc3333-0000"))
    src.open()
    assert src.index == 2 and src.channels()[0].name == "GPU2"
    assert src.read().power_w == (pytest.approx(3.0),)  # GPU 2's counter: 3000 mJ
    src.close()
    assert nv.calls == ["init", "shutdown"]


@pytest.mark.parametrize("source", [
    lambda: NvmlSource(index=7),  # the handle lookup fails
    lambda: NvmlSource(gpu=CudaGpu(0, "GPU-dddd")),  # the mapping fails
])
def test_nvml_is_shut_down_when_the_gpu_is_not_found(monkeypatch, source):
    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    with pytest.raises(HardwareError):
        source().open()
    assert nv.calls == ["init", "shutdown"]


def test_meter_specs_hand_the_workloads_gpu_to_nvml(tmp_path):
    from jetbench.hw.fs import Root
    from jetbench.hw.meters.registry import open_sources

    gpu = CudaGpu(1, "GPU-bbbb,GPU-aaaa")
    (tmp_path / "sys").mkdir()
    sources = open_sources(["nvml"], Root(tmp_path), gpu=gpu)
    assert [s.gpu for s in sources] == [gpu]


def test_each_rank_measures_its_own_gpu_under_cuda_visible_devices(monkeypatch):
    """--devices 2 with CUDA_VISIBLE_DEVICES=2,0: cuda:0 is NVML's GPU 2, cuda:1 NVML's GPU 0
    (issue 24, item 8: the CUDA ordinal was taken as NVML's index)."""
    from jetbench.distributed.messages import Leader

    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    leader = Leader(None, ["cuda:0", "cuda:1"], scaling=False, launcher="test")
    sources = leader.node_sources([NvmlSource()])
    for src in sources:
        src.open()
    assert [s.index for s in sources] == [2, 0]
    assert [s.read().power_w for s in sources] == [(pytest.approx(3.0),), (pytest.approx(1.0),)]
    for src in sources:
        src.close()


def test_each_device_finds_its_own_channel_under_a_renumbering_cuda_visible_devices(monkeypatch):
    """Issue 60, 1: under CUDA_VISIBLE_DEVICES=2,3 (same-model GPUs, so the integers are NVML's
    indices), cuda:0 is NVML's GPU2 and cuda:1 its GPU3. Each rank's source (made as
    distributed/messages.py makes them) must be its device's own, so that the node's img/J
    divides by the sum of both GPUs' power, not by one."""
    from jetbench.distributed.rows import devices_power_sum, own_channels

    four = [(f"GPU-{k}{k}{k}{k}-0000", b"NVIDIA A100") for k in range(4)]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(four))
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    sources = [NvmlSource(i, gpu=cuda_gpu(f"cuda:{i}", env)) for i in range(2)]
    for s in sources:
        s.open()
    # the channels as a result carries them, with made-up powers of 300 W and 250 W
    watts = {"GPU2": 300.0, "GPU3": 250.0}
    channels = [{"name": ch.name, "source": s.name, "mean_w": watts[ch.name]}
                for s in sources for ch in s.channels()]
    assert [c["name"] for c in channels] == ["GPU2", "GPU3"]
    mine = [own_channels(f"cuda:{i}", channels) for i in range(2)]
    assert [[c["name"] for c in m] for m in mine] == [["GPU2"], ["GPU3"]]
    docs = [{"power": {"channels": m, "mean_w": m[0]["mean_w"]}} for m in mine]
    assert devices_power_sum(docs)["mean_w"] == 550.0
    for s in sources:
        s.close()


def test_a_mig_slice_is_measured_on_its_parent_gpu_with_a_note(monkeypatch):
    """Issue 60, 6: CUDA_VISIBLE_DEVICES=MIG-... (a slice of NVML's GPU 1): NVML reads power
    per GPU, so the source opens the parent GPU (it used to fail: the MIG UUID is no NVML
    GPU), and the result says the figure is the whole GPU's."""
    from jetbench.hw.meters.registry import open_sources

    nv = fake_pynvml()
    mig = "MIG-5c1a0000-1111-2222-3333-444455556666"
    nv.nvmlDeviceGetHandleByUUID = lambda uuid: ("mig", 1) if uuid == mig else \
        (_ for _ in ()).throw(_NVMLError("Not Found"))
    nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle = lambda h: h[1]
    nv.nvmlDeviceGetIndex = lambda h: h
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    gpu = cuda_gpu("cuda", {"CUDA_VISIBLE_DEVICES": mig})
    source = NvmlSource(gpu=gpu)
    source.open()
    assert [c.name for c in source.channels()] == ["GPU1"]
    source.close()
    assert nv.calls.count("init") == nv.calls.count("shutdown")
    notes = []
    open_sources(["nvml"], None, gpu=gpu, notes=notes)
    assert len(notes) == 1 and "MIG slice" in notes[0] and "whole GPU" in notes[0], notes
