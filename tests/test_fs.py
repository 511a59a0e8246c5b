import os

import pytest

from jetbench.errors import HardwareError, MissingFile, UnsafePath, WriteRejected
from jetbench.hw.fs import Root


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
    d.mkdir(parents=True)
    (d / "scaling_governor").write_text("schedutil\n")
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/device-tree/compatible").write_bytes(
        b"nvidia,p3450-0000\x00nvidia,tegra210\x00")
    return Root(tmp_path)


def test_reads_are_under_the_root(root):
    assert root.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "schedutil"
    assert root.read_strings("/proc/device-tree/compatible") == ["nvidia,p3450-0000",
                                                                 "nvidia,tegra210"]
    assert root.read("/nope", default="x") == "x"
    with pytest.raises(MissingFile) as err:
        root.read("/sys/nope")
    assert "/sys/nope" in str(err.value) and err.value.hint


def test_write_is_echo_like_and_never_creates(root, tmp_path):
    path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    root.write(path, "userspace")
    assert (tmp_path / path.lstrip("/")).read_bytes() == b"userspace\n"
    with pytest.raises(MissingFile):
        root.write("/sys/devices/system/cpu/cpu0/cpufreq/scaling_setspeed", "1")
    assert not (tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_setspeed").exists()


def test_write_outside_allowlist_refused(root, tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("root\n")
    with pytest.raises(UnsafePath):
        root.write("/etc/passwd", "x")
    with pytest.raises(UnsafePath):
        root.write("/sys/devices/system/cpu/../../../etc/passwd", "x")
    assert (tmp_path / "etc/passwd").read_text() == "root\n"


def test_dotdot_above_root_refused(root):
    with pytest.raises(UnsafePath):
        root.write("/../../etc/passwd", "x")


def test_symlink_escapes_refused(tmp_path):
    """The board's root is tmp_path/board; the file to protect lies beside it, still inside
    this test's temporary directory."""
    base = tmp_path / "board"
    cpufreq = base / "sys/devices/system/cpu/cpu0/cpufreq"
    cpufreq.mkdir(parents=True)
    root = Root(base)
    outside = tmp_path / "outside"
    outside.write_text("precious\n")
    os.symlink(outside, cpufreq / "abs_escape")  # absolute: points off the root
    # Relative: seven levels up from .../cpu0/cpufreq is tmp_path, beside the root.
    os.symlink("../../../../../../../outside", cpufreq / "rel_escape")
    assert os.path.realpath(cpufreq / "rel_escape") == str(outside)
    for name in ("abs_escape", "rel_escape"):
        with pytest.raises(UnsafePath) as info:
            root.write(f"/sys/devices/system/cpu/cpu0/cpufreq/{name}", "x")
        assert "outside the root" in str(info.value)
    # Inside the root but outside the allowlist, reached through an allowed directory.
    (base / "etc").mkdir()
    (base / "etc/shadow").write_text("secret\n")
    os.symlink("../../../../../../etc/shadow", cpufreq / "to_etc")
    assert os.path.realpath(cpufreq / "to_etc") == str(base / "etc/shadow")
    with pytest.raises(UnsafePath) as info:
        root.write("/sys/devices/system/cpu/cpu0/cpufreq/to_etc", "x")
    assert "allowlist" in str(info.value)
    assert outside.read_text() == "precious\n"
    assert (base / "etc/shadow").read_text() == "secret\n"


def test_dangerous_names_refused(root, tmp_path):
    (tmp_path / "sys/devices/pci0").mkdir(parents=True)
    (tmp_path / "sys/devices/pci0/remove").write_text("0\n")
    with pytest.raises(UnsafePath):
        root.write("/sys/devices/pci0/remove", "1")


def test_debugfs_hint(tmp_path):
    (tmp_path / "sys/kernel/debug").mkdir(parents=True)
    with pytest.raises(MissingFile) as err:
        Root(tmp_path).read("/sys/kernel/debug/bpmp/debug/clk/emc/rate")
    assert "mount -t debugfs" in err.value.hint


def test_kernel_rejection_is_a_jetbench_error(root, tmp_path):
    target = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"
    target.mkdir()  # a real OS error (EISDIR) where the kernel would say EINVAL
    with pytest.raises(WriteRejected) as err:
        root.write("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "1")
    assert "scaling_max_freq" in str(err.value)


def test_reads_through_an_escaping_symlink_are_refused(tmp_path):
    base = tmp_path / "board"
    (base / "sys/class").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.write_text("secret\n")
    os.symlink("../../../secret", base / "sys/class/escape")
    assert os.path.realpath(base / "sys/class/escape") == str(outside)
    with pytest.raises(UnsafePath):
        Root(base).read("/sys/class/escape")


def test_read_int_default_only_when_given(root, tmp_path):
    path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"  # "schedutil": no integer
    assert root.read_int(path, default=7) == 7
    assert root.read_ints(path, default=[1]) == [1]
    with pytest.raises(HardwareError):
        root.read_int(path)
    with pytest.raises(HardwareError):
        root.read_ints(path)


def test_device_tree_strings_lose_their_nul_and_writes_one_newline(root, tmp_path):
    (tmp_path / "proc/device-tree/model").write_bytes(b"NVIDIA Jetson Nano\x00")
    assert root.read("/proc/device-tree/model") == "NVIDIA Jetson Nano"
    path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    root.write(path, "performance\n")
    assert (tmp_path / path.lstrip("/")).read_bytes() == b"performance\n"


def test_raw_bytes_round_trip_exactly(root, tmp_path):
    """The journal restores byte for byte, also bytes that are not UTF-8."""
    path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    host = tmp_path / path.lstrip("/")
    host.write_bytes(b"\xfe\xff odd\n")
    raw = root.read_raw(path)
    host.write_bytes(b"changed\n")
    root.write_raw(path, raw)
    assert host.read_bytes() == b"\xfe\xff odd\n"


def test_missing_debugfs_file_hints_at_mounting_debugfs(tmp_path):
    (tmp_path / "sys/devices").mkdir(parents=True)
    root = Root(tmp_path)
    with pytest.raises(MissingFile) as info:
        root.read("/sys/kernel/debug/clk/emc/clk_rate")
    assert "mount -t debugfs" in info.value.hint
    with pytest.raises(MissingFile) as info:
        root.read("/sys/devices/nope")
    assert "mount" not in info.value.hint
    (tmp_path / "sys/kernel/debug/clk").mkdir(parents=True)  # debugfs mounted: the file is absent
    with pytest.raises(MissingFile) as info:
        root.read("/sys/kernel/debug/clk/emc/clk_rate")
    assert "mount" not in info.value.hint
