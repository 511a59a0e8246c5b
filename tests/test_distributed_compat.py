"""`--devices` on the torch a Jetson has (issue 24, item 4): the launcher's LaunchConfig is
built from the fields the installed torch's has. Stand-ins with the dataclass shapes of
torch.distributed.launcher.api.LaunchConfig as released: torch 1.10-2.2 (`log_dir`, no
`logs_specs`, no `shutdown_timeout`), 2.3+ (`logs_specs`), and the newest (`shutdown_timeout`)."""

from dataclasses import dataclass, field
from typing import Any, Optional

from jetbench.distributed.launch import SHUTDOWN_TIMEOUT_S, launch_config


@dataclass
class Config_1_10:  # torch 1.10 .. 2.2
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict = field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 30
    start_method: str = "spawn"
    log_dir: Optional[str] = None
    redirects: Any = None
    tee: Any = None
    metrics_cfg: dict = field(default_factory=dict)
    local_addr: Optional[str] = None


@dataclass
class Config_2_3(Config_1_10):  # torch 2.3: logs_specs replaces log_dir/redirects/tee
    logs_specs: Any = None

    def __post_init__(self):
        assert self.log_dir is None, "2.3 has no log_dir"


@dataclass
class Config_new(Config_2_3):
    shutdown_timeout: int = 30


class LogsSpecs:
    def __init__(self, log_dir=None):
        self.log_dir = log_dir


def test_old_torch_gets_log_dir_and_no_newer_fields():
    config = launch_config(Config_1_10, None, "/tmp/logs", 2)
    assert config.log_dir == "/tmp/logs" and config.nproc_per_node == 2
    assert config.rdzv_endpoint == "localhost:0" and config.max_restarts == 0


def test_torch_2_3_gets_logs_specs():
    config = launch_config(Config_2_3, LogsSpecs, "/tmp/logs", 2)
    assert config.logs_specs.log_dir == "/tmp/logs" and config.log_dir is None
    assert not hasattr(config, "shutdown_timeout")


def test_the_newest_gets_its_shutdown_timeout():
    config = launch_config(Config_new, LogsSpecs, "/tmp/logs", 4)
    assert config.shutdown_timeout == SHUTDOWN_TIMEOUT_S and config.nproc_per_node == 4


def test_the_installed_torch_takes_it(tmp_path):
    import pytest

    api = pytest.importorskip("torch.distributed.launcher.api")
    import torch.distributed.elastic.multiprocessing as mp

    specs = getattr(mp, "DefaultLogsSpecs", None)
    config = launch_config(api.LaunchConfig, specs, str(tmp_path), 2)
    assert config.nproc_per_node == 2


# -- control collectives on gloo beside NCCL (issue 24, item 9) ----------------------------------
class RecordingDist:
    """torch.distributed as the group calls it: which group each collective went to."""

    def __init__(self, backend):
        self.backend, self.calls, self.groups = backend, [], []

    def is_initialized(self):
        return True

    def get_backend(self):
        return self.backend

    def new_group(self, backend=None, timeout=None):
        self.groups.append(backend)
        return f"{backend}-group"

    def all_gather_object(self, out, value, group=None):
        self.calls.append(("gather", group))
        out[:] = [value] * len(out)

    def broadcast_object_list(self, box, src=0, group=None):
        self.calls.append(("broadcast", group))

    def barrier(self, group=None, async_op=False):
        self.calls.append(("barrier", group))


def test_barriers_and_object_collectives_go_on_gloo_when_the_run_is_nccl():
    from jetbench.distributed.devices import RankEnv
    from jetbench.distributed.group import RankGroup, control_group

    dist = RecordingDist("nccl")
    group = RankGroup(RankEnv(0, 0, 2, 2), "cuda:0", dist)
    group.control = control_group(dist, "nccl")
    assert dist.groups == ["gloo"]
    assert group.gather(1) == [1, 1]
    group.broadcast(2)
    group.barrier()
    assert dist.calls == [("gather", "gloo-group"), ("broadcast", "gloo-group"),
                          ("barrier", "gloo-group")]
    # a gloo run keeps the default group: no second group to make
    cpu = RecordingDist("gloo")
    assert control_group(cpu, "gloo") is None and cpu.groups == []


# -- usage errors before any rank starts (issue 24, item 10) -------------------------------------
def test_too_few_gpus_is_a_usage_error_before_the_launch():
    import pytest

    from jetbench.distributed.devices import DeviceSpec, check_gpu_count
    from jetbench.errors import UsageError

    with pytest.raises(UsageError, match="needs 2 CUDA GPUs, and 1 CUDA GPU is visible"):
        check_gpu_count(DeviceSpec(2), "2", "cuda", 1)
    with pytest.raises(UsageError, match="needs 4 CUDA GPUs"):  # index 3 needs four
        check_gpu_count(DeviceSpec(2, (0, 3)), "0,3", "auto", 2)
    check_gpu_count(DeviceSpec(2), "2", "auto", 0)  # CPU ranks: no GPU needed
    check_gpu_count(DeviceSpec(4), "4", "cpu", 1)
    check_gpu_count(DeviceSpec(2), "2", "cuda", 2)


def test_provider_with_devices_is_a_usage_error_not_dropped(tmp_path):
    from typer.testing import CliRunner

    from jetbench.cli.main import app
    from jetbench.sim.create import create_board

    create_board("tx1", tmp_path / "b")
    r = CliRunner().invoke(app, ["--root", str(tmp_path / "b"), "measure", "--devices", "2",
                                 "--provider", "cuda", "--out", str(tmp_path / "o")])
    assert r.exit_code == 1 and "--provider is ONNX Runtime's" in r.output, r.output


def test_ranks_on_gpus_start_a_gloo_group_a_torch_without_nccl_has(monkeypatch):
    """N15: the default group was NCCL on GPUs although every collective went to a gloo
    group: a torch built without NCCL (NVIDIA's Jetson wheels) could not start ranks."""
    import pytest
    import torch
    import torch.distributed as dist

    from jetbench.distributed import group as group_mod
    from jetbench.distributed.devices import RankEnv

    asked = []

    class Stop(Exception):
        pass

    def init_process_group(backend, timeout=None):
        asked.append(backend)
        raise Stop

    monkeypatch.setattr(group_mod, "die_with_parent", lambda sig: None)
    monkeypatch.setattr(group_mod, "joined", lambda: None)
    monkeypatch.setattr(group_mod, "require_distributed", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    with pytest.raises(Stop):
        group_mod.RankGroup.open(RankEnv(0, 0, 2, 2), "cuda", None)
    assert asked == ["gloo"]
