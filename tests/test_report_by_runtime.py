"""`report --by runtime` (issue 25 item 2): tables with a column per runtime, from measure
results and `jetbench time` documents; the fastest marked, OOM/n/a/differs said, Markdown,
JSON, 80 columns, a batch-efficiency PNG per runtime, bad --by refused."""

import json
import os
import re

import pytest
from helpers.results import result_doc
from helpers.workloads import write_tiny

from jetbench.errors import EXIT_USAGE, UsageError
from jetbench.report import by_runtime, plots, schema
from jetbench.run import timing

from conftest import REPO, run_cli, terminal_env

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# img/s per (network, runtime, batch): the inputs every check below computes from
SPEED = {("resnet18", "torch", 1): 41.5, ("resnet18", "onnxruntime", 1): 57.25,
         ("alexnet", "torch", 1): 151.0, ("alexnet", "onnxruntime", 1): 122.0,
         ("resnet18", "torch", 8): 118.0, ("resnet18", "onnxruntime", 8): 163.0,
         ("alexnet", "torch", 8): 351.0}
TRAIN = {"torch": 30.4, "compile": 33.9}  # resnet18, forward+backward, batch 8


def _row(model, runtime, batch, ips=None, status="ok", mode=None, provider=None):
    work = {"model": model, "precision": "fp32", "batch": batch, "device": "cpu",
            "runtime": runtime}
    if runtime == "onnxruntime":
        work["provider"] = provider or "cpu"
    if mode:
        work["mode"] = mode
    throughput = None if ips is None else {"images_per_s": ips, "cv": 0.01,
                                           "latency_ms": {"p50": 1000.0 * batch / ips}}
    return {"status": status, "workload": work, "throughput": throughput, "warnings": []}


def time_doc():
    rows = [_row(m, rt, b, ips) for (m, rt, b), ips in SPEED.items()]
    rows += [_row("alexnet", "onnxruntime", 8, status="oom"),
             _row("resnet18", "tensorrt", 1, status="unavailable"),
             _row("alexnet", "compile", 1, status="mismatch"),
             *(_row("resnet18", rt, 8, ips, mode="train") for rt, ips in TRAIN.items())]
    return {"schema": timing.SCHEMA, "device": "cpu", "results": rows, "check": [],
            "warnings": []}


@pytest.fixture
def results_dir(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "time.json").write_text(json.dumps(time_doc()))
    for k, ips in enumerate((47.0, 49.0)):  # two repeats of one measured point on a TX1
        doc = result_doc(691.2, ips=ips, watts=5.0)
        doc["workload"]["model"] = "resnet18"
        (d / f"resnet18-{k}.json").write_text(json.dumps(doc))
    (d / "summary.json").write_text(json.dumps({"schema": "jetbench.sweep/1"}))  # foreign
    return d


def _fastest(batch):
    """(network -> runtime label) of the highest img/s, from SPEED, where 2+ runtimes ran."""
    out = {}
    for net in {m for m, _, _ in SPEED}:
        mine = {rt: ips for (m, rt, b), ips in SPEED.items() if m == net and b == batch}
        if len(mine) >= 2:
            best = max(mine, key=mine.get)
            out[net] = "onnxruntime (cpu)" if best == "onnxruntime" else best
    return out


def _table(tables, mode, batch, where="device cpu"):
    return next(t for t in tables if (t.mode, t.batch, t.where) == (mode, batch, where))


def test_time_schema_constant_matches_the_writer():
    assert by_runtime.TIME_SCHEMA == timing.SCHEMA


def test_both_document_kinds_read_foreign_skipped(results_dir):
    records = by_runtime.load_records([results_dir])
    assert len(records) == len(SPEED) + 3 + len(TRAIN) + 2
    wheres = {r.where for r in records}
    assert wheres == {"device cpu", "NVIDIA Jetson TX1 Developer Kit"}
    with pytest.raises(UsageError, match="not a jetbench result"):
        by_runtime.load_records([results_dir / "summary.json"])  # named: must be one


def test_runtime_labels():
    assert schema.runtime_label({"model": "a"}) == "torch"
    assert schema.runtime_label({"framework": "onnxruntime",
                                     "provider": "CUDAExecutionProvider"}) == "onnxruntime (cuda)"
    assert schema.runtime_label({"runtime": "onnxruntime", "provider": "tensorrt"}) == \
        "onnxruntime (tensorrt)"
    assert schema.runtime_label({"runtime": "compile"}) == "compile"


def test_fastest_marked_statuses_shown(results_dir):
    tables = by_runtime.tables_of(by_runtime.load_records([results_dir]))
    for batch in (1, 8):
        t = _table(tables, "inference", batch)
        assert t.title == f"forward: FP32, batch {batch} (device cpu)"
        for net, cells in t.rows:
            by_col = dict(zip(t.columns, cells))
            marked = [col for col, c in by_col.items() if c is not None and c.fastest]
            assert marked == ([_fastest(batch)[net]] if net in _fastest(batch) else []), \
                (batch, net, by_col)
            for col in marked:
                assert by_col[col].text().startswith(
                    by_runtime.significant(by_col[col].images_per_s) + "*")
    b1 = {net: dict(zip(_table(tables, "inference", 1).columns, cells))
          for net, cells in _table(tables, "inference", 1).rows}
    assert b1["resnet18"]["tensorrt"].text() == "n/a"
    assert b1["alexnet"]["compile"].text() == "differs"
    assert b1["alexnet"]["tensorrt"] is None  # not run
    assert b1["resnet18"]["torch"].text() == "41.5"  # 3 significant digits
    b8 = {net: dict(zip(_table(tables, "inference", 8).columns, cells))
          for net, cells in _table(tables, "inference", 8).rows}
    assert b8["alexnet"]["onnxruntime (cpu)"].text() == "OOM"
    assert not b8["alexnet"]["torch"].fastest  # the only figure in its row: nothing to beat
    train = _table(tables, "train", 8)
    assert train.title.startswith("forward+backward: FP32, batch 8")
    cells = dict(zip(train.columns, train.rows[0][1]))
    best = max(TRAIN, key=TRAIN.get)
    assert cells[best].fastest and not any(c.fastest for k, c in cells.items() if k != best)


def test_repeats_are_averaged_with_img_per_j_and_said(results_dir):
    records = by_runtime.load_records([results_dir])
    tables = by_runtime.tables_of(records)
    tx1 = _table(tables, "inference", 1, "NVIDIA Jetson TX1 Developer Kit")
    cell = tx1.rows[0][1][0]
    assert (cell.images_per_s, cell.repeats) == (48.0, 2)
    assert cell.images_per_j == pytest.approx((47.0 / 5 + 49.0 / 5) / 2)
    assert cell.text() == "48.0 / 9.60"
    legend = " ".join(by_runtime.legend(tables))
    assert "mean of several results for resnet18 torch (2)" in legend
    assert "OOM: out of memory" in legend and "*: the fastest" in legend



@pytest.mark.parametrize("columns", [80, 100])
def test_cli_fits_the_terminal(results_dir, columns):
    res = run_cli("report", str(results_dir), "--by", "runtime", env=terminal_env(columns),
                  cwd=REPO)
    assert res.returncode == 0, res.stderr
    lines = _ANSI.sub("", res.stdout).splitlines()
    assert max(len(ln) for ln in lines) <= columns, "\n".join(lines)
    assert not any("…" in ln for ln in lines)
    text = "\n".join(lines)
    assert "forward: FP32, batch 1 (device cpu)" in text
    assert "forward+backward: FP32, batch 8 (device cpu)" in text
    assert "OOM" in text and "n/a" in text and "differs" in text
    assert re.search(r"resnet18\b.*\b57\.2\*", text), text  # onnxruntime's 57.25 fastest
    assert re.search(r"alexnet\b.*\b151\*", text), text


def test_markdown(results_dir):
    res = run_cli("report", str(results_dir), "--by", "runtime", "--markdown",
                  env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stderr
    md = res.stdout
    assert "| network | torch | compile | onnxruntime (cpu) | tensorrt |" in md
    assert "| resnet18 | 41.5 | - | 57.2* | n/a |" in md
    assert "| alexnet | 351 | OOM |" in md
    assert "*forward+backward: FP32, batch 8 (device cpu)*" in md
    assert "- *: the fastest runtime for that network (highest img/s, apart from the others " \
        "beyond their latency CV)" in md


def test_json(results_dir):
    res = run_cli("report", str(results_dir), "--by", "runtime", "--json", cwd=REPO,
                  env=terminal_env(80))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["by"] == "runtime" and doc["simulated"] is True
    assert doc["title"] == ("jetbench runtimes: NVIDIA Jetson TX1 Developer Kit (SIMULATED), "
                            "device cpu")
    t = next(t for t in doc["tables"] if t["where"] == "device cpu" and t["batch"] == 1
             and t["mode"] == "inference")
    assert t["pass"] == "forward"
    assert t["columns"] == ["torch", "compile", "onnxruntime (cpu)", "tensorrt"]
    rows = {r["network"]: r["cells"] for r in t["rows"]}
    ort = rows["resnet18"][2]
    assert ort == {"runtime": "onnxruntime (cpu)", "status": "ok", "images_per_s": 57.25,
                   "images_per_j": None, "repeats": 1, "fastest": True, "text": "57.2*"}
    assert rows["resnet18"][3]["status"] == "unavailable"
    assert rows["alexnet"][1]["status"] == "mismatch" and rows["alexnet"][3] is None


def test_plots_one_png_per_runtime(results_dir, tmp_path):
    out = tmp_path / "plots"
    res = run_cli("report", str(results_dir), "--by", "runtime", "--plot", str(out),
                  env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in out.iterdir())
    # tensorrt has no usable result: no plot of nothing
    assert names == ["batch-efficiency-compile.png", "batch-efficiency-onnxruntime-cpu.png",
                     "batch-efficiency-torch.png"]
    for p in out.iterdir():
        assert p.stat().st_size > 1000 and plots.png_size(p) == (900, 500)
        assert f"plot: {p}" in res.stdout
    series = by_runtime.batch_series(by_runtime.load_records([results_dir]), "torch")
    # ms per image = 1000 / img/s, one line per network (and board or device when several)
    assert [p[:2] for p in series["alexnet (device cpu)"]] == [
        (1, pytest.approx(1000 / 151.0)), (8, pytest.approx(1000 / 351.0))]
    assert [p[:2] for p in series["resnet18 (NVIDIA Jetson TX1 Developer Kit)"]] == [
        (1, pytest.approx((1000 / 47.0 + 1000 / 49.0) / 2))]
    # each point's error bar: its ms per image times the largest latency CV of its repeats
    for pts in series.values():
        for _, ms, err in pts:
            assert 0.0 <= err < ms
    assert "resnet18 forward+backward (device cpu)" in series


def test_a_real_time_document(tmp_path):
    """`jetbench time --out` as written, read back by --by runtime (no runtime key: torch)."""
    write_tiny(tmp_path)
    env = dict(terminal_env(80), PYTHONPATH=f"{REPO / 'agent'}{os.pathsep}{tmp_path}")
    res = run_cli("time", "--model", "jb_tinynet:tiny", "--input-shape", "3,16,16",
                  "--device", "cpu", "--iterations", "2", "--duration", "0.05", "--warmup", "0",
                  "--batch", "1,2", "--out", str(tmp_path / "t"), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "t" / "time.json").read_text())
    res = run_cli("report", str(tmp_path / "t"), "--by", "runtime", "--json", env=env,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    tables = json.loads(res.stdout)["tables"]
    assert [t["batch"] for t in tables] == [1, 2]
    for t, row in zip(tables, doc["results"]):
        assert t["columns"] == ["torch"]
        assert t["rows"][0]["cells"][0]["images_per_s"] == row["throughput"]["images_per_s"]


@pytest.mark.parametrize("args, message", [
    (["--by", "framework"], "--by 'framework': not one of runtime"),
    (["--by", "runtime", "--compare", "x.json"], "--by and --compare do not go together"),
])
def test_bad_usage(results_dir, args, message):
    res = run_cli("report", str(results_dir), *args, cwd=REPO, env=terminal_env(80))
    assert res.returncode == EXIT_USAGE, (res.stdout, res.stderr)
    assert message in res.stderr and "Traceback" not in res.stderr


def test_no_results(tmp_path):
    (tmp_path / "other.json").write_text("{}")
    res = run_cli("report", str(tmp_path), "--by", "runtime", cwd=REPO, env=terminal_env(80))
    assert res.returncode == EXIT_USAGE
    assert "no jetbench results or `jetbench time` documents found" in res.stderr
    assert "Traceback" not in res.stderr


def test_seven_runtimes_with_img_per_j_split_at_80_columns(tmp_path):
    """Every runtime and three providers, img/J in each cell: too wide for one table at 80
    columns, so it is split, the network repeated, no figure cut."""
    providers = (None, None, None, "CPUExecutionProvider", "CUDAExecutionProvider",
                 "TensorrtExecutionProvider", None)
    runtimes = ("torch", "torchscript", "compile", "onnxruntime", "onnxruntime",
                "onnxruntime", "tensorrt")
    k = 0
    for net in ("resnet18", "alexnet"):
        for runtime, provider in zip(runtimes, providers):
            doc = result_doc(691.2, ips=1234.5 + k, watts=5.0)
            doc["workload"].update(model=net, runtime=runtime)
            if provider:
                doc["workload"]["provider"] = provider
            (tmp_path / f"{k}.json").write_text(json.dumps(doc))
            k += 1
    res = run_cli("report", str(tmp_path), "--by", "runtime", env=terminal_env(80), cwd=REPO)
    assert res.returncode == 0, res.stderr
    lines = _ANSI.sub("", res.stdout).splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(lines)
    text = "\n".join(lines)
    for n in range(k):
        assert f"{by_runtime.significant(1234.5 + n)}" in text  # every figure, whole
    assert "(tensorrt)" in text and "(cuda)" in text
    assert len([ln for ln in lines if ln.startswith("resnet18 ")]) >= 2  # split in parts
    # 1247.5 the highest, but these results state no spread: no verdict, so no mark (issue 61)
    assert re.search(r"alexnet\s.*1250 / 250", text) and "*" not in text, text


@pytest.mark.parametrize("cv_torch, cv_onnx, marked", [
    # 57.25 vs 41.5 img/s; the rule (report/digits.separated): apart when
    # 57.25 / (1 + cv_onnx) > 41.5 * (1 + cv_torch)
    (0.05, 0.05, True),    # 54.52 > 43.58
    (0.20, 0.20, False),   # 47.71 < 49.80: within noise, no mark
    (None, None, False),   # no spread known: no verdict, no mark (issue 61)
])
def test_the_fastest_mark_follows_the_one_noise_rule(cv_torch, cv_onnx, marked):
    rows = [_row("resnet18", "torch", 1, 41.5), _row("resnet18", "onnxruntime", 1, 57.25)]
    for row, cv in zip(rows, (cv_torch, cv_onnx)):
        row["throughput"]["cv"] = cv
    doc = {"schema": timing.SCHEMA, "device": "cpu", "results": rows, "check": [],
           "warnings": []}
    (table,) = by_runtime.tables_of(by_runtime._from_time(doc))
    ((network, cells),) = table.rows
    assert [c.fastest for c in cells] == [False, marked]
