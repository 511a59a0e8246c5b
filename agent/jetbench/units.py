"""Parsing and formatting of frequencies and durations (pure functions)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import List, Optional, Sequence, Union

from .errors import UsageError

# Symbolic frequencies resolved against a domain's table.
MAX = "max"
MIN = "min"

FreqSpec = Union[int, str]  # Hz, or MAX / MIN

_FREQ_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmg]?hz)?\s*$", re.IGNORECASE)
BARE_HZ_MIN = 1_000_000  # a bare number below 1 MHz is a forgotten unit, not a clock
HZ_LIMIT = 10**12  # no clock runs at a terahertz: past it a value is a typo or hostile (1e400)
_FREQ_SCALE = {None: 1, "hz": 1, "khz": 1_000, "mhz": 1_000_000, "ghz": 1_000_000_000}


def parse_freq(text: Union[str, int, float]) -> FreqSpec:
    """'690MHz', '0.69GHz', '690000000' (Hz), 'max', 'min' -> Hz (int) or MAX/MIN."""
    if isinstance(text, bool):
        raise UsageError(f"not a frequency: {text!r}")
    if isinstance(text, (int, float)):
        if not 0 < text < HZ_LIMIT:  # also refuses nan and inf (TOML's 1e400 is inf)
            raise UsageError(f"frequency must be a positive number of Hz below 1 THz: "
                             f"{text!r}")
        return int(round(text))
    word = str(text).strip().lower()
    if word in (MAX, MIN):
        return word
    match = _FREQ_RE.match(word)
    if not match:
        near = freq_suggestions(str(text))
        raise UsageError(
            f"not a frequency: {str(text)[:40]!r}",
            hint=(f"did you mean {' or '.join(near)}? " if near else "") +
                 "a frequency reads 690MHz, 0.69GHz, 690000000 (Hz), max or min",
        )
    number, unit = match.groups()
    if len(number.partition(".")[0].lstrip("0")) > 13:  # a thousand digits: never a clock
        raise UsageError(f"frequency must be below 1 THz: {str(text)[:40]!r}")
    # Decimal, not float: 624.75MHz is 624750000 Hz exactly, as typed
    value = Decimal(number) * _FREQ_SCALE[unit.lower() if unit else None]
    if not value < HZ_LIMIT:
        raise UsageError(f"frequency must be below 1 THz: {str(text)[:40]!r}")
    hz = int(value.to_integral_value())
    if hz <= 0:
        raise UsageError(f"frequency must be positive: {text!r}")
    if unit is None and hz < BARE_HZ_MIN:
        raise UsageError(f"{str(text).strip()!r} is {number} Hz: a bare number is Hz, and no "
                         "clock runs that slow",
                         hint=f"did you mean {' or '.join(freq_suggestions(number))}?")
    return hz


_UNIT_WORDS = (("g", "GHz"), ("m", "MHz"), ("k", "kHz"), ("h", "Hz"))
_LOOKALIKE_DIGITS = str.maketrans({"o": "0", "O": "0", "l": "1", "I": "1"})


# Words people type for the ends of a clock's range.
_SYMBOL_WORDS = {MAX: ("fast", "fastest", "turbo", "high", "highest", "full", "top", "maximum",
                       "performance", "peak", "mx", "maks"),
                 MIN: ("slow", "slowest", "low", "lowest", "minimum", "idle", "mn", "least")}


def freq_suggestions(text: str) -> List[str]:
    """What a mistyped frequency most likely meant, each one a form parse_freq accepts:
    '69O' -> 690MHz (a letter for a digit, a bare number below 1 MHz read as MHz, or GHz
    below 10: '1.2' -> 1.2GHz), '1.6 gigs' -> 1.6GHz (a unit word by its first letter),
    'fast' -> max; [] when nothing is near."""
    import difflib

    word = text.strip()
    out: List[str] = []
    for symbol, words in _SYMBOL_WORDS.items():
        if word.lower() in words or difflib.get_close_matches(word.lower(), [symbol], cutoff=0.6):
            out.append(symbol)
    match = re.match(r"^\s*([0-9OolI]*\.?[0-9OolI]+)\s*([a-zA-Z]*)\s*$", word)
    if match:
        number, unit = match.group(1).translate(_LOOKALIKE_DIGITS), match.group(2).lower()
        if re.fullmatch(r"[0-9]*\.?[0-9]+", number) and any(c.isdigit() for c in number):
            name = next((u for first, u in _UNIT_WORDS if unit.startswith(first)), None) \
                if unit else ("" if Decimal(number) >= BARE_HZ_MIN else
                              "GHz" if Decimal(number) < 10 else "MHz")
            if name is not None:
                out.append(f"{number}{name}")
    for symbol in (MAX, MIN):
        if word.lower().startswith(symbol[:2]) and symbol not in out:
            out.append(symbol)
    return [x for x in out if x]


def format_hz_exact(hz: int) -> str:
    """Every digit a request was typed with: 624750000 -> '624.75 MHz' (format_hz rounds to
    four figures, which is how a clock that runs is shown, not how a request is kept)."""
    for scale, unit in ((10**9, "GHz"), (10**6, "MHz"), (10**3, "kHz")):
        if abs(hz) >= scale:
            text = f"{Decimal(hz) / scale:f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + f" {unit}"
    return f"{hz} Hz"


def format_spec(spec: FreqSpec) -> str:
    """A request as the user gave it: 'max', 'min' or its exact frequency."""
    return spec if isinstance(spec, str) else format_hz_exact(spec)


def resolve_freq(spec: FreqSpec, available_hz: Sequence[int]) -> int:
    """The table entry nearest to spec (ties go to the lower one). Table must be non-empty."""
    if not available_hz:
        raise UsageError("this clock has no frequency table")
    table = sorted(available_hz)
    if spec == MAX:
        return table[-1]
    if spec == MIN:
        return table[0]
    assert isinstance(spec, int)
    return min(table, key=lambda f: (abs(f - spec), f))


def format_hz(hz: Union[int, float, None]) -> str:
    """Human form: 998.4 MHz, 1.6 GHz, 204 kHz."""
    if hz is None:
        return "-"
    hz = float(hz)
    for scale, unit in ((1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz")):
        if abs(hz) >= scale:
            return f"{hz / scale:.4g} {unit}"
    return f"{hz:.0f} Hz"


_DUR_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|ms|s|m|min|h)?\s*$", re.IGNORECASE)
_DUR_SCALE = {None: 1.0, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration_s(text: Union[str, float, int], bare: str = "s") -> float:
    """'10ms', '2.5s', '3m', '30' (seconds; `bare="ms"`: milliseconds, as tegrastats'
    --interval) -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text) * _DUR_SCALE[bare]
    else:
        match = _DUR_RE.match(str(text))
        if not match:
            raise UsageError(f"not a duration: {text!r}", hint="use e.g. 10ms, 2.5s, 3m")
        number, unit = match.groups()
        value = float(number) * _DUR_SCALE[unit.lower() if unit else bare]
    if value < 0:
        raise UsageError(f"duration must not be negative: {text!r}")
    return value


def duration_text(seconds: Optional[float]) -> str:
    """'2 s', '1 min 5 s', '1 h 2 min' ('?' where unknown)."""
    if seconds is None:
        return "?"
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def times_text(elapsed: Optional[float], remaining: Optional[float]) -> str:
    """'2 s elapsed, ~10 s left' (the time left only once it can be estimated)."""
    text = f"{duration_text(elapsed)} elapsed"
    return text + (f", ~{duration_text(remaining)} left" if remaining is not None else "")
