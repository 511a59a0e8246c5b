"""A power mode is the user's budget: under a capped nvpmodel mode, `max` is the mode's max (what
NVIDIA's jetson_clocks pins), cores the mode took offline stay offline, a request above the
caps is refused with the mode's name and the way out, and --beyond-power-mode goes past it with
a warning recorded in the result.

Expected values are NVIDIA's nvpmodel confs as docs/hardware.md and the simulated boards give them:
Nano mode 1 (5W): CPU max 918000 kHz, GPU max 640 MHz (neither a table entry: the Nano's CPU
table has 825600 and 921600 kHz, its GPU 614.4 and 691.2 MHz, so the kernel runs 825.6 MHz and
614.4 MHz, the highest entries not above the caps), cores 2-3 offline; TX2 mode 1 (MAXQ): A57
max 1200000 kHz, GPU 850 MHz, Denver (cpu1-2) offline."""

import json

import pytest
from typer.testing import CliRunner

from jetbench.sim.create import create_board

from conftest import cli, diff, snapshot

runner = CliRunner()
CPU = "sys/devices/system/cpu"
NANO_GPU = "sys/devices/57000000.gpu/devfreq/57000000.gpu"
TX2_GPU = "sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
DERIVED = ("scaling_cur_freq", "cpuinfo_cur_freq", "cur_freq", "target_freq", "clk_rate",
           "emc/rate", "cur_pwm")



def read(base, path):
    return (base / path).read_text().strip()


def board(tmp_path, key, mode):
    base = tmp_path / key
    create_board(key, base, power_mode=mode)
    return base


def settled(snap):
    """Without what the simulated kernel rewrites by itself (current rates, rail readings)."""
    return {k: v for k, v in snap.items() if not k.endswith(DERIVED)
            and not ("input" in k and "/i2c-" in k)}


def test_maxperf_on_a_capped_nano_pins_what_jetson_clocks_pins(tmp_path):
    base = board(tmp_path, "nano", 1)
    before = snapshot(base)
    r = cli(base, "maxperf")
    assert r.exit_code == 0, r.output
    policy = f"{CPU}/cpufreq/policy0"
    # jetson_clocks: min := the mode's max; max untouched
    assert (read(base, f"{policy}/scaling_min_freq"), read(base, f"{policy}/scaling_max_freq")) \
        == ("918000", "918000")
    assert (read(base, f"{NANO_GPU}/min_freq"), read(base, f"{NANO_GPU}/max_freq")) \
        == ("640000000", "640000000")
    # and the clocks run at the highest entries not above the caps, never above them
    assert read(base, f"{policy}/scaling_cur_freq") == "825600"
    assert read(base, f"{policy}/scaling_setspeed") == "825600"
    assert read(base, f"{NANO_GPU}/cur_freq") == "614400000"
    assert "max -> 825.6 MHz: power mode 1 5W caps CPU policy0 at 918 MHz, no table entry" \
        in r.output
    assert "max -> 614.4 MHz: power mode 1 5W caps the GPU at 640 MHz, no table entry" \
        in r.output
    assert read(base, f"{CPU}/cpu2/online") == "0" and read(base, f"{CPU}/cpu3/online") == "0"
    assert cli(base, "restore").exit_code == 0
    assert diff(settled(before), settled(snapshot(base))) == []


def test_maxperf_keeps_a_switched_off_cluster_as_the_mode_left_it(tmp_path):
    base = board(tmp_path, "tx2", 1)
    denver = f"{CPU}/cpufreq/policy1"
    untouched = {p: read(base, f"{denver}/{p}") for p in
                 ("scaling_governor", "scaling_min_freq", "scaling_max_freq")}
    r = cli(base, "maxperf", "--json")
    assert r.exit_code == 0, r.output
    written = {w["path"] for w in json.loads(r.output)["writes"]}
    assert not any("/policy1/" in p or p.endswith(("cpu1/online", "cpu2/online"))
                   for p in written), sorted(written)
    assert {p: read(base, f"{denver}/{p}") for p in untouched} == untouched
    assert read(base, f"{CPU}/cpufreq/policy0/scaling_min_freq") == "1200000"
    assert read(base, f"{TX2_GPU}/min_freq") == "850000000"
    assert read(base, f"{CPU}/cpufreq/policy0/scaling_cur_freq") == "1113600"  # below 1.2 GHz
    assert read(base, f"{TX2_GPU}/cur_freq") == "828750000"  # below 850 MHz


@pytest.mark.parametrize("args", [["measure", "--freq", "921.6MHz"],
                                  ["measure", "--freq", "998MHz", "--cpu-freq", "max"],
                                  ["measure", "--cpu-freq", "1479MHz"]])
def test_a_request_above_the_mode_is_refused_naming_it(tmp_path, args):
    base = board(tmp_path, "nano", 1)
    before = snapshot(base)
    r = cli(base, *args, "--model", "alexnet", "--iterations", "1", "--duration", "0.1s",
            "--warmup", "0s", "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    # the way out fits the board: a simulated board is made in another mode (issue 61)
    assert "mode 1 5W" in r.output and "jetbench sim create --power-mode 0" in r.output, r.output
    assert "--beyond-power-mode" in r.output
    assert diff(settled(before), settled(snapshot(base))) == []
    assert not (base / "var/lib/jetbench/journal.json").exists()


def test_a_sweep_over_all_stops_at_the_cap_and_a_listed_clock_above_is_refused(tmp_path):
    from jetbench.errors import PowerModeCap
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.request import MeasureRequest, parse_selection
    from jetbench.run.sweep import _within_mode

    base = board(tmp_path, "nano", 1)
    b = detect(Root(base))
    table = b.gpu.available_hz
    kept = _within_mode(Root(base), b, MeasureRequest(), parse_selection("all"), table)
    assert max(kept) == 614_400_000 and len(kept) == 8  # 76.8 MHz x 1..8
    with pytest.raises(PowerModeCap, match="mode 1 5W"):
        _within_mode(Root(base), b, MeasureRequest(), parse_selection("614MHz,921MHz"), table)
    beyond = MeasureRequest(beyond_power_mode=True)
    assert _within_mode(Root(base), b, beyond, parse_selection("all"), table) == table


def test_beyond_power_mode_goes_past_it_and_says_so(tmp_path):
    base = board(tmp_path, "nano", 1)
    r = cli(base, "maxperf", "--beyond-power-mode")
    assert r.exit_code == 0, r.output
    assert read(base, f"{NANO_GPU}/min_freq") == "921600000"
    assert read(base, f"{CPU}/cpufreq/policy0/scaling_min_freq") == "1479000"
    assert read(base, f"{CPU}/cpu2/online") == "1"
    assert "past power mode 1 5W's caps" in r.output and "cpu2, cpu3 brought online" in r.output


def test_a_result_past_the_mode_records_it(tmp_path):
    base = board(tmp_path, "nano", 1)
    out = tmp_path / "out"
    r = cli(base, "measure", "--freq", "921.6MHz", "--beyond-power-mode", "--model", "alexnet",
            "--iterations", "2", "--duration", "0.2s", "--warmup", "0s", "--out", str(out))
    assert r.exit_code == 0, r.output
    [doc] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    mode = doc["board"]["power_mode"]
    assert (mode["id"], mode["caps_lifted"]) == (1, True)
    assert mode["lifted"] == ["gpu 640 MHz -> 921.6 MHz"]
    assert any("--beyond-power-mode" in w for w in doc["warnings"])


def test_the_mode_caps_come_from_the_journal_after_jetbench_went_past_them(tmp_path):
    """maxperf --beyond-power-mode, then maxperf: max is the mode's again (the journal holds
    the values nvpmodel left), not the hardware max jetbench wrote."""
    base = board(tmp_path, "nano", 1)
    assert cli(base, "maxperf", "--beyond-power-mode").exit_code == 0
    assert cli(base, "maxperf").exit_code == 0
    assert read(base, f"{NANO_GPU}/min_freq") == "640000000"
    assert read(base, f"{CPU}/cpufreq/policy0/scaling_min_freq") == "918000"


@pytest.mark.parametrize("beyond", [False, True])
def test_the_daemon_pins_within_the_mode_unless_started_beyond_it(tmp_path, beyond, started):
    from helpers.daemons import Daemon, board_state

    base = board(tmp_path, "nano", 1)
    before = board_state(base)
    d = Daemon(tmp_path, base, "--profile", "maxperf",
               *(["--beyond-power-mode"] if beyond else []))
    started.append(d)
    d.ready()
    assert read(base, f"{NANO_GPU}/min_freq") == ("921600000" if beyond else "640000000")
    assert read(base, f"{CPU}/cpu2/online") == ("1" if beyond else "0")
    # a maxperf asked of the daemon with --beyond-power-mode: refused, not silently capped
    r = cli(base, "maxperf", "--beyond-power-mode")
    assert r.exit_code == 1 and "start the daemon with --beyond-power-mode" in r.output
    assert d.stop() == 0, d.output()
    assert diff(before, board_state(base)) == []


def test_a_board_without_nvpmodel_keeps_the_hardware_max(tmp_path):
    base = tmp_path / "tx1"
    create_board("tx1-r24", base)
    assert cli(base, "maxperf").exit_code == 0, "TX1 on R24 has no power modes"
    assert not (base / "var/lib/nvpmodel/status").exists()


def test_compare_tells_a_run_past_the_mode_from_one_within_it():
    from jetbench.report.compare import _power_mode

    within = {"board": {"power_mode": {"id": 1, "name": "5W", "text": "1 5W"}}}
    past = {"board": {"power_mode": {"id": 1, "name": "5W", "text": "1 5W",
                                     "caps_lifted": True}}}
    assert _power_mode(within) == "1 5W" and _power_mode(past) == "1 5W, caps lifted"


def test_a_measure_under_caps_that_are_no_table_entry_is_valid_and_says_what_runs(tmp_path):
    """--freq max / --cpu-freq max on a Nano in 5 W: the knobs hold the caps (640 MHz, 918000
    kHz), the clocks run the entries below them (614.4 MHz, 825.6 MHz), and the result says
    both and is valid: the kernel's rounding is not a clock running below its pin."""
    base = board(tmp_path, "nano", 1)
    out = tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "max", "--cpu-freq", "max",
            "--iterations", "2", "--duration", "0.2s", "--warmup", "0s", "--out", str(out))
    assert r.exit_code == 0, r.output
    [doc] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert doc["validity"]["valid"], doc["validity"]
    assert (doc["settings"]["applied"]["gpu_hz"], doc["settings"]["applied"]["cpu_hz"]) \
        == (640_000_000, 918_000_000)
    assert (doc["settings"]["resolved"]["gpu_hz"], doc["settings"]["resolved"]["cpu_hz"]) \
        == (614_400_000, 825_600_000)
    assert any("--cpu-freq max -> 825.6 MHz: power mode 1 5W caps CPU policy0 at 918 MHz"
               in w for w in doc["warnings"])
    assert any("--freq max -> 614.4 MHz: power mode 1 5W caps the GPU at 640 MHz" in w
               for w in doc["warnings"])
    # one clock named everywhere: the file, the result's clock, the table (issue 56)
    assert out.joinpath("sim_alexnet-fp32-b1-gpu614mhz.json").exists()
    assert doc["settings"]["requested"]["gpu_hz"] == "max"
    assert "614.4 MHz" in r.output and "640 MHz" not in r.output.split("note")[0]


def test_policies_sharing_a_cap_are_noted_once(tmp_path):
    """Thor in 120 W: 14 one-core policies, each capped at 2 GHz (no entry: 1.836 GHz runs),
    are one note, not fourteen."""
    base = board(tmp_path, "thor", 1)
    r = cli(base, "maxperf", "--dry-run")
    assert r.exit_code == 0, r.output
    assert r.output.count("max -> 1.836 GHz: power mode 1 120W caps CPU") == 1, r.output
    assert r.output.count("max -> 1.377 GHz: power mode 1 120W caps the GPU at 1.4 GHz") \
        == 1, r.output


def test_the_way_out_on_a_board_is_nvpmodel():
    """On hardware the way out of a mode is nvpmodel (the MAXN mode its conf names)."""
    from jetbench.hw.mode_caps import ModeCaps
    from jetbench.hw.nvpmodel import PowerMode

    caps = ModeCaps(PowerMode(1, "5W"), {}, 640_000_000, (), 0)
    assert "`sudo nvpmodel -m 0`" in caps.way_out()
    assert "jetbench sim create --power-mode 0" in \
        ModeCaps(PowerMode(1, "5W"), {}, 640_000_000, (), 0, simulated=True).way_out()


def test_a_tuned_profile_records_its_mode_and_apply_in_another_mode_says_so(tmp_path):
    """Issue 61, 5: a profile from `tune --save-profile` recorded neither the power mode it
    was tuned in nor the caps that bound it; applied in another mode it held a point found
    elsewhere, silently."""
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.run.tune.output import mode_caps_text, profile_text

    base = board(tmp_path, "nano", 1)  # 5W: cpu2-3 off, CPU 918000 kHz, GPU 640 MHz
    brd = detect(Root(base))
    caps = mode_caps_text(Root(base), brd)
    assert caps == ["cpu policy0 918 MHz", "gpu 640 MHz", "cpu2 offline", "cpu3 offline"]
    doc = {"best": {"settings": {"model": "m", "precision": "fp32", "batch": 1,
                                 "gpu_hz": 614_400_000}, "metrics": {"images_per_j": 1.0}},
           "space": {"gpu": [614_400_000]}, "created": "x", "study": "s",
           "objectives": ["images_per_j"], "constraints": [], "simulated": True}
    text = profile_text(doc, brd, "tuned5w", caps)
    assert 'power_mode = "1 5W"' in text and "power_mode_id = 1" in text
    prof = base / "etc/jetbench/profiles"
    prof.mkdir(parents=True, exist_ok=True)
    (prof / "tuned5w.toml").write_text(text)
    maxn = board(tmp_path / "maxn", "nano", None)  # the same profile on a board in MAXN
    (maxn / "etc/jetbench/profiles").mkdir(parents=True, exist_ok=True)
    (maxn / "etc/jetbench/profiles/tuned5w.toml").write_text(text)
    r = cli(maxn, "apply", "tuned5w", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "was tuned in power mode 1 5W" in r.output and "mode 0 MAXN now" in r.output
    r = cli(base, "apply", "tuned5w", "--dry-run")
    assert "was tuned in power mode" not in r.output  # the same mode: nothing to say
