"""NVML's Python binding (nvidia-ml-py's `pynvml`), loaded in one place for both its users:
the power source (hw/meters/nvml.py) and the clock locks (hw/nvml_clocks.py)."""

from __future__ import annotations

from typing import Any

from ..errors import HardwareError


def load_pynvml(consequence: str = "") -> Any:
    """The pynvml module, or HardwareError "NVML is not installed[: consequence]"."""
    try:
        import pynvml
    except ImportError as err:
        what = "NVML is not installed" + (f": {consequence}" if consequence else "")
        raise HardwareError(what, hint="pip install 'jetbench[nvml]' (nvidia-ml-py)") from err
    return pynvml


def nvml_text(value: Any) -> str:
    """An NVML string: bytes in older nvidia-ml-py releases, str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)
