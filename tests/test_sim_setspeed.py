"""The file-based simulated kernel and `scaling_setspeed`: a kernel shows `<unsupported>` there
under any governor but userspace; the simulation must hide a leftover number without ever
undoing a pin that began while it was looking (a CI run once read its own write back as '')."""

from jetbench.hw.fs import Root
from jetbench.sim import file_kernel as sim_kernel
from jetbench.sim.create import create_board
from jetbench.sim.file_kernel import FileKernel

POLICY = "/sys/devices/system/cpu/cpufreq/policy8"


def _board(tmp_path):
    base = tmp_path / "b"
    create_board("orin-agx-jp7", base)
    return base, Root(base)


def test_a_number_left_under_schedutil_is_hidden(tmp_path):
    base, root = _board(tmp_path)
    root.write(f"{POLICY}/scaling_governor", "userspace")
    root.write(f"{POLICY}/scaling_setspeed", "2201600")
    FileKernel(base).sync()
    assert root.read(f"{POLICY}/scaling_setspeed") == "2201600"  # pinned: shown as written
    root.write(f"{POLICY}/scaling_governor", "schedutil")  # restored: the number is stale
    FileKernel(base).sync()
    assert root.read(f"{POLICY}/scaling_setspeed") == "<unsupported>"


def test_a_pin_made_between_the_simulations_reads_is_left_alone(tmp_path, monkeypatch):
    """The interleaving of the CI failure: the simulation reads the governor (schedutil), then
    jetbench writes userspace and the speed, then the simulation reads the speed."""
    base, root = _board(tmp_path)
    real_read = sim_kernel._read
    speed_reads = []

    def pin_before_the_speed_is_read(path):
        if str(path).endswith("policy8/scaling_setspeed"):
            speed_reads.append(path)
            if len(speed_reads) == 2:  # the first is the mid-write check, before the governor
                root.write(f"{POLICY}/scaling_governor", "userspace")
                root.write(f"{POLICY}/scaling_setspeed", "2201600")
        return real_read(path)

    monkeypatch.setattr(sim_kernel, "_read", pin_before_the_speed_is_read)
    FileKernel(base).sync()
    assert len(speed_reads) >= 2
    assert root.read(f"{POLICY}/scaling_setspeed") == "2201600"


def test_hiding_never_truncates_and_checks_again_before_writing(tmp_path, monkeypatch):
    base, root = _board(tmp_path)
    policy = base / POLICY.lstrip("/")

    def no_truncate(*args):
        raise AssertionError("a reader could see the file empty")

    monkeypatch.setattr(sim_kernel.os, "ftruncate", no_truncate)
    root.write(f"{POLICY}/scaling_setspeed", "2201600")
    root.write(f"{POLICY}/scaling_governor", "userspace")  # a pin began after the look
    sim_kernel._hide_setspeed(policy, "2201600")
    assert root.read(f"{POLICY}/scaling_setspeed") == "2201600"
    root.write(f"{POLICY}/scaling_governor", "schedutil")
    sim_kernel._hide_setspeed(policy, "1984000")  # not what is there now: left alone
    assert root.read(f"{POLICY}/scaling_setspeed") == "2201600"
    sim_kernel._hide_setspeed(policy, "2201600")
    assert root.read(f"{POLICY}/scaling_setspeed") == "<unsupported>"


def test_a_speed_left_empty_by_a_killed_writer_reads_as_the_kernel_shows_it(tmp_path):
    """`kill -9` between jetbench's truncate and its write of the speed, then `restore` (which
    puts the governor back and never writes `<unsupported>`): the file must not stay empty
    (a reliability run beside two burners found it so). While the governor reads userspace
    an empty speed is a write in flight and is left alone."""
    base, root = _board(tmp_path)
    speed = base / POLICY.lstrip("/") / "scaling_setspeed"
    root.write(f"{POLICY}/scaling_governor", "userspace")
    speed.write_text("")  # truncated, the number not yet written
    FileKernel(base).sync()
    assert speed.read_text() == ""
    root.write(f"{POLICY}/scaling_governor", "schedutil")  # restored
    FileKernel(base).sync()
    assert root.read(f"{POLICY}/scaling_setspeed") == "<unsupported>"
