"""Rails through the jetson-stats service (optional extra: `pip install jetbench[jetson]`).

When the jtop service runs, its client serves the INA3221 rails to non-root users. Readings come
at the service's interval (0.5 s asked here; a running service keeps its own, which
`client.interval` reports after start() and which becomes this source's period), so this source
suits long windows.
The total follows jetbench's rule (VDD_IN/POM_5V_IN, else the sum of the rails), not jtop's own.

Two shapes of `client.power`: before jetson-stats 4.2 every rail, VDD_IN included, is under
`'rail'`; from 4.2 (and in 7.x) the module input moves out of `'rail'` into `'tot'`, which then
carries its `'name'` (a `'tot'` without a name, or named otherwise, is jtop's own sum: ignored).
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

from ...errors import HardwareError
from .base import Channel, Reading, Total
from .ina3221 import TOTAL_RAIL_NAMES

SOURCE_NAME = "jtop"
# Supplies some jetson-stats versions list beside the rails (USB-C / USB PD inputs, read from
# the power-supply class): an input, not a rail of the module, so never part of a sum.
_SUPPLY_WORDS = ("USB", "UCSI", "TYPEC", "TYPE-C", "TYPE_C")


def is_supply(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SUPPLY_WORDS)


class JtopSource:
    pushed = False

    def __init__(self, interval_s: float = 0.5, *, name: str = SOURCE_NAME):
        self.period_s = interval_s
        self.name = name
        self._client: Any = None  # jtop's client: jetson-stats ships no types
        self._rails: List[str] = []

    def channels(self) -> Tuple[Channel, ...]:
        return tuple(
            Channel(r, self.name, "module_input" if r.upper() in TOTAL_RAIL_NAMES
                    else "board_input" if is_supply(r) else "rail", unit="mW")
            for r in self._rails
        )

    def total(self) -> Optional[Total]:
        if not self._rails:
            return None
        inp = next((r for r in self._rails if r.upper() in TOTAL_RAIL_NAMES), None)
        if inp:
            return Total(inp, "channel", (inp,), "module_input")
        summed = tuple(r for r in self._rails if not is_supply(r))
        if not summed:
            return None
        return Total("sum of " + "+".join(summed), "sum", summed, "module_input")

    def open(self) -> None:
        try:
            from jtop import JtopException, jtop
        except ImportError as err:
            raise HardwareError(
                "jetson-stats is not installed", hint="pip install 'jetbench[jetson]'"
            ) from err
        client = jtop(interval=self.period_s)
        try:
            client.start()
        except JtopException as err:
            raise HardwareError(
                f"the jtop service is not reachable ({err})",
                hint="sudo systemctl start jtop.service (or use --meter ina3221 with sudo)",
            ) from err
        self._client = client
        service_interval_s = _interval_s(getattr(client, "interval", None))
        if service_interval_s is not None:
            self.period_s = service_interval_s  # the service's cadence wins over the asked one
        rails = self._rail_dict()
        if not self._rails:
            self._rails = sorted(rails)
        if not self._rails:
            self.close()
            raise HardwareError("the jtop service reports no power rails")

    def _rail_dict(self) -> dict:
        power = self._client.power or {}
        if isinstance(power, tuple):
            # jetson-stats 4.1 and older: (total, rails) in mW under 'cur', the input rail
            # taken out of the rails and its name dropped: no named module input to report
            self.close()
            raise HardwareError("this jetson-stats gives power as (total, rails) (version 4.1 "
                                "or older): jetbench reads jetson-stats 4.2 and newer",
                                hint="sudo pip3 install -U jetson-stats (then restart "
                                "jtop.service), or use --meter ina3221")
        rails = dict(power.get("rail") or {})
        tot = power.get("tot") or {}
        name = tot.get("name") if isinstance(tot, dict) else None
        if isinstance(name, str) and name.upper() in TOTAL_RAIL_NAMES and name not in rails:
            rails[name] = tot  # 4.2+: VDD_IN/POM_5V_IN lives under 'tot'
        return rails

    def read(self) -> Reading:
        t = time.monotonic()
        rails = self._rail_dict()
        values = []
        for name in self._rails:
            mw = (rails.get(name) or {}).get("power")
            values.append(None if mw is None else mw * 1e-3)
        return Reading(t, tuple(values))

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass


def _interval_s(value: object) -> Optional[float]:
    """The service's interval in seconds, or None when it does not say."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        interval_s = float(value)
    except (TypeError, ValueError):
        return None
    return interval_s if interval_s > 0 else None
