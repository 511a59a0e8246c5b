"""`jetbench models` lists static facts without building a network; the facts are checked
against the built networks here, once (issue 13.11)."""

import json
import subprocess
import sys

import pytest

from jetbench.workload.registry import list_specs

_LIST = """
import sys
from typer.testing import CliRunner
from jetbench.cli.main import app
res = CliRunner().invoke(app, ["models", "--json"])
print(res.output)
print("torch loaded" if "torch" in sys.modules else "torch not loaded", file=sys.stderr)
"""


def test_models_lists_without_torch():
    res = subprocess.run([sys.executable, "-c", _LIST], capture_output=True, text=True,
                         timeout=60)
    assert res.stderr.strip().endswith("torch not loaded"), res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["models"]}
    # published figures (torchvision / BVLC): ResNet-50 25,557,032 parameters, 4.09 GMACs
    assert rows["resnet50"]["params"] == 25_557_032
    assert rows["resnet50"]["gmacs_per_image"] == pytest.approx(4.089, abs=0.001)
    assert rows["alexnet"]["input_shape"] == [3, 227, 227]


def test_static_facts_match_the_built_networks():
    pytest.importorskip("torch")
    from jetbench.workload.macs import builtin_cost

    for spec in list_specs():
        cost = builtin_cost(spec.name)
        assert (spec.params, spec.macs_per_image, spec.activation_elems_per_image) == \
            (cost.params, cost.macs_per_image, cost.activation_elems_per_image), spec.name
