"""`jetbench time` / `models` from the outside: JSON document, table, errors, lazy imports,
and a machine without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jetbench.cli.main import app

FAST = ["--iterations", "2", "--duration", "0", "--warmup", "0"]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_import_and_help_do_not_load_torch_or_matplotlib() -> None:
    code = (
        "import sys\n"
        "import jetbench, jetbench.workload, jetbench.cli.main as m\n"
        "sys.argv = ['jetbench', '--help']\n"
        "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
        "heavy = [n for n in ('torch', 'matplotlib', 'numpy') if n in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    proc = _run(code)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr
    assert " time " in proc.stdout and " models " in proc.stdout


def test_time_without_torch_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "from jetbench.cli.main import main\n"
        "sys.argv = ['jetbench', 'time', '--model', 'alexnet']\n"
        "main()\n"
    )
    proc = _run(code)
    assert proc.returncode == 2, proc.stderr
    assert "pip install torch==2.13.0" in proc.stderr and "Jetson" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_time_json_document_and_out_dir(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["time", "--model", "resnet18", "--input-shape", "3,32,32",
                                      "--precision", "fp32,bf16", "--batch", "1,2", "--device",
                                      "cpu", "--json", "--out", str(tmp_path), *FAST])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "jetbench.time/1" and doc["device"] == "cpu"
    assert [(r["workload"]["precision"], r["workload"]["batch"]) for r in doc["results"]] == \
        [("fp32", 1), ("fp32", 2), ("bf16", 1), ("bf16", 2)]
    first = doc["results"][0]
    assert first["status"] == "ok" and first["throughput"]["images_per_s"] > 0
    assert set(first["throughput"]["latency_ms"]) == {"min", "mean", "p50", "p90", "p99", "max"}
    assert first["workload"]["iterations"] == 2
    assert json.loads((tmp_path / "time.json").read_text()) == doc


def test_time_table_layers_and_check() -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["time", "--model", "resnet18", "--input-shape", "3,32,32",
                                      "--precision", "fp32,fp16", "--device", "cpu", "--layers",
                                      "--check", "--mode", "inference", *FAST])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "resnet18" in out and "img/s" in out and "p99" in out
    assert "layer1.0.conv1" in out and "Average Forward pass" in out
    assert "agreement with fp32" in out


def test_time_train_layers_show_backward() -> None:
    pytest.importorskip("torch")
    args = ["time", "--model", "resnet18", "--input-shape", "3,32,32", "--mode", "train",
            "--batch", "2", "--device", "cpu", "--layers", *FAST]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "backward ms" in result.output and "Average Forward-Backward" in result.output


def test_time_memory_limit_gives_an_oom_row() -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["time", "--model", "resnet18", "--input-shape", "3,32,32",
                                      "--memory-limit", "1MiB", "--device", "cpu", "--json",
                                      *FAST])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["results"]
    assert row["status"] == "oom" and "out of memory" in row["message"]


def test_user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    (tmp_path / "mynet.py").write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),\n"
        "                               torch.nn.Linear(4 * 6 * 6, 5))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(16, 4), torch.nn.ReLU()))
    scripted.save(str(tmp_path / "net.pt"))
    runner = CliRunner()
    for model, shape in (("mynet:build", "3,8,8"), (str(tmp_path / "net.pt"), "16")):
        result = runner.invoke(app, ["time", "--model", model, "--input-shape", shape,
                                     "--device", "cpu", "--json", *FAST])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["results"]
        assert row["status"] == "ok"
    gmacs = json.loads(runner.invoke(app, ["time", "--model", "mynet:build", "--input-shape",
                                           "3,8,8", "--json", *FAST]).stdout)
    assert gmacs["results"][0]["workload"]["gmacs_per_image"] * 1e9 == pytest.approx(
        6 * 6 * 4 * 27 + 144 * 5)
    missing = runner.invoke(app, ["time", "--model", "mynet:build", *FAST])
    assert missing.exit_code == 1 and "--input-shape" in missing.output


@pytest.mark.parametrize("args", [["--model", "lenet"], ["--precision", "fp8"],
                                  ["--batch", "0"], ["--duration", "soon"],
                                  ["--model", "resnet18", "--input", "noise"]])
def test_usage_errors_exit_1(args: list) -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["time", *FAST, *args])  # later options win
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
