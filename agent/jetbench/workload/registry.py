"""The built-in networks: names, input shapes, and where their definitions live.

Pure data: importing this module never imports torch (the definitions load on first use).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import UsageError
from ._torch import import_torch
from .custom import looks_custom
from .model_arg import PYTORCH, SIM, SIM_PREFIX, check_model_file, model_kind

if TYPE_CHECKING:  # torch is optional at run time
    from torch.nn import Module


@dataclass(frozen=True)
class ModelSpec:
    """A network jetbench can build. `params` is the published count the definition must match
    (None when there is no published reference); `input_shape` is one image, CHW."""

    name: str
    description: str
    input_shape: Tuple[int, int, int]
    factory: str  # "module:function" inside jetbench.workload.models, called with seed=...
    kwargs: Tuple[Tuple[str, object], ...] = ()
    params: Optional[int] = None
    macs_per_image: int = 0  # conv + fc multiply-accumulates at input_shape (macs.py counts)
    activation_elems_per_image: int = 0  # every layer's output, summed (macs.py counts)

    def build(self, seed: int = 0) -> Module:
        """A torch.nn.Module with Gaussian weights (imports torch)."""
        import_torch()  # first, so that Ctrl-C is held while torch loads
        module_name, func_name = self.factory.split(":")
        module = importlib.import_module(f"{__package__}.models.{module_name}")
        factory: Callable[..., Module] = getattr(module, func_name)
        return factory(seed=seed, **dict(self.kwargs))


_IMAGENET = (3, 224, 224)

_SPECS: List[ModelSpec] = [
    ModelSpec("alexnet", "AlexNet, BVLC deploy (LRN, 2 groups)", (3, 227, 227),
              "alexnet:alexnet", params=60_965_224, macs_per_image=724_406_816,
              activation_elems_per_image=1_934_440),
    ModelSpec("caffenet", "CaffeNet, BVLC (pool before LRN)", (3, 227, 227),
              "alexnet:caffenet", params=60_965_224, macs_per_image=724_406_816,
              activation_elems_per_image=1_570_664),
    ModelSpec("overfeat", "OverFeat fast (Sermanet et al. 2013)", (3, 231, 231),
              "overfeat:overfeat", params=145_920_872, macs_per_image=2_801_403_904,
              activation_elems_per_image=1_842_664),
    ModelSpec("googlenet", "GoogLeNet / Inception-v1, BVLC deploy", _IMAGENET,
              "googlenet:googlenet", params=6_998_552, macs_per_image=1_582_671_872,
              activation_elems_per_image=8_676_680),
    ModelSpec("resnet18", "ResNet-18", _IMAGENET, "resnet:resnet", (("depth", 18),),
              params=11_689_512, macs_per_image=1_814_073_344,
              activation_elems_per_image=7_478_248),
    ModelSpec("resnet34", "ResNet-34", _IMAGENET, "resnet:resnet", (("depth", 34),),
              params=21_797_672, macs_per_image=3_663_761_408,
              activation_elems_per_image=11_241_448),
    ModelSpec("resnet50", "ResNet-50", _IMAGENET, "resnet:resnet", (("depth", 50),),
              params=25_557_032, macs_per_image=4_089_184_256,
              activation_elems_per_image=32_042_472),
    ModelSpec("resnet101", "ResNet-101", _IMAGENET, "resnet:resnet", (("depth", 101),),
              params=44_549_160, macs_per_image=7_801_405_440,
              activation_elems_per_image=47_396_328),
    ModelSpec("resnet152", "ResNet-152", _IMAGENET, "resnet:resnet", (("depth", 152),),
              params=60_192_808, macs_per_image=11_513_626_624,
              activation_elems_per_image=66_362_856),
    ModelSpec("resnet200", "ResNet-200, pre-activation (He 2016)", _IMAGENET,
              "preresnet:resnet200", params=64_666_152, macs_per_image=15_007_481_856,
              activation_elems_per_image=93_758_952),
    ModelSpec("vgg16", "VGG-16 (configuration D)", _IMAGENET, "vgg:vgg16", params=138_357_544,
              macs_per_image=15_470_264_320,
              activation_elems_per_image=28_701_160),
    ModelSpec("vgg19", "VGG-19 (configuration E)", _IMAGENET, "vgg:vgg19", params=143_667_240,
              macs_per_image=19_632_062_464,
              activation_elems_per_image=31_310_312),
    ModelSpec("mobilenet_v2", "MobileNetV2 1.0 (edge network)", _IMAGENET,
              "mobilenet:mobilenet_v2", params=3_504_872, macs_per_image=300_774_272,
              activation_elems_per_image=19_466_856),
]

_BY_NAME: Dict[str, ModelSpec] = {spec.name: spec for spec in _SPECS}
_ALIASES = {"inception_v1": "googlenet", "bvlc_alexnet": "alexnet", "mobilenetv2": "mobilenet_v2",
            "resnet-50": "resnet50", "vgg-16": "vgg16",
            "overfeat_fast": "overfeat", "resnet-200": "resnet200"}


def list_specs() -> List[ModelSpec]:
    return list(_SPECS)


def get_spec(name: str, prefix: str = "") -> ModelSpec:
    """The built-in network `name`; else a UsageError naming the closest (written with
    `prefix`, as the user wrote the name: `sim:resnet18` for `sim:resnet19`)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _BY_NAME:
        import difflib

        close = difflib.get_close_matches(key, [*_BY_NAME, *_ALIASES], n=1, cutoff=0.6)
        hint = "`jetbench models` lists the built-in networks; your own model is a TorchScript " \
            "file (model.pt) or module:callable with --input-shape"
        raise UsageError(f"unknown model: {prefix + name!r}"
                         + (f" (did you mean {prefix + close[0]!r}?)" if close else ""), hint=hint)
    return _BY_NAME[key]


def check_model_names(names: Iterable[str]) -> None:
    """Every name is a built-in network or looks like the user's own (file, module:callable):
    a misspelt name is refused at once, with a suggestion, before torch is imported; an ONNX
    model or TensorRT engine that is not there, too."""
    for name in names:
        kind = model_kind(name)
        if kind == SIM:
            get_spec(name.strip()[len(SIM_PREFIX):], prefix=SIM_PREFIX)  # a built-in network
        elif kind != PYTORCH:
            check_model_file(name)
        elif not is_builtin(name) and not looks_custom(name):
            get_spec(name)


def is_builtin(name: str) -> bool:
    key = name.strip().lower()
    return _ALIASES.get(key, key) in _BY_NAME
