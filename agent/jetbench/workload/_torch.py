"""The one place that imports torch, so a missing torch is a message, not a traceback."""

from __future__ import annotations

from types import ModuleType

from ..errors import HardwareError
from ..interrupts import held_sigint

INSTALL_HINT = (
    "install PyTorch: on a PC `pip install torch==2.13.0` (CPU build: "
    "--index-url https://download.pytorch.org/whl/cpu); on a Jetson, NVIDIA's wheel for your "
    "JetPack (https://developer.nvidia.com/embedded/downloads, 'PyTorch for Jetson')"
)


def import_torch() -> ModuleType:
    """torch, imported with Ctrl-C held until the import is over (see `interrupts.py`)."""
    try:
        with held_sigint():
            import torch
    except ImportError as err:
        raise HardwareError("PyTorch is not installed; workloads need it",
                            hint=INSTALL_HINT) from err
    return torch
