"""Built-in networks: parameter counts, MAC counts, output shapes, the model listing."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from jetbench.workload.macs import builtin_cost, model_cost  # noqa: E402
from jetbench.workload.models.common import CaffeLRN  # noqa: E402
from jetbench.workload.registry import get_spec, list_specs  # noqa: E402

# Published counts (BVLC prototxts, the papers, torchvision's documented figures).
PARAMS = {
    "alexnet": 60_965_224, "caffenet": 60_965_224, "googlenet": 6_998_552,
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
    "resnet101": 44_549_160, "resnet152": 60_192_808, "vgg16": 138_357_544,
    "vgg19": 143_667_240, "mobilenet_v2": 3_504_872,
    # derived layer by layer from the papers in test_published_networks.py
    "overfeat": 145_920_872, "resnet200": 64_666_152,
}
# Conv + fully-connected multiply-accumulates per image, in GMACs, at the model's own input.
GMACS = {"alexnet": 0.724, "googlenet": 1.583, "resnet18": 1.814, "resnet50": 4.089,
         "vgg16": 15.470, "vgg19": 19.632, "mobilenet_v2": 0.301}


def test_every_spec_has_a_published_count() -> None:
    assert {s.name for s in list_specs()} == set(PARAMS)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_counts(name: str) -> None:
    cost = builtin_cost(name)
    assert cost.params == PARAMS[name] == get_spec(name).params


@pytest.mark.parametrize("name", sorted(GMACS))
def test_gmacs_per_image(name: str) -> None:
    assert builtin_cost(name).gmacs_per_image == pytest.approx(GMACS[name], abs=0.0015)


def test_alexnet_macs_by_hand() -> None:
    # conv1..5 (grouped conv2/4/5 count half the input channels) + fc6..8
    convs = (55 * 55 * 96 * 3 * 121 + 27 * 27 * 256 * 48 * 25 + 13 * 13 * 384 * 256 * 9
             + 13 * 13 * 384 * 192 * 9 + 13 * 13 * 256 * 192 * 9)
    fcs = 9216 * 4096 + 4096 * 4096 + 4096 * 1000
    assert builtin_cost("alexnet").macs_per_image == convs + fcs


def test_aliases_and_unknown_names() -> None:
    from jetbench.errors import UsageError

    assert get_spec("Inception_v1").name == "googlenet"
    with pytest.raises(UsageError) as info:
        get_spec("lenet")
    assert "jetbench models" in (info.value.hint or "")


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_output_shapes(name: str) -> None:
    spec = get_spec(name)
    with torch.device("meta"):  # shapes only: every network, at its real input size, instantly
        model = spec.build().eval()
        out = model(torch.empty((2, *spec.input_shape)))
    assert out.shape == (2, 1000)


@pytest.mark.parametrize("name", ["alexnet", "caffenet", "googlenet", "resnet18", "mobilenet_v2"])
def test_forward_values(name: str) -> None:
    spec = get_spec(name)
    # AlexNet's classifier is sized for 227x227; the others pool adaptively (small is fast)
    shape = spec.input_shape if name in ("alexnet", "caffenet") else (3, 64, 64)
    model = spec.build().eval()
    with torch.inference_mode():
        out = model(torch.full((2, *shape), 0.5))
    assert out.shape == (2, 1000)
    assert torch.isfinite(out).all()
    assert out.std() > 0.1  # Gaussian weights give distinct logits, not a constant


def test_googlenet_ceil_mode_sizes() -> None:
    # Caffe rounds pooled sizes up: 112 -> 56 -> 28 -> 14 -> 7 at 224 input
    model = get_spec("googlenet").build().eval()
    with torch.inference_mode():
        x = model.stem(torch.zeros(1, 3, 224, 224))
        assert x.shape[-2:] == (28, 28)
        x = model.inception4(model.inception3(x))
        assert x.shape[1:] == (832, 7, 7)


def test_weights_are_seeded_gaussians() -> None:
    a, b, c = get_spec("resnet18").build(0), get_spec("resnet18").build(0), \
        get_spec("resnet18").build(1)
    wa, wb, wc = a.stem[0].weight, b.stem[0].weight, c.stem[0].weight
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert wa.std().item() == pytest.approx((2.0 / wa[0].numel()) ** 0.5, rel=0.1)


def test_caffe_lrn_matches_pytorch_and_runs_in_half_on_cpu() -> None:
    x = torch.randn(1, 16, 5, 5) * 3
    lrn = CaffeLRN(5, 1e-4, 0.75)
    ref = torch.nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0)(x)
    assert torch.allclose(lrn(x), ref)
    for dtype in (torch.float16, torch.bfloat16):
        out = lrn(x.to(dtype))
        assert out.dtype == dtype
        assert torch.allclose(out.float(), ref, rtol=1e-2, atol=1e-2)


def test_model_cost_of_a_user_module() -> None:
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 4 * 4, 10))
    cost = model_cost(net, (3, 4, 4))
    assert cost.macs_per_image == 4 * 4 * 8 * 27 + 128 * 10
    assert cost.params == 8 * 27 + 8 + 1280 + 10
    assert next(net.parameters()).device.type == "cpu"  # counted on a copy


def test_a_small_network_is_counted_on_the_cpu_and_gives_metas_counts(monkeypatch) -> None:
    """A small network's pass runs on a CPU copy (meta's first call imports torch._dynamo,
    about 1 s), a large one's on meta; both count the same."""
    import jetbench.workload.macs as macs

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2),
                              torch.nn.Flatten(), torch.nn.Linear(32, 10))
    shape = (3, 16, 16)
    assert macs.counting_device(net, shape) == "cpu"  # 682 params x 256 positions
    assert macs.counting_device(get_spec("resnet18").build(0), (3, 64, 64)) == "meta"
    on_cpu = model_cost(net, shape)
    monkeypatch.setattr(macs, "CPU_PASS_MACS", 0)
    assert macs.counting_device(net, shape) == "meta"
    assert model_cost(net, shape) == on_cpu
    assert on_cpu.macs_per_image == 14 * 14 * 8 * 27 + 32 * 10


def test_models_command_json() -> None:
    from typer.testing import CliRunner

    from jetbench.cli.main import app

    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)["models"]}
    assert rows["vgg16"]["params"] == 138_357_544
    assert rows["alexnet"]["input_shape"] == [3, 227, 227]
    assert rows["resnet50"]["gmacs_per_image"] == pytest.approx(4.089, abs=0.001)
