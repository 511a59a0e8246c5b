"""RDTech UM24C / UM25C / UM34C USB meters (usually over Bluetooth rfcomm).

Protocol: send the byte 0xF0, receive a 130-byte big-endian frame. Bytes 0-1 identify the model
(0x0963 UM24C, 0x09C9 UM25C, 0x0D4C UM34C); bytes 2-3 voltage (0.01 V, UM25C 0.001 V), 4-5
current (0.001 A, UM25C 0.0001 A), 6-9 power in mW (all models). The meters refresh about twice
a second.
"""

from __future__ import annotations

import struct
import time
from typing import Optional, Tuple

from .base import Reading, SourceFault
from .serial_meter import SerialMeter

FRAME_BYTES = 130
REQUEST = b"\xf0"
MODELS = {0x0963: "UM24C", 0x09C9: "UM25C", 0x0D4C: "UM34C"}


def decode_frame(frame: bytes) -> Tuple[str, float, float, float]:
    """(model, volts, amps, watts) from one frame; SourceFault('garbage') if it is not one."""
    if len(frame) != FRAME_BYTES:
        raise SourceFault("partial", f"{len(frame)} of {FRAME_BYTES} bytes")
    model_id, v_raw, i_raw, p_mw = struct.unpack_from(">HHHI", frame, 0)
    model = MODELS.get(model_id)
    if model is None:
        raise SourceFault("garbage", f"not a UM-series frame (header {frame[:2].hex()})")
    if model == "UM25C":
        volts, amps = v_raw / 1000.0, i_raw / 10000.0
    else:
        volts, amps = v_raw / 100.0, i_raw / 1000.0
    return model, volts, amps, p_mw / 1000.0


class Um25cMeter(SerialMeter):
    protocol = "um25c"
    default_baud = 9600
    default_period_s = 0.5

    def __init__(self, port: str, *, protocol: Optional[str] = None, **kwargs):
        if protocol:
            self.protocol = protocol  # um24c / um34c: same frames
        super().__init__(port, **kwargs)
        self.model: Optional[str] = None

    def read(self) -> Reading:
        self._flush_input()
        t_a = time.monotonic()
        self._write(REQUEST)
        frame = self._exact(FRAME_BYTES)
        model, _volts, _amps, watts = decode_frame(frame)
        self.model = model
        return Reading((t_a + time.monotonic()) * 0.5, (watts,))
