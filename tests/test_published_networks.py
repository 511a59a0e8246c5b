"""OverFeat (fast) and ResNet-200 against their papers (issue 25.3).

The expected counts are derived by hand from the papers' layer tables, layer by layer, not
from jetbench's code; each is also checked against the published round figure.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from jetbench.workload.macs import builtin_cost  # noqa: E402
from jetbench.workload.models_info import describe_models  # noqa: E402
from jetbench.workload.registry import get_spec  # noqa: E402

# Sermanet et al. 2013, Table 1 (fast model), 231x231 input:
#   layer  conv               maps out       pool      weights + biases
#   1      96  11x11 /4       56x56          2x2 /2    96*3*121 + 96         =      34,944
#   2      256 5x5 /1         24x24 (28in)   2x2 /2    256*96*25 + 256       =     614,656
#   3      512 3x3 pad 1      12x12          -         512*256*9 + 512       =   1,180,160
#   4      1024 3x3 pad 1     12x12          -         1024*512*9 + 1024     =   4,719,616
#   5      1024 3x3 pad 1     12x12          2x2 /2    1024*1024*9 + 1024    =   9,438,208
#   6      fc 3072 (6x6x1024 in)                       36864*3072 + 3072     = 113,249,280
#   7      fc 4096                                     3072*4096 + 4096      =  12,587,008
#   8      fc 1000                                     4096*1000 + 1000      =   4,097,000
#   sum                                                                        145,920,872
OVERFEAT_PARAMS = (34_944 + 614_656 + 1_180_160 + 4_719_616 + 9_438_208 + 113_249_280
                   + 12_587_008 + 4_097_000)
# MACs = output positions x output maps x (input maps x kernel area), fc = in x out:
#   conv1 56*56*96*(3*121)     =   109,283,328    conv2 24*24*256*(96*25)   =   353,894,400
#   conv3 12*12*512*(256*9)    =   169,869,312    conv4 12*12*1024*(512*9)  =   679,477,248
#   conv5 12*12*1024*(1024*9)  = 1,358,954,496    fc6 36864*3072            =   113,246,208
#   fc7 3072*4096              =    12,582,912    fc8 4096*1000             =     4,096,000
#   sum                                                                       2,801,403,904
OVERFEAT_MACS = (109_283_328 + 353_894_400 + 169_869_312 + 679_477_248 + 1_358_954_496
                 + 113_246_208 + 12_582_912 + 4_096_000)

# He et al. 2016 (pre-activation), ResNet-200: conv1 7x7/2 64 + 3x3/2 max pool, bottleneck
# units [1x1 w, 3x3 w, 1x1 4w] x [3, 24, 36, 3] for w = 64/128/256/512, a 1x1 projection
# where width or stride changes (stride on the 3x3), BN (2 parameters a channel) before every
# conv of a unit, none before the first unit's (conv1's BN-ReLU serves it), one after the last.
# Convolution weights, unit = cin*w + 9w^2 + 4w^2:
#   conv1 7*7*3*64                                                   =      9,408
#   w=64:  57,344 (cin 64) + 16,384 proj + 2 * 69,632 (cin 256)      =    212,992
#   w=128: 245,760 (cin 256) + 131,072 proj + 23 * 278,528           =  6,782,976
#   w=256: 983,040 (cin 512) + 524,288 proj + 35 * 1,114,112         = 40,501,248
#   w=512: 3,932,160 (cin 1024) + 2,097,152 proj + 2 * 4,456,448     = 14,942,208
# fc 2048*1000 + 1000                                                =  2,049,000
# BN channels: 64 + (128 + 2*384) + (512 + 23*768) + (1024 + 35*1536) + (2048 + 2*3072)
#   + 2048 = 84,160, times 2                                         =    168,320
#   sum                                                                64,666,152
RESNET200_PARAMS = (9_408 + 212_992 + 6_782_976 + 40_501_248 + 14_942_208 + 2_049_000
                    + 168_320)
# MACs at 224x224: conv1 112*112*64*147 = 118,013,952; w=64 all at 56x56: 3136 * 212,992
# = 667,942,912; each later stage's first 1x1 at the previous size, the rest at the new size
# (28/14/7): w=128 3136*32,768 + 784*(212,992 + 131,072 + 6,406,144) = 5,394,923,520;
# w=256 784*131,072 + 196*(851,968 + 524,288 + 38,993,920) = 8,015,314,944;
# w=512 196*524,288 + 49*(3,407,872 + 2,097,152 + 8,912,896) = 809,238,528; fc 2,048,000.
#   sum 15,007,481,856
RESNET200_MACS = (118_013_952 + 667_942_912 + 5_394_923_520 + 8_015_314_944 + 809_238_528
                  + 2_048_000)

# name: (hand-derived params, hand-derived MACs, published params, published GMACs)
PUBLISHED = {
    "overfeat": (OVERFEAT_PARAMS, OVERFEAT_MACS, 146e6, 2.8),
    "resnet200": (RESNET200_PARAMS, RESNET200_MACS, 64.7e6, 15.0),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_and_macs_match_the_paper(name: str) -> None:
    params, macs, published_params, published_gmacs = PUBLISHED[name]
    assert params == pytest.approx(published_params, rel=0.01)  # the arithmetic above
    assert macs / 1e9 == pytest.approx(published_gmacs, rel=0.05)
    cost = builtin_cost(name)  # the built network, counted on the meta device
    assert (cost.params, cost.macs_per_image) == (params, macs)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_models_listing_shows_the_published_sizes(name: str) -> None:
    params, macs, _, _ = PUBLISHED[name]
    row = {r["name"]: r for r in describe_models()}[name]
    assert (row["params"], row["macs_per_image"]) == (params, macs)


@pytest.mark.parametrize("name, side", [("overfeat", 231), ("resnet200", 224)])
def test_forward_on_the_cpu_at_batch_1(name: str, side: int) -> None:
    spec = get_spec(name)
    assert spec.input_shape == (3, side, side)
    model = spec.build().eval()
    with torch.inference_mode():
        out = model(torch.full((1, *spec.input_shape), 0.5))
    assert out.shape == (1, 1000)
    assert torch.isfinite(out).all()
    assert out.std() > 0.1  # Gaussian weights give distinct logits, not a constant
    assert out.abs().max() < 1e4  # the residual damping keeps 66 units inside float16's range


def test_overfeat_feature_map_sizes() -> None:
    # Table 1: 231 -> conv1 56 -> pool 28 -> conv2 24 -> pool 12 -> conv3..5 12 -> pool 6
    model = get_spec("overfeat").build().eval()
    sizes = []
    with torch.inference_mode():
        x = torch.zeros(1, 3, 231, 231)
        for layer in model.features:
            x = layer(x)
            if isinstance(layer, (torch.nn.Conv2d, torch.nn.MaxPool2d)):
                sizes.append(x.shape[-1])
    assert sizes == [56, 28, 24, 12, 12, 12, 12, 6]
    assert x.shape[1] == 1024


def test_resnet200_units_are_pre_activation() -> None:
    model = get_spec("resnet200").build()
    stages = [model.layer1, model.layer2, model.layer3, model.layer4]
    assert [len(s) for s in stages] == [3, 24, 36, 3]
    assert stages[0][0].bn1 is None  # conv1's BN-ReLU serves the first unit
    assert all(u.bn1 is not None for s in stages for u in s if u is not stages[0][0])
    assert isinstance(model.head[0], torch.nn.BatchNorm2d)  # the extra activation at the end
