"""One kernel model: the file-based simulated kernel (sim/file_kernel.py) judges the writes it finds
with the FUSE board's own store functions (sim/attributes.py) and shows what they keep. The same
writes, made on a plain tree (then one pass) and through the attributes (as the FUSE server
serves them), leave every knob and current clock reading the same; the expected values are the
drivers' rules worked out by hand for a TX2 (its tables in docs/hardware.md)."""

import pytest

from jetbench.sim.attributes import HostLoad, KernelModel, Refused, read_initial
from jetbench.sim.create import create_board
from jetbench.sim.file_kernel import FileKernel

POLICY = "/sys/devices/system/cpu/cpufreq/policy0"
GPU = "/sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
EMC = "/sys/kernel/debug/bpmp/debug/clk/emc/rate"
FAN = "/sys/devices/pwm-fan/target_pwm"

# Each step: the writes of one pass, in the order they are made, and what must read back after.
# TX2: policy0 345600 .. 2035200 kHz (schedutil); GPU 114.75 .. 1300.5 MHz in 102 MHz steps
# from 114.75; EMC rates 40.8, 204, 665.6, 1062.4, 1331.2, 1600, 1866 MHz within min..max.
STEPS = [
    ("a cap below the top is kept",
     [(f"{POLICY}/scaling_max_freq", "652800")],
     {f"{POLICY}/scaling_max_freq": "652800"}),
    ("going up, max then min in one pass: the order that refuses neither",
     [(f"{POLICY}/scaling_max_freq", "2035200"), (f"{POLICY}/scaling_min_freq", "1881600")],
     {f"{POLICY}/scaling_min_freq": "1881600", f"{POLICY}/scaling_max_freq": "2035200",
      f"{POLICY}/scaling_cur_freq": "1881600"}),  # schedutil, idle: at min
    ("a min above max is refused (EINVAL): the old value reads back",
     [(f"{POLICY}/scaling_min_freq", "3000000")],
     {f"{POLICY}/scaling_min_freq": "1881600"}),
    ("a min below cpuinfo_min_freq is clamped to it",
     [(f"{POLICY}/scaling_min_freq", "100")],
     {f"{POLICY}/scaling_min_freq": "345600", f"{POLICY}/scaling_cur_freq": "345600"}),
    ("an unknown governor is refused",
     [(f"{POLICY}/scaling_governor", "turbo")],
     {f"{POLICY}/scaling_governor": "schedutil"}),
    ("performance runs at max",
     [(f"{POLICY}/scaling_governor", "performance")],
     {f"{POLICY}/scaling_cur_freq": "2035200"}),
    ("a devfreq min below the table is kept as written",
     [(f"{GPU}/min_freq", "1000")],
     {f"{GPU}/min_freq": "1000", f"{GPU}/cur_freq": "114750000"}),
    ("a devfreq cap between two entries: kept as written, the entry below it runs",
     [(f"{GPU}/governor", "performance"), (f"{GPU}/max_freq", "700000000")],
     {f"{GPU}/max_freq": "700000000", f"{GPU}/cur_freq": "624750000"}),
    ("a devfreq max below min is refused",
     [(f"{GPU}/min_freq", "318750000"), (f"{GPU}/max_freq", "216750000")],
     {f"{GPU}/min_freq": "318750000", f"{GPU}/max_freq": "700000000"}),
    ("a BPMP EMC rate between two entries is rounded down",
     [(EMC, "1700000000")],
     {EMC: "1600000000"}),
    ("a BPMP EMC rate below min_rate is refused",
     [(EMC, "5")],
     {EMC: "1600000000"}),
    ("a PWM above 255 is refused",
     [(FAN, "300")],
     {FAN: "0"}),
]


def _through_attributes(model: KernelModel, writes) -> None:
    for path, value in writes:
        try:
            model.attrs[path].store(value)
        except Refused:
            pass


def test_the_file_based_kernel_keeps_what_the_fuse_board_keeps(tmp_path):
    plain, served = tmp_path / "plain", tmp_path / "served"
    create_board("tx2", plain)
    create_board("tx2", served)
    kernel = FileKernel(plain, power=False)
    kernel.sync()
    # The file-based kernel runs a dynamic governor (schedutil) as idle; so does a FUSE board
    # on an idle host (the served one reads the host's load): both at load 0 here.
    model = KernelModel(kernel.board, read_initial(served), load=HostLoad(fixed=0.0))
    watched = sorted({path for _, writes, want in STEPS
                      for path in [p for p, _ in writes] + list(want)})
    for name, writes, want in STEPS:
        for path, value in writes:
            (plain / path.lstrip("/")).write_text(f"{value}\n")
        kernel.sync()
        _through_attributes(model, writes)
        on_file = {p: (plain / p.lstrip("/")).read_text().strip() for p in watched}
        served_now = {p: model.attrs[p].show() for p in watched}
        assert on_file == served_now, name
        assert {p: on_file[p] for p in want} == want, name


@pytest.mark.parametrize("first", ["min", "max"])
def test_a_pin_going_down_is_accepted_whichever_write_the_pass_sees_first(tmp_path, first):
    """Going down, the kernel needs min written before max; the file-based board cannot tell
    which came first and takes the order that refuses neither."""
    base = tmp_path / "b"
    create_board("tx2", base)
    kernel = FileKernel(base, power=False)
    kernel.sync()
    values = {"min": "499200", "max": "499200"}
    for key in (first, "max" if first == "min" else "min"):
        (base / POLICY.lstrip("/") / f"scaling_{key}_freq").write_text(values[key] + "\n")
    kernel.sync()
    policy = base / POLICY.lstrip("/")
    assert (policy / "scaling_min_freq").read_text().strip() == "499200"
    assert (policy / "scaling_max_freq").read_text().strip() == "499200"
    assert (policy / "scaling_cur_freq").read_text().strip() == "499200"


def test_a_knob_left_empty_by_a_killed_writer_waits_for_its_value(tmp_path):
    """kill -9 between jetbench's truncate and write leaves a knob empty: the file-based
    kernel started on that tree (by `restore`) must not fail; once the value is written back,
    its next pass runs the clocks from it."""
    base = tmp_path / "b"
    create_board("tx2", base)
    gpu = base / GPU.lstrip("/")
    (gpu / "max_freq").write_text("")
    kernel = FileKernel(base, power=False)
    kernel.sync()  # no state to start from: nothing judged, nothing raised
    (gpu / "max_freq").write_text("624750000\n")
    (gpu / "governor").write_text("performance\n")
    kernel.sync()
    assert (gpu / "cur_freq").read_text().strip() == "624750000"
