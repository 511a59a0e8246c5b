"""Issue 56 (the clock that runs), the cases a review found by trying the issue as a user would:
each failed at 0b7e0af (the first pass of the issue) and passes since. Expected clocks from the
simulated boards' tables (docs/hardware.md): Xavier NX in mode 4 caps the GPU at 800 MHz, so
675.75 MHz runs (the highest allowed entry; hardware max 1100.25 MHz); the Nano in mode 1 (5 W)
runs 614.4 MHz (hardware max 921.6 MHz). The NX EMC (bpmp) has min_rate 204 MHz and max_rate
1866 MHz; nvpmodel's emc_iso_cap in mode 4 is 1.6 GHz.
"""

from __future__ import annotations

import json

import pytest

from jetbench.hw.fs import Root
from jetbench.ownership.lock import BoardLock

from conftest import cli, make_board

# no power meter: these tests are about clocks, and a loaded host can leave a 0.2 s power
# window under its coverage bound (exit 3), which is not what they test
QUICK = ("--iterations", "2", "--duration", "0.2s", "--warmup", "0s", "--meter", "none")


def one_doc(out):
    [path] = out.glob("*.json")
    return path, json.loads(path.read_text())


# 1. `apply` of any profile with a number for a clock crashes after writing (rich cannot render
#    the int request): the built-in tx1-690mhz, a TOML, tune --save-profile's output, --dry-run.
@pytest.mark.parametrize("dry", [False, True])
def test_apply_a_profile_with_a_numeric_clock_does_not_crash(tmp_path, dry):
    base = make_board(tmp_path, "xavier-nx", 4)
    toml = tmp_path / "p600.toml"
    toml.write_text('[gpu]\nfreq = "600MHz"\n')
    r = cli(base, "apply", str(toml), *(["--dry-run"] if dry else []))
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 0, r.output
    assert "624.8 MHz" in r.output  # the resolved column: the clock that runs


# 2. A GPU clock pinned by --profile (not --freq) is missing from the file name (and the
#    progress line): `measure --profile maxperf` on a Nano in 5 W writes sim_alexnet-fp32-b1.json
#    although the table says GPU clock (runs) 614.4 MHz.
def test_a_profile_pinned_gpu_clock_is_named_in_the_file_name(tmp_path):
    base, out = make_board(tmp_path, "nano", 1), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--profile", "maxperf", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    path, doc = one_doc(out)
    assert doc["settings"]["resolved"]["gpu_hz"] == 614_400_000
    assert path.name == "sim_alexnet-fp32-b1-gpu614mhz.json"


# 3. --freq overriding a profile: the note blames the profile for the user's --freq.
def test_a_freq_override_note_names_the_option_not_the_profile(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--profile", "maxperf",
            "--freq", "600MHz", *QUICK, "--out", str(out))
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "--freq 600 MHz -> 624.8 MHz" in text
    assert "profile maxperf: [gpu] freq 600 MHz" not in text


# 4. --emc-freq is not resolved: the request is 'resolved' to itself, another rate runs, the
#    result is INVALID (exit 3) instead of a note (or a refusal) before measuring.
@pytest.mark.parametrize("emc", ["1GHz", "50MHz"])
def test_an_emc_request_is_resolved_before_measuring(tmp_path, emc):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--emc-freq", emc, *QUICK,
            "--out", str(out))
    assert r.exit_code in (0, 1), r.output  # resolved with a note, or refused at once
    assert "INVALID" not in r.output
    if r.exit_code == 0:
        _, doc = one_doc(out)
        observed = [c["mean_hz"] for c in doc["clocks"]["observed"] if c["domain"] == "emc"]
        assert observed == [doc["settings"]["resolved"]["emc_hz"]]


# 5. A refused request's hint names the hardware's max, a clock this power mode never runs.
@pytest.mark.parametrize("key,mode,option,runs_max,hw_max", [
    ("xavier-nx", 4, "--freq", "675.8 MHz", "1.1 GHz"),
    ("nano", 1, "--freq", "614.4 MHz", "921.6 MHz"),
    ("xavier-nx", 4, "--cpu-freq", "1.19 GHz", "1.907 GHz"),
])
def test_a_below_table_refusal_names_the_modes_max(tmp_path, key, mode, option, runs_max,
                                                   hw_max):
    base = make_board(tmp_path, key, mode)
    r = cli(base, "measure", "--model", "sim:alexnet", option, "50MHz", *QUICK,
            "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert f"max is {runs_max}" in text and hw_max not in text


# 6. docs/clocks.md: a request more than 2% above the cap (800 MHz: above 816 MHz) is refused;
#    one within it is the cap, and the note says what runs for it.
@pytest.mark.parametrize("freq", ["817MHz", "828.75MHz"])
def test_every_request_above_the_cap_is_refused(tmp_path, freq):
    base = make_board(tmp_path, "xavier-nx", 4)
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", freq, *QUICK,
            "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    assert "above the power mode's cap" in " ".join(r.output.split())


def test_a_request_within_the_caps_rounding_runs_what_the_cap_runs_and_says_so(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "815MHz", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "--freq 815 MHz -> 675.8 MHz: power mode 4 MODE_10W_4CORE caps the GPU at 800 MHz" \
        in " ".join(r.output.split())


# 7. sweep and measure resolve one request differently: measure --freq 700MHz runs 675.8 MHz,
#    sweep --freq 700MHz (and its help's own example list 614MHz,691MHz) refuses it as "outside
#    this board's range 114.8 MHz .. 675.8 MHz"; and sweep moves 600 MHz silently.
def test_sweep_resolves_a_list_item_as_measure_does(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "sweep", "--model", "sim:alexnet", "--freq", "700MHz", "--no-plot", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    _, doc = one_doc(out)
    assert doc["settings"]["resolved"]["gpu_hz"] == 675_750_000


def test_sweep_keeps_the_request_and_says_why_it_moved(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "sweep", "--model", "sim:alexnet", "--freq", "600MHz,624.75MHz", "--no-plot",
            *QUICK, "--out", str(out))
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "600 MHz -> 624.8 MHz" in text and "measured once" in text
    _, doc = one_doc(out)
    assert doc["settings"]["requested"]["gpu_hz"] in (600_000_000, 624_750_000)
    assert doc["settings"]["resolved_why"] or doc["settings"]["requested"]["gpu_hz"] \
        == 624_750_000


# 8. sweep range typos: a wrong reason, no option name, no did-you-mean, the text lowercased.
@pytest.mark.parametrize("rng,meant", [
    ("900MHz..300MHz", "300MHz..900MHz"),
    ("300MHz-900MHz", "300MHz..900MHz"),
    ("300MHz..", "300MHz..max"),
    ("al", "all"),
])
def test_a_sweep_range_typo_is_refused_with_what_was_meant(tmp_path, rng, meant):
    base = make_board(tmp_path, "tx1", None)
    with BoardLock(Root(str(base)), "measure"):
        r = cli(base, "sweep", "--model", "sim:alexnet", "--freq", rng,
                "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "--freq" in text and f"did you mean {meant}?" in text, text
    assert "low end above the high end" not in text or rng == "900MHz..300MHz"
    assert rng.lower() not in text or rng == rng.lower()  # quoted as typed


# 9. Words and a bare decimal: no did-you-mean, and a wrong number.
@pytest.mark.parametrize("option,value,meant", [
    ("--cpu-freq", "fast", "max"),
    ("--cpu-freq", "1.2", "1.2GHz"),
])
def test_a_word_or_bare_decimal_gets_a_sensible_did_you_mean(tmp_path, option, value, meant):
    base = make_board(tmp_path, "xavier-nx", 4)
    r = cli(base, "measure", "--model", "sim:alexnet", option, value,
            "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert f"did you mean {meant}?" in text, text
    assert "'1.2' is 1 Hz" not in text


# 10. An empty --freq is silently no pin (exit 0, an unpinned run).
def test_an_empty_freq_is_a_usage_error(tmp_path):
    base = make_board(tmp_path, "xavier-nx", 4)
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "", *QUICK,
            "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output


# 11. measure refuses an impossible clock or an unknown profile only after taking the lock
#     ("board is in use", exit 2 while held; exit 1 when free); sweep checks before the lock.
@pytest.mark.parametrize("args", [("--freq", "2GHz"), ("--profile", "maxpref")])
def test_an_impossible_request_is_refused_even_while_held(tmp_path, args):
    base = make_board(tmp_path, "xavier-nx", 4)
    with BoardLock(Root(str(base)), "measure"):
        r = cli(base, "measure", "--model", "sim:alexnet", *args,
                "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    assert "in use" not in r.output


# 12. A note that says nothing moved: typing the clock jetbench prints gives "X -> X".
def test_a_note_never_reads_x_to_x(tmp_path):
    base, out = make_board(tmp_path, "xavier-nx", 4), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "624.8MHz", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "--freq 624.8 MHz -> 624.8 MHz" not in " ".join(r.output.split())


# 13. A result from before `settings.resolved`: report names the knob (640 MHz) although its own
#     clocks.observed says 614.4 MHz ran; --compare calls the same clock "lower".
def test_report_of_an_older_result_names_the_observed_clock(tmp_path):
    base, out = make_board(tmp_path, "nano", 1), tmp_path / "out"
    r = cli(base, "measure", "--model", "sim:alexnet", "--freq", "max", *QUICK,
            "--out", str(out))
    assert r.exit_code == 0, r.output
    path, doc = one_doc(out)
    doc["settings"].pop("resolved")
    doc["settings"].pop("resolved_why")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    rep = cli(base, "report", str(old))
    assert rep.exit_code == 0, rep.output
    assert "614.4 MHz" in rep.output and "640 MHz" not in rep.output
