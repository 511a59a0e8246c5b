"""Every simulated board, file tree and FUSE-served, carries the files NVIDIA's jetson_clocks
reads on that family (tests/jetson_clocks_reads.sh: our own script shaped like its reads, not
NVIDIA's code): a tree that tool cannot run on is not a faithful one."""

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app
from jetbench.sim.boards import BOARDS

from conftest import SIM_BOARDS, fuse_board, make_board

SCRIPT = Path(__file__).parent / "jetson_clocks_reads.sh"
pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX sh")


def reads(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(SCRIPT), str(root)], capture_output=True, text=True,
                          timeout=120)


def values(done: subprocess.CompletedProcess) -> dict:
    return dict(line[3:].split("=", 1) for line in done.stdout.splitlines()
                if line.startswith("ok "))


def test_every_board_is_covered():
    assert sorted(SIM_BOARDS) == sorted(BOARDS)


@pytest.mark.parametrize("key", SIM_BOARDS)
def test_file_board_has_what_jetson_clocks_reads(tmp_path, key):
    done = reads(make_board(tmp_path, key))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "MISSING" not in done.stderr and "EMPTY" not in done.stderr


@pytest.mark.kernel
@pytest.mark.parametrize("key", SIM_BOARDS)
def test_fuse_board_has_what_jetson_clocks_reads(tmp_path, key):
    with fuse_board(tmp_path, key) as board:
        done = reads(board.root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


@pytest.mark.parametrize("key,compatible", [
    ("xavier-nx", "nvidia,gv11b"), ("orin-agx-jp5", "nvidia,ga10b"),
    ("orin-agx", "nvidia,ga10b"), ("orin-nano", "nvidia,ga10b"),
    ("orin-nano-super", "nvidia,ga10b"), ("orin-agx-jp7", "nvidia,ga10b")])
def test_r35_gpu_is_found_through_gpu0_compatible(tmp_path, key, compatible):
    """gpu.0 links to the device jetbench pins, whose devfreq node carries the same name."""
    base = make_board(tmp_path, key)
    done = reads(base)
    got = values(done)
    assert got["/sys/devices/platform/gpu.0/of_node/compatible"] == compatible
    board = BOARDS[key]
    assert (base / "sys/devices/platform/gpu.0").resolve() == \
        (base / board.gpu_device.lstrip("/")).resolve()
    node = f"/sys/class/devfreq/{board.gpu_devfreq_name}"
    assert f"{node}/min_freq" in got, done.stdout


def test_the_values_are_the_boards(tmp_path):
    """R24 override limits are the clock tables' ends; tegra210 R32's EMC min is the table's."""
    got = values(reads(make_board(tmp_path, "tx1-r24")))
    tx1 = BOARDS["tx1-r24"]
    clock = "/sys/kernel/debug/clock"
    assert int(got[f"{clock}/override.gbus/max"]) == tx1.gpu_freqs_hz[-1]
    assert int(got[f"{clock}/override.gbus/min"]) == tx1.gpu_freqs_hz[0]
    assert int(got[f"{clock}/override.emc/max"]) == tx1.emc_freqs_hz[-1]
    assert int(got[f"{clock}/override.emc/min"]) == tx1.emc_freqs_hz[0]
    got = values(reads(make_board(tmp_path, "nano")))
    assert int(got["/sys/kernel/debug/tegra_bwmgr/emc_min_rate"]) == BOARDS["nano"].emc_freqs_hz[0]
    got = values(reads(make_board(tmp_path, "tx2")))
    assert got["/sys/kernel/nvpmodel_emc_cap/emc_iso_cap"] == "0"  # no cap in MAXN



def test_nano_override_emc_clk_rate_follows_the_pin(tmp_path):
    """The override clock's rate is the running EMC rate, as emc/clk_rate is, after a pin."""
    base = make_board(tmp_path, "nano")
    result = CliRunner().invoke(app, ["--root", str(base), "maxperf"])
    assert result.exit_code == 0, result.output
    debug = base / "sys/kernel/debug/clk"
    assert (debug / "override.emc/clk_rate").read_text() == (debug / "emc/clk_rate").read_text()


@pytest.mark.kernel
def test_fuse_nano_override_emc_clk_rate_follows_the_pin(tmp_path):
    with fuse_board(tmp_path, "nano") as board:
        board.write("/sys/kernel/debug/clk/override.emc/clk_update_rate", 665600000)
        board.write("/sys/kernel/debug/clk/override.emc/clk_state", 1)
        assert board.read("/sys/kernel/debug/clk/override.emc/clk_rate") == "665600000"
        assert board.read("/sys/kernel/debug/clk/emc/clk_rate") == "665600000"


@pytest.mark.kernel
def test_fuse_thor_mounts_pins_and_restores(tmp_path):
    """Thor over FUSE: runtime PM power/control (no railgate_enable), the bwmgr EMC node and the
    carrier's INA238 are served by the simulated kernel."""
    with fuse_board(tmp_path, "thor") as board:
        control = f"{BOARDS['thor'].gpu_device}/power/control"
        assert board.read(control) == "auto"
        with pytest.raises(OSError):
            board.write(control, "sometimes")  # runtime PM takes `auto` or `on` only
        info = board.jetbench("info", "--json")
        assert info.returncode == 0, info.stderr
        done = board.jetbench("maxperf")
        assert done.returncode == 0, done.stdout + done.stderr
        assert board.read(control) == "on"
        top = str(BOARDS["thor"].emc_freqs_hz[-1])
        assert board.read("/sys/class/devfreq/bwmgr/min_freq") == top
        done = board.jetbench("restore")
        assert done.returncode == 0, done.stdout + done.stderr
        assert board.read(control) == "auto"
