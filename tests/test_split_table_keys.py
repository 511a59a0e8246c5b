"""Issue 39: when `time`'s table is split into parts at 80 columns, every part starts with
what tells its rows apart (model, runtime, precision, batch, device), not the model alone
(six identical `mobilenet_v2` rows)."""

import io

from rich.console import Console
from rich.table import Table

from jetbench.cli.render import print_table

COLUMNS = ("model", "runtime", "precision", "batch", "device", "img/s", "mean ms", "p50",
           "p90", "p99", "CV", "GFLOP/s", "status")


def test_every_part_of_a_split_table_keeps_the_key_columns():
    table = Table(box=None)
    for title in COLUMNS:
        table.add_column(title)
    for k, (runtime, batch) in enumerate((r, b) for r in ("torch", "onnxruntime", "compile")
                                         for b in (1, 8)):
        figure = f"{1000.5 + k * 111:.1f}"  # each row its own figures
        table.add_row("mobilenet_v2", runtime, "fp32" if k % 3 else "fp16", str(batch), "cpu",
                      figure, f"{10 + k:.2f}", f"{11 + k:.2f}", f"{12 + k:.2f}",
                      f"{13 + k:.2f}", f"{k + 1}.0%", figure, "ok")
    buf = io.StringIO()
    print_table(Console(file=buf, width=80, force_terminal=False), table, key_columns=5)
    lines = buf.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80
    headers = [ln.split() for ln in lines if ln.startswith("model ")]
    assert len(headers) >= 2, "\n".join(lines)  # it did split
    for header in headers:
        # the columns that differ between rows (runtime, precision, batch) start every part;
        # device, the same in every row, is said once above
        assert header[:4] == ["model", "runtime", "precision", "batch"], "\n".join(lines)
    assert "device cpu" in buf.getvalue()
    rows = [ln.split()[:4] for ln in lines if ln.startswith("mobilenet_v2")]
    assert len(rows) == 6 * len(headers) and len({tuple(r) for r in rows}) == 6
