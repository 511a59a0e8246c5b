"""`jetbench tune` on simulated boards (sim:alexnet, whose speed follows the simulated clocks):
a real Optuna study of real measure points; resumed after kill -9; two boards on one study;
the answer chosen only among valid points that meet the constraints."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import pytest

from jetbench.errors import UsageError
from jetbench.run.tune.choice import choose_best
from jetbench.run.tune.options import Constraint

from conftest import REPO, bound_s, make_board

pytest.importorskip("optuna")

ENV = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
WINDOW = ("--duration", "0.3", "--warmup", "0.1", "--iterations", "3")
GPU_DEVFREQ = "sys/devices/57000000.gpu/devfreq/57000000.gpu"  # tx1 (docs/hardware.md)


def _tune(base: Path, out: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jetbench", "--root", str(base), "tune",
                             "--model", "sim:alexnet", *WINDOW, "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            **kw)


def _done(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def _gpu_knobs(base: Path):
    return [(base / GPU_DEVFREQ / f).read_text() for f in ("min_freq", "max_freq")]


@pytest.mark.long
def test_a_study_finds_a_feasible_point_writes_its_files_and_a_profile_apply_pins(tmp_path,
                                                                                  started):
    base = make_board(tmp_path, "tx1")
    before = _gpu_knobs(base)
    out = tmp_path / "tuned"
    _done(_tune(base, out, "--knobs", "gpu,emc", "--constraint", "images_per_s>=20",
                "--budget", "6", "--seed", "3", "--save-profile", "tx1-tuned"))
    doc = json.loads((out / "tune.json").read_text())
    assert doc["simulated"] is True and len(doc["trials"]) == 6
    table = [int(x) for x in (base / GPU_DEVFREQ / "available_frequencies").read_text().split()]
    assert doc["space"]["gpu"] == sorted(table)
    # EMC: the kernel lists no rates on a TX1, so each candidate was pinned and replaced by
    # the rate the (simulated) clock framework ran: only rates that really run are searched
    assert 1_600_000_000 in doc["space"]["emc"] and len(doc["space"]["emc"]) >= 3
    best = doc["best"]
    assert best["valid"] and best["feasible"] and best["metrics"]["images_per_s"] >= 20
    # the best point by its readings' mean (the last trials read the best points again)
    means = {}
    for t in doc["trials"]:
        if t["feasible"]:
            means.setdefault(json.dumps(t["settings"], sort_keys=True), []).append(
                t["metrics"]["images_per_j"])
    top = max(sum(v) / len(v) for v in means.values())
    assert best["metrics"]["images_per_j"] == pytest.approx(top)
    assert any(t["confirms"] for t in doc["trials"])  # 6 // 5 = 1 reading again
    for t in doc["trials"]:  # a trial is a real measure point with its own result file
        assert Path(t["result"]).is_file()
    assert (out / "pareto.png").stat().st_size > 10_000
    assert (out / "study.db").is_file()
    assert _gpu_knobs(base) == before  # every trial restored the board
    assert not (base / "var/lib/jetbench/journal.json").exists()
    profile = base / "etc/jetbench/profiles/tx1-tuned.toml"
    text = profile.read_text()
    assert "images_per_s>=20" in text and "sim:alexnet" in text
    applied = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "apply",
                              "tx1-tuned"], capture_output=True, text=True, env=ENV, timeout=120)
    assert applied.returncode == 0, applied.stderr
    gpu = str(best["settings"]["gpu_hz"])
    assert [k.strip() for k in _gpu_knobs(base)] == [gpu, gpu]
    restored = subprocess.run([sys.executable, "-m", "jetbench", "--root", str(base), "restore"],
                              capture_output=True, text=True, env=ENV, timeout=120)
    assert restored.returncode == 0 and _gpu_knobs(base) == before, restored.stderr
    # and the daemon holds it
    from helpers.daemons import Daemon

    daemon = Daemon(tmp_path, base, "--profile", "tx1-tuned")
    started.append(daemon)
    daemon.ready()
    assert daemon.ask("status")["profile"] == "tx1-tuned"
    assert [k.strip() for k in _gpu_knobs(base)] == [gpu, gpu]


def _trials(db: Path):
    """The study's trial states; none while Optuna is still creating its tables."""
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT state FROM trials").fetchall()
    except sqlite3.OperationalError:  # "no such table" (or locked) while it starts
        return []


@pytest.mark.long
def test_a_killed_study_resumes_and_the_board_is_restored_first(tmp_path):
    base = make_board(tmp_path, "tx1")
    before = _gpu_knobs(base)
    out = tmp_path / "tuned"
    proc = _tune(base, out, "--knobs", "gpu", "--budget", "6", "--seed", "1")
    deadline = time.monotonic() + bound_s(120)
    journal = base / "var/lib/jetbench/journal.json"
    # kill -9 in the middle of a trial: after one finished, while the next holds its pin
    while time.monotonic() < deadline:
        if (out / "study.db").exists() and len(_trials(out / "study.db")) >= 2 \
                and journal.exists():
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    states = [s for (s,) in _trials(out / "study.db")]
    assert "RUNNING" in states, states  # killed inside a trial
    second = _done(_tune(base, out, "--knobs", "gpu", "--budget", "6", "--seed", "1"))
    doc = json.loads((out / "tune.json").read_text())
    assert len(doc["trials"]) >= 6
    assert [t["state"] for t in doc["trials"]].count("FAIL") == states.count("RUNNING")
    # the interrupted trial is not counted: the budget's 6 trials all ran to their end
    assert sum(t["state"] == "COMPLETE" for t in doc["trials"]) == 6
    assert doc["best"] is not None and "SIMULATED" in second
    assert _gpu_knobs(base) == before and not journal.exists()


def _two_boards_tune(tmp_path: Path, storage: str, read: str) -> dict:
    """Two simulated TX1s tuning study 'fleet' in `storage` at once; board `read`'s tune.json."""
    a, b = make_board(tmp_path / "a", "tx1"), make_board(tmp_path / "b", "tx1")
    common = ("--knobs", "gpu", "--budget", "6", "--storage", storage, "--study", "fleet")
    procs = [_tune(base, tmp_path / f"out-{base.parent.name}", *common) for base in (a, b)]
    for proc in procs:
        _done(proc)
    return json.loads((tmp_path / f"out-{read}" / "tune.json").read_text())


def test_two_boards_work_on_one_study(tmp_path):
    doc = _two_boards_tune(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}", "b")
    # the finished trials' boards (a trial the other board has just started has none yet)
    boards = {t["board"] for t in doc["trials"] if t["state"] == "COMPLETE"}
    assert len(boards) == 2 and all(str(tmp_path) in name for name in boards), boards
    # the study stops at its budget: a board does not start a trial that the other's running
    # one would take past it (it was 7 of 6 at times)
    assert sum(t["state"] == "COMPLETE" for t in doc["trials"]) == 6


def _postgres_bin() -> Optional[Path]:
    """The folder of PostgreSQL's server programs: on PATH, else Debian's versioned folder."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                     key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return next((f for f in reversed(folders) if (f / "initdb").is_file()), None)


@pytest.fixture
def postgres():
    """A PostgreSQL server of its own, on a Unix socket only (no TCP, nothing outside the
    sandbox): initdb, pg_ctl start, its storage URL, then stop and remove. PostgreSQL refuses
    to run as root, so under root it runs as `nobody` in a folder given to it."""
    folder = _postgres_bin()
    if folder is None or not (folder / "pg_ctl").is_file():
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed here (Debian: sudo apt-get "
                    "install postgresql; `make test` installs it as root)")
    pytest.importorskip("psycopg2", reason="psycopg2-binary (Python 3.9+ in the dev extra) "
                        "is not installed")
    place = Path(tempfile.mkdtemp(prefix="jetbench-pg-"))  # not tmp_path: 0700, root's
    run_as = {}
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(place, nobody.pw_uid, nobody.pw_gid)
        run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}

    def pg(*args: str) -> None:
        done = subprocess.run([str(folder / args[0]), *args[1:]], cwd=place, env=env,
                              capture_output=True, text=True, timeout=120, **run_as)
        assert done.returncode == 0, f"{args[0]}: {done.stdout}{done.stderr}"

    data = place / "data"
    try:
        pg("initdb", "-D", str(data), "-U", "jetbench", "-A", "trust", "-E", "UTF8",
           "--no-sync")
        pg("pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(place / "server.log"),
           "-o", f"-k {place} -c listen_addresses= -F", "start")
        try:
            yield f"postgresql+psycopg2://jetbench@/postgres?host={place}"
        finally:
            pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.postgresql
def test_two_boards_share_one_postgresql_study(tmp_path, postgres):
    """Optuna's distributed mode on a real database server: two boards, one study, each trial
    recorded with the board that ran it, the study readable from the database afterwards."""
    import optuna

    doc = _two_boards_tune(tmp_path, postgres, "a")
    # the finished trials' boards (a trial the other board has just started has none yet)
    boards = {t["board"] for t in doc["trials"] if t["state"] == "COMPLETE"}
    assert len(boards) == 2 and all(str(tmp_path) in name for name in boards), boards
    study = optuna.load_study(study_name="fleet", storage=postgres)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 6
    assert {t.user_attrs["board"] for t in complete} == boards


@pytest.mark.postgresql
@pytest.mark.long
def test_a_board_killed_mid_trial_has_its_point_measured_by_another(tmp_path, postgres):
    """A fleet that loses nothing: board a is killed -9 inside a trial (its clocks pinned);
    its trial stops beating, board b fails it once the grace period has passed, measures the
    same point again itself, and the study ends with its whole budget, no trial left waiting.
    Board a, back, puts its own clocks back and finds the study done."""
    import optuna

    a, b = make_board(tmp_path / "a", "tx1"), make_board(tmp_path / "b", "tx1")
    before = _gpu_knobs(a)
    common = ("--knobs", "gpu", "--budget", "6", "--storage", postgres, "--study", "fleet",
              "--heartbeat", "1", "--seed", "3")
    first = _tune(a, tmp_path / "out-a", *common)
    second = _tune(b, tmp_path / "out-b", *common)
    journal = a / "var/lib/jetbench/journal.json"
    deadline = time.monotonic() + bound_s(120)
    while not journal.exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    _, err = first.communicate(timeout=30)
    assert journal.exists(), f"board a was not killed inside a trial: {err}"
    _done(second)
    study = optuna.load_study(study_name="fleet", storage=postgres)
    trials = study.get_trials()
    dead = [t for t in trials if t.state.name == "FAIL"]
    assert len(dead) == 1 and dead[0].user_attrs["board"].endswith(str(a)), dead
    again = [t for t in trials if dead[0].number in t.user_attrs.get("retry_of", [])]
    assert len(again) == 1 and again[0].state.name == "COMPLETE", again
    assert again[0].params == dead[0].params and again[0].user_attrs["board"].endswith(str(b))
    assert sum(t.state.name == "COMPLETE" for t in trials) == 6
    assert not [t for t in trials if t.state.name in ("WAITING", "RUNNING")]
    doc = json.loads((tmp_path / "out-b" / "tune.json").read_text())
    assert sum(t["state"] == "COMPLETE" for t in doc["trials"]) == 6
    back = _tune(a, tmp_path / "out-a", *common)
    _, said = back.communicate(timeout=bound_s(120))
    assert back.returncode == 0 and "restored from the journal" in said, said
    assert _gpu_knobs(a) == before and not journal.exists()


def _trial(number, ipj, watts, valid=True, violations=(0.0,), pct=None, state="COMPLETE"):
    return SimpleNamespace(number=number, state=SimpleNamespace(name=state), user_attrs={
        "valid": valid, "constraints": list(violations),
        "metrics": {"images_per_j": ipj, "power_w": watts, "images_per_s": 10.0,
                    "images_per_j_uncertainty_pct": pct}})


def test_the_best_is_never_invalid_or_infeasible_and_a_tie_goes_to_less_power():
    invalid = _trial(0, 99.0, 1.0, valid=False, violations=(0.0, 1.0))
    breaks = _trial(1, 50.0, 1.0, violations=(3.0, 0.0))
    failed = _trial(2, 80.0, 1.0, state="FAIL")
    ok = _trial(3, 10.0, 5.0)
    def best(*trials):
        chosen = choose_best(list(trials), "images_per_j")
        return None if chosen is None else chosen.number

    assert best(invalid, breaks, failed, ok) == 3
    # 10.0 +- 5% and 10.4 +- 5% overlap: a tie, and the cheaper in power wins
    cheap = _trial(4, 10.0, 4.0, pct=5.0)
    fast = _trial(5, 10.4, 6.0, pct=5.0)
    assert best(cheap, fast) == 4
    apart = _trial(6, 12.0, 6.0, pct=1.0)
    assert best(cheap, apart) == 6
    unknown = _trial(7, 10.4, 6.0, pct=None)  # no stated uncertainty: no tie is claimed
    assert best(cheap, unknown) == 7
    assert best(invalid) is None
    # a point read twice counts by its mean: 12 then 8 is 10, below a steady 11
    lucky = [_trial(8, 12.0, 5.0), _trial(9, 8.0, 5.0)]
    for t in lucky:
        t.user_attrs["settings"] = {"gpu_hz": 1}
    steady = _trial(10, 11.0, 5.0)
    assert best(*lucky, steady) == 10


def _read(number, gpu_hz, ips, watts, ips_pct=None):
    """A command's reading: its rate states no uncertainty unless `ips_pct` is given."""
    metrics = {"images_per_s": ips, "power_w": watts, "images_per_j": ips / watts,
               "images_per_s_uncertainty_pct": ips_pct, "power_w_uncertainty_pct": 1.0,
               "images_per_j_uncertainty_pct": None if ips_pct is None else ips_pct + 1.0}
    floor = Constraint.parse("images_per_s>=100")
    return SimpleNamespace(number=number, state=SimpleNamespace(name="COMPLETE"), user_attrs={
        "valid": True, "metrics": metrics, "settings": {"gpu_hz": gpu_hz},
        "constraints": [floor.violation(metrics), 0.0]})


def test_a_rate_with_no_stated_uncertainty_takes_the_read_to_read_spread_once_seen():
    """Issue 38: a command's rate (trtexec's line) states no uncertainty, so a floor inside its
    read-to-read noise was a coin flip. Once a point has been read twice, the spread of the
    study's re-reads is every such point's uncertainty (over sqrt(readings))."""
    from jetbench.run.tune.choice import _pooled, read_to_read_pct
    from jetbench.run.tune.output import _closest
    from jetbench.sampling.uncertainty import pooled_sd_pct

    # one reading's relative standard deviation, pooled: (n-1) degrees of freedom per group
    assert pooled_sd_pct([[99.0, 101.0]]) == pytest.approx(100 * 2 ** 0.5 / 100)
    assert pooled_sd_pct([[99.0, 101.0], [50.0, 50.0, 50.0]]) == pytest.approx(
        100 * (2 * 0.01 ** 2 / 3) ** 0.5)
    assert pooled_sd_pct([[7.0], []]) is None and pooled_sd_pct([[0.0, 0.0]]) is None
    floor = (Constraint.parse("images_per_s>=100"),)
    steady = [_read(0, 1, 110.0, 10.0), _read(1, 1, 108.9, 10.0)]  # read twice: ~0.7% apart
    edge = _read(2, 2, 100.5, 8.0)  # the most per joule, 0.5% over the floor, read once
    assert edge.user_attrs["constraints"][0] < 0  # met by its value alone, as the trial said
    spread = read_to_read_pct([steady, [edge]])
    assert spread["images_per_s"] == pytest.approx(100 * 1.1 / 2 ** 0.5 / 109.45, rel=1e-6)
    assert "power_w" not in spread  # stated (1%): never replaced
    points = _pooled([*steady, edge], floor)
    once = points['{"gpu_hz": 2}']
    assert once.metrics["images_per_s_uncertainty_pct"] == pytest.approx(spread["images_per_s"])
    assert not once.feasible  # 100.5 - 0.71%: not surely >= 100
    twice = points['{"gpu_hz": 1}']
    assert twice.feasible and twice.metrics["images_per_s_uncertainty_pct"] == pytest.approx(
        spread["images_per_s"] / 2 ** 0.5)
    assert choose_best([*steady, edge], "images_per_j").number == 2  # no constraints given
    assert choose_best([*steady, edge], "images_per_j", floor).number == 1
    # before any point was read twice: by the value alone, as before
    assert choose_best([steady[0], edge], "images_per_j", floor).number == 2
    # a rate that states its uncertainty keeps it (0.1%: 100.5 is surely over the floor)
    stated = [_read(0, 1, 110.0, 10.0, 0.1), _read(1, 1, 108.9, 10.0, 0.1),
              _read(2, 2, 100.5, 8.0, 0.1)]
    assert choose_best(stated, "images_per_j", floor).number == 2
    # the closest, when nothing else is left, says it missed only within that spread
    closest = _closest([*steady[:0], edge, _read(3, 2, 99.9, 8.0)], floor,
                       lambda t: {"number": t.number})
    assert closest is not None and closest["missed"][0].startswith("images_per_s 100 +- 0.")
    assert closest["missed"][0].endswith(">=100 only within its uncertainty")


def test_a_p99_latency_near_its_ceiling_takes_the_read_to_read_spread_once_seen():
    """Issue 38: a p99 latency states no uncertainty; from a short window it is nearly the
    maximum of a few batches, and a point a few percent under a ceiling read over it when
    measured again (a simulated Xavier NX at 10 W: 14.6 ms one study, 16.4 ms the next, against
    15.22 ms). Once a point has been read twice, the re-reads' spread is its uncertainty too."""
    from jetbench.run.tune.choice import _pooled, read_to_read_pct

    ceiling = (Constraint.parse("latency_p99_ms<=15"),)

    def reading(number, gpu_hz, p99, ipj):
        t = _read(number, gpu_hz, 100.0 * ipj, 100.0, ips_pct=0.5)
        t.user_attrs["metrics"]["latency_p99_ms"] = p99
        t.user_attrs["constraints"] = [ceiling[0].violation(t.user_attrs["metrics"])]
        return t

    steady = [reading(0, 1, 12.0, 10.0), reading(1, 1, 13.0, 10.0)]  # read twice: 5.4% apart
    edge = reading(2, 2, 14.6, 12.0)  # the most per joule, 2.7% under the ceiling, read once
    assert read_to_read_pct([steady, [edge]])["latency_p99_ms"] == pytest.approx(
        100 * 0.5 * 2 ** 0.5 / 12.5, rel=1e-6)
    points = _pooled([*steady, edge], ceiling)
    assert not points['{"gpu_hz": 2}'].feasible  # 14.6 ms + 5.7%: not surely <= 15
    assert points['{"gpu_hz": 1}'].feasible  # 12.5 ms + 4%
    assert choose_best([*steady, edge], "images_per_j", ceiling).number == 1
    # before any point was read twice: by the value alone
    assert choose_best([steady[0], edge], "images_per_j", ceiling).number == 2
    # read again on a long window (more batches): the point's p99 is the long window's, and
    # the short one's lower reading counts in the spread, not in the value
    thin, thick = reading(3, 3, 14.0, 12.0), reading(4, 3, 14.6, 12.0)
    thin.user_attrs["batches"], thick.user_attrs["batches"] = 20, 100
    point = _pooled([thin, thick], ceiling)['{"gpu_hz": 3}']
    assert point.metrics["latency_p99_ms"] == pytest.approx(14.6)
    assert point.metrics["latency_p99_ms_uncertainty_pct"] == pytest.approx(
        100 * 0.3 * 2 ** 0.5 / 14.3, rel=1e-6)  # one reading's SD over sqrt(1 long reading)
    assert not point.feasible  # 14.6 ms + 3.0% > 15


def test_points_read_on_one_board_are_compared_without_the_meters_own_error():
    """The simulated Orin Nano at 7 W, ResNet-50 b1 FP16, three CPU clocks (their grid's
    readings): 6.55, 6.19 and 5.74 img/J at 7.49, 7.40 and 7.40 W, each +-4.8% of which 4.7%
    is the INA3221's datasheet limits. With those limits a tie, and 5.74 won on 0.1 W; read on
    one board the limits cancel (a gain) or nearly (an offset of the same watts): 6.55 wins."""
    def reading(number, ipj, watts, board="orin-nano-a", sensor=4.7):
        t = _trial(number, ipj, watts, pct=4.8)
        t.user_attrs["metrics"]["images_per_j_sensor_pct"] = sensor
        t.user_attrs["board"] = board
        t.user_attrs["settings"] = {"gpu_hz": number}
        return t

    def best(*trials):
        return choose_best(list(trials), "images_per_j").number

    top, step, two = reading(1, 6.554, 7.49), reading(2, 6.192, 7.401), reading(3, 5.742, 7.396)
    assert best(top, step, two) == 1
    # within what differs from one reading to the next (0.1% here), still a tie: less power
    assert best(reading(4, 6.56, 7.49), reading(5, 6.554, 7.40)) == 5
    # read on two boards (two meters, two calibrations): the whole 4.8% counts, as before
    assert best(top, reading(6, 6.192, 7.401, board="orin-nano-b")) == 6
    # a meter whose limits are unknown leaves the stated uncertainty alone
    assert best(top, reading(7, 6.192, 7.401, sensor=None)) == 7
    # a point read more than once: the study's read-to-read spread of img/J counts (6.3 then
    # 6.8: one reading's SD is 5.4%, so 6.55 +- 3.8% over two readings, 6.19 +- 5.4% over
    # one): they overlap, a tie again, and less power wins
    again = [reading(8, 6.3, 7.49), reading(9, 6.8, 7.49)]
    for t in again:
        t.user_attrs["settings"] = {"gpu_hz": 8}
    assert best(*again, step) == 2


def test_the_answer_says_why_this_point():
    from jetbench.run.tune.choice import why_best

    def why(*trials):
        return why_best(list(trials), "images_per_j")

    cheap, fast = _trial(4, 10.0, 4.0, pct=5.0), _trial(5, 10.4, 6.0, pct=5.0)
    # 10.4 +- 5% and 10.0 +- 5% overlap: the cheaper wins, and the line says so
    assert why(cheap, fast) == ("tie with trial 6 within 3.8% (their uncertainties overlap): "
                                "less power wins")
    apart = _trial(6, 12.0, 6.0, pct=1.0)
    assert why(cheap, apart) == "20.0% more img/s/W than trial 5, beyond both uncertainties"
    unknown = _trial(7, 10.4, 6.0, pct=None)
    # issue 61: an unknown uncertainty is no verdict, as every comparison says it
    assert why(cheap, unknown) == ("no verdict against trial 5: an uncertainty is unknown (it "
                                   "reads 4.0% more img/s/W, the highest measured)")
    assert why(cheap) == "the only feasible point"
    assert why(_trial(0, 99.0, 1.0, valid=False)) == ""


def test_constraints_and_options_are_checked_before_any_work(tmp_path):
    assert Constraint.parse("images_per_s>=30").violation({"images_per_s": 31.0}) < 0
    assert Constraint.parse("latency_p99_ms<=40").violation({"latency_p99_ms": 45.0}) == 5.0
    with pytest.raises(UsageError):
        Constraint.parse("speed>=3")
    base = make_board(tmp_path, "tx1")
    for bad in (("--objective", "speed"), ("--constraint", "img>3"), ("--knobs", "fan"),
                ("--budget", "0"), ("--freq", "691MHz")):
        out = tmp_path / f"out-{bad[0][2:]}"
        proc = _tune(base, out, *bad)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (bad, err)
        assert "error" in err.lower() and "Traceback" not in err, (bad, err)
        assert not out.exists(), bad  # a usage error creates nothing
