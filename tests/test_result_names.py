"""Result names are claimed atomically (issue 9, item 5): runs writing into one --out at once
never pick the same name, so no result file is silently lost."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from jetbench.report.io import claim_result_path


def _claim(args):
    out, barrier = args
    barrier.wait()  # every process claims at the same moment
    return str(claim_result_path(Path(out) / "alexnet-fp32-b1.json"))


def test_concurrent_claims_get_distinct_names(tmp_path):
    ctx = mp.get_context("spawn")
    n = 8
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n)
        with ctx.Pool(n) as pool:
            names = pool.map(_claim, [(str(tmp_path), barrier)] * n)
    assert len(set(names)) == n
    expected = {"alexnet-fp32-b1.json"} | {f"alexnet-fp32-b1-{k}.json" for k in range(2, n + 1)}
    assert {Path(p).name for p in names} == expected
    for p in names:  # each claim holds its trace CSV's name too
        assert Path(p).with_suffix(".csv").exists()


def test_a_taken_csv_name_skips_to_the_next_free_pair(tmp_path):
    (tmp_path / "r.csv").write_text("someone else's trace\n")
    claimed = claim_result_path(tmp_path / "r.json")
    assert claimed.name == "r-2.json"
    assert not (tmp_path / "r.json").exists()  # our placeholder was given back
    assert (tmp_path / "r.csv").read_text() == "someone else's trace\n"


def test_an_existing_result_is_never_replaced(tmp_path):
    (tmp_path / "r.json").write_text("{}\n")
    assert claim_result_path(tmp_path / "r.json").name == "r-2.json"
    assert (tmp_path / "r.json").read_text() == "{}\n"
