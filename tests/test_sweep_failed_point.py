"""A sweep survives a bad point: a point whose network raises (here a Tegra-like driver error
that is not an allocation failure) is recorded as a "failed" row with its message, the other
points are measured, and a resumed sweep tries the failed point again. A plain measure still
stops at the first failure (keep_going is the sweep's)."""

import pytest
from helpers.workloads import quick

from jetbench.errors import UsageError
from jetbench.hw.fs import Root
from jetbench.run.measure import measure
from jetbench.run.sweep import summarize, sweep

from conftest import make_board

FLAKY = '''
import torch

class _Flaky(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3 * 16 * 16, 4)

    def forward(self, x):
        if x.shape[0] == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.lin(x.flatten(1))

def flaky():
    return _Flaky()
'''


@pytest.fixture
def flaky(tmp_path, monkeypatch):
    (tmp_path / "jb_flakynet.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "jb_flakynet:flaky"


def test_sweep_records_a_failed_point_and_goes_on(tmp_path, flaky):
    base = make_board(tmp_path, "nano")
    out = tmp_path / "s"
    report = sweep(Root(base), quick(out, models=(flaky,), batches=(1, 2, 4)), "max")
    assert [d["status"] for d in report.results] == ["ok", "failed", "ok"]
    failed = report.results[1]
    assert "illegal memory access" in failed["message"]
    assert (out / f"{failed['id']}.json").exists()
    lines = "\n".join(summarize(report.results).lines())
    assert f"failed (recorded, the sweep went on): {failed['id']}: " in lines
    again = sweep(Root(base), quick(out, models=(flaky,), batches=(1, 2, 4), resume=True),
                  "max")
    assert len(again.skipped) == 2  # the two good points; the failed one is measured again
    assert [d["status"] for d in again.results] == ["ok", "failed", "ok"]


def test_a_plain_measure_still_stops_at_a_failure(tmp_path, flaky):
    base = make_board(tmp_path, "nano")
    with pytest.raises(UsageError, match="illegal memory access"):
        measure(Root(base), quick(tmp_path / "m", models=(flaky,), batches=(2,)))
