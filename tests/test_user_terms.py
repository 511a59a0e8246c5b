"""Messages in the user's terms (issue 27.6-27.7): a bad --freq
said with the option given and the nearest entry, usage errors leave nothing behind, labels
that do not claim more than was done."""

import os
import re

import pytest

from conftest import REPO, make_board, make_generic_host, run_cli


@pytest.mark.parametrize("freq, said", [("5GHz", "5 GHz"), ("690MHz", "690 MHz")])
def test_bad_freq_said_in_the_users_terms_and_no_out_dir(tmp_path, freq, said):
    board = make_board(tmp_path, "orin-nano")
    out = tmp_path / "run1"
    res = run_cli("--root", str(board), "measure", "--model", "sim:resnet18", "--freq", freq,
                  "--out", str(out), cwd=REPO)
    assert res.returncode != 0
    err = " ".join(res.stderr.split())
    assert f"--freq: {said} is outside this board's range 306 MHz .. 624.8 MHz" in err
    assert "624.8 MHz" in err.split("hint:")[1] and "max" in err.split("hint:")[1]
    assert "profile measure" not in err and "min_freq" not in err
    assert not out.exists()  # a usage error creates nothing


def test_maxperf_dry_run_says_nothing_was_applied(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    res = run_cli("--root", str(board), "maxperf", "--dry-run",
                  env=dict(os.environ, COLUMNS="140", PYTHONPATH=str(REPO / "agent")),
                  cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert "Requested vs applied" not in res.stdout
    assert "dry run: nothing applied" in res.stdout
    # the governor's row reads back a governor, never a clock (min, max and now)
    governor = next(ln for ln in res.stdout.splitlines() if "│ cpu governor" in ln)
    assert not re.search(r"\d (MHz|GHz)", " ".join(governor.split("│")[4:7])), governor
    assert "schedutil" in governor.split("│")[6], governor


def test_skipped_section_note_has_a_reason(tmp_path):
    host = make_generic_host(tmp_path / "pc")
    res = run_cli("--root", str(host), "maxperf", "--dry-run", cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert ("note: no gpu control on this board (no GPU clock jetbench can set): [gpu] "
            "skipped") in res.stdout
    assert "  skipped" not in res.stdout


def test_status_without_a_daemon_points_to_info(tmp_path):
    res = run_cli("status", "--socket", str(tmp_path / "none.sock"), cwd=REPO)
    assert res.returncode != 0
    assert "`jetbench info`" in res.stderr


def test_profile_for_another_soc_lists_the_ones_that_fit(tmp_path):
    board = make_board(tmp_path, "orin-nano")
    res = run_cli("--root", str(board), "apply", "tx1-690mhz", "--dry-run", cwd=REPO)
    assert res.returncode != 0
    err = " ".join(res.stderr.split())
    assert "profiles for this board: maxperf, orin-nano-510mhz" in err
