"""Profiles: TOML files that say how to pin a board. Parsed and checked here, whole, before any
write; `targets.py` then resolves them against a board's frequency tables.

```toml
description = "..."
skip_missing = false        # true: sections for clocks this board lacks are skipped, not refused
[match]   soc = ["tegra210"]   family = ["tx1", "tx1-r24"]
[cpu]     governor = "userspace" (or a list: the first one available)
          freq = "max" | min_freq = ... / max_freq = ...   online = true   idle = false
[gpu]     freq = "690MHz" | min_freq / max_freq   railgate = false
          memory_freq = "max"   power_limit = "max" | "default" | "250W"   (discrete GPUs, NVML)
[emc]     freq = "max"
[fan]     pwm = 255
[[write]] path = "/sys/..."  value = "..."     (expert knobs: a knob file of hw/fs.py's table)
```
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict, Union

from ..bounded import nesting_depth
from ..errors import ProfileError, UnsafePath, UsageError
from ..hw.fs import MAX_KNOB_BYTES, check_knob_value
from ..units import FreqSpec, format_hz, parse_freq

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11 on JetPack 5/6
    import tomli as tomllib

PACKAGE_PROFILES = Path(__file__).resolve().parent / "shipped"
SYSTEM_PROFILES = "/etc/jetbench/profiles"  # under the root

# The largest profile read (a shipped one is under 2 KiB): a file past it, or a device such
# as /dev/zero behind a link, is refused rather than read without end.
MAX_PROFILE_BYTES = 1024 * 1024
# No real profile nests deeper than 3 (a table, an array of tables, a list); refuse past this.
MAX_NESTING = 32
_TOP_KEYS = {"description", "skip_missing", "match", "cpu", "gpu", "emc", "fan", "write",
             "context"}
_SECTION_KEYS = {
    "match": {"soc", "family"},
    "cpu": {"governor", "freq", "min_freq", "max_freq", "online", "idle"},
    "gpu": {"freq", "min_freq", "max_freq", "railgate", "memory_freq", "power_limit"},
    "emc": {"freq"},
    "fan": {"pwm"},
    # where a tuned profile was found (tune --save-profile): the power mode and its caps
    "context": {"power_mode", "power_mode_id", "caps"},
}


@dataclass(frozen=True)
class FreqRange:
    """A frequency request: `freq` pins min = max; or separate bounds."""

    min: Optional[FreqSpec] = None
    max: Optional[FreqSpec] = None

    @property
    def pinned(self) -> bool:
        return self.min is not None and self.min == self.max


@dataclass(frozen=True)
class Profile:
    name: str
    source: str  # file path, or "built-in"
    description: str = ""
    skip_missing: bool = False
    match_soc: Tuple[str, ...] = ()
    match_family: Tuple[str, ...] = ()
    cpu_governors: Tuple[str, ...] = ()  # first available wins
    cpu_freq: Optional[FreqRange] = None
    cpu_online: Optional[bool] = None
    cpu_idle: Optional[bool] = None
    gpu_freq: Optional[FreqRange] = None
    gpu_railgate: Optional[bool] = None
    gpu_memory_freq: Optional[FreqSpec] = None  # a discrete GPU's memory clock (NVML lock)
    gpu_power_limit: Optional[Union[str, int]] = None  # "max" | "min" | "default" | mW (NVML)
    emc_freq: Optional[FreqSpec] = None
    fan_pwm: Optional[int] = None
    writes: Tuple[Tuple[str, str], ...] = field(default=())
    sections: Tuple[str, ...] = ()  # the sections present, for "this board has no GPU"
    # Set by --beyond-power-mode (never by a file): "max" is the hardware's, not the mode's.
    beyond_power_mode: bool = False
    # Sections a command's options (--freq, --cpu-freq, --emc-freq) set over the profile's own
    # (never by a file): a note or refusal about them names the option, not the profile.
    from_options: Tuple[str, ...] = ()
    # [context]: the power mode a tuned profile was found in, and the caps that bound it
    tuned_mode_id: Optional[int] = None
    tuned_mode: str = ""
    tuned_caps: Tuple[str, ...] = ()

    def with_fan(self, pwm: int) -> Profile:
        fields = dict(self.__dict__)
        fields["fan_pwm"] = pwm
        fields["sections"] = tuple(dict.fromkeys(self.sections + ("fan",)))
        return Profile(**fields)


class _ProfileNamed(TypedDict):
    name: str
    source: str


class _ProfileFields(_ProfileNamed, total=False):
    """Profile's fields as parse_profile gathers them from a file (beyond_power_mode never)."""
    description: str
    skip_missing: bool
    match_soc: Tuple[str, ...]
    match_family: Tuple[str, ...]
    cpu_governors: Tuple[str, ...]
    cpu_freq: Optional[FreqRange]
    cpu_online: Optional[bool]
    cpu_idle: Optional[bool]
    gpu_freq: Optional[FreqRange]
    gpu_railgate: Optional[bool]
    gpu_memory_freq: Optional[FreqSpec]
    gpu_power_limit: Optional[Union[str, int]]
    emc_freq: Optional[FreqSpec]
    fan_pwm: Optional[int]
    writes: Tuple[Tuple[str, str], ...]
    sections: Tuple[str, ...]
    tuned_mode_id: Optional[int]
    tuned_mode: str
    tuned_caps: Tuple[str, ...]


class _Checker:
    def __init__(self, name: str):
        self.name = name

    def fail(self, where: str, message: str) -> ProfileError:
        return ProfileError(f"profile {self.name}: {where}: {message}",
                            hint="nothing was written; see `jetbench profiles show maxperf`")

    def keys(self, where: str, table: Mapping[str, object], allowed: AbstractSet[str]) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(where, f"unknown key {unknown[0]!r} (allowed: "
                                   f"{', '.join(sorted(allowed))})")

    def boolean(self, where: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}")
        return value

    def strings(self, where: str, value: object) -> Tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise self.fail(where, f"expected a string or a list of strings, got {value!r}")

    def freq(self, where: str, value: object) -> FreqSpec:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(where, f"expected a frequency like \"690MHz\", got {value!r}")
        try:
            return parse_freq(value)
        except UsageError as err:
            raise self.fail(where, err.message) from err

    def freq_range(self, section: str, table: Mapping[str, object]) -> Optional[FreqRange]:
        if "freq" in table and ("min_freq" in table or "max_freq" in table):
            raise self.fail(f"[{section}]", "give either freq, or min_freq/max_freq, not both")
        if "freq" in table:
            spec = self.freq(f"[{section}] freq", table["freq"])
            return FreqRange(spec, spec)
        if "min_freq" in table or "max_freq" in table:
            lo = self.freq(f"[{section}] min_freq", table["min_freq"]) \
                if "min_freq" in table else None
            hi = self.freq(f"[{section}] max_freq", table["max_freq"]) \
                if "max_freq" in table else None
            if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
                raise self.fail(f"[{section}]", "min_freq is above max_freq")
            return FreqRange(lo, hi)
        return None


def parse_profile(text: str, name: str, source: str = "built-in") -> Profile:
    """Parse and check a profile's TOML. Board-specific checks happen in `targets.resolve`."""
    check = _Checker(name)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise check.fail("TOML", str(err)) from err
    except RecursionError:
        raise check.fail("TOML", f"nested deeper than {MAX_NESTING} levels") from None
    if nesting_depth(doc, MAX_NESTING) > MAX_NESTING:
        raise check.fail("TOML", f"nested deeper than {MAX_NESTING} levels")
    check.keys("top level", doc, _TOP_KEYS)
    for section, allowed in _SECTION_KEYS.items():
        if section in doc:
            if not isinstance(doc[section], dict):
                raise check.fail(f"[{section}]", "expected a table")
            check.keys(f"[{section}]", doc[section], allowed)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise check.fail("description", "expected a string")
    fields: _ProfileFields = {
        "name": name,
        "source": source,
        "description": description,
        "skip_missing": check.boolean("skip_missing", doc.get("skip_missing", False)),
        "sections": tuple(s for s in ("cpu", "gpu", "emc", "fan") if s in doc),
    }
    context = doc.get("context", {})
    if "power_mode_id" in context:
        mode_id = context["power_mode_id"]
        if type(mode_id) is not int or mode_id < 0:
            raise check.fail("[context] power_mode_id", "expected a mode id (an integer >= 0)")
        fields["tuned_mode_id"] = mode_id
    if "power_mode" in context:
        if not isinstance(context["power_mode"], str):
            raise check.fail("[context] power_mode", "expected a string")
        fields["tuned_mode"] = context["power_mode"][:100]
    if "caps" in context:
        fields["tuned_caps"] = check.strings("[context] caps", context["caps"])
    match = doc.get("match", {})
    if "soc" in match:
        fields["match_soc"] = check.strings("[match] soc", match["soc"])
    if "family" in match:
        fields["match_family"] = check.strings("[match] family", match["family"])
    cpu = doc.get("cpu", {})
    if "governor" in cpu:
        fields["cpu_governors"] = check.strings("[cpu] governor", cpu["governor"])
    fields["cpu_freq"] = check.freq_range("cpu", cpu)
    if "online" in cpu:
        fields["cpu_online"] = check.boolean("[cpu] online", cpu["online"])
    if "idle" in cpu:
        fields["cpu_idle"] = check.boolean("[cpu] idle", cpu["idle"])
    gpu = doc.get("gpu", {})
    fields["gpu_freq"] = check.freq_range("gpu", gpu)
    if "railgate" in gpu:
        fields["gpu_railgate"] = check.boolean("[gpu] railgate", gpu["railgate"])
    if "memory_freq" in gpu:
        fields["gpu_memory_freq"] = check.freq("[gpu] memory_freq", gpu["memory_freq"])
    if "power_limit" in gpu:
        fields["gpu_power_limit"] = parse_power_limit(check, gpu["power_limit"])
    if "freq" in doc.get("emc", {}):
        fields["emc_freq"] = check.freq("[emc] freq", doc["emc"]["freq"])
    if "pwm" in doc.get("fan", {}):
        pwm = doc["fan"]["pwm"]
        if isinstance(pwm, bool) or not isinstance(pwm, int) or not 0 <= pwm <= 255:
            raise check.fail("[fan] pwm", f"expected an integer 0..255, got {pwm!r}")
        fields["fan_pwm"] = pwm
    writes = doc.get("write", [])
    if not isinstance(writes, list):
        raise check.fail("[[write]]", "expected an array of tables")
    pairs: List[Tuple[str, str]] = []
    for k, entry in enumerate(writes):
        where = f"[[write]] #{k + 1}"
        if not isinstance(entry, dict):
            raise check.fail(where, "expected a table with path and value")
        check.keys(where, entry, {"path", "value"})
        path, value = entry.get("path"), entry.get("value")
        if not isinstance(path, str) or not path.startswith("/"):
            raise check.fail(f"{where} path", f"expected an absolute path, got {path!r}")
        if len(path) > MAX_KNOB_BYTES or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
            raise check.fail(f"{where} path", f"control characters in {path[:80]!r}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise check.fail(f"{where} value", f"expected a string or integer, got {value!r}")
        try:
            check_knob_value(str(value), path)
        except UnsafePath as err:
            raise check.fail(f"{where} value", err.message) from None
        pairs.append((path, str(value)))
    fields["writes"] = tuple(pairs)
    return Profile(**fields)


POWER_LIMIT_WORDS = ("max", "min", "default")


def parse_power_limit(check: _Checker, value: object) -> Union[str, int]:
    """'max' | 'min' | 'default' | '250W' | 250 (watts) -> the word, or milliwatts."""
    where = "[gpu] power_limit"
    if isinstance(value, str) and value.strip().lower() in POWER_LIMIT_WORDS:
        return value.strip().lower()
    text = value.strip().upper().rstrip("W").strip() if isinstance(value, str) else value
    try:
        watts = float(text) if isinstance(text, (str, int, float)) and not isinstance(
            text, bool) else -1.0  # a TOML date, array or table: not watts
    except (TypeError, ValueError):
        watts = -1.0
    if not 0 < watts < 100_000:
        raise check.fail(where, f"expected max, min, default or watts like \"250W\", "
                                f"got {value!r}")
    return int(round(watts * 1000))


def profile_dirs(root_base: Union[str, os.PathLike]) -> List[Path]:
    """Where named profiles live: the system's (under the root), then the package's."""
    return [Path(root_base) / SYSTEM_PROFILES.lstrip("/"), PACKAGE_PROFILES]


def list_profiles(root_base: Union[str, os.PathLike]) -> List[Tuple[str, Path]]:
    seen: Dict[str, Path] = {}
    for directory in profile_dirs(root_base):
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                seen.setdefault(path.stem, path)
    return sorted(seen.items())


def load_profile(spec: str, root_base: Union[str, os.PathLike] = "/",
                 allow_paths: bool = True) -> Profile:
    """A profile by name (from the profile directories) or, if allowed, by file path."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in spec):
        raise UsageError(f"a profile name or path cannot contain control characters: {spec!r}")
    looks_like_path = spec.endswith(".toml") or os.sep in spec
    if looks_like_path:
        if not allow_paths:
            raise UsageError(f"profiles are chosen by name here, not by path: {spec!r}")
        path = Path(spec)
        if not path.is_file():
            raise UsageError(f"no such profile file: {spec}")
        return parse_profile(_read(path), path.stem, str(path))
    for name, path in list_profiles(root_base):
        if name == spec:
            return parse_profile(_read(path), name, str(path))
    import difflib

    known = [n for n, _ in list_profiles(root_base)]
    near = difflib.get_close_matches(spec, known, n=1)
    raise UsageError(f"no profile named {spec!r}",
                     hint=(f"did you mean {near[0]}? " if near else "") +
                     f"available: {', '.join(known)}")


def _read(path: Path) -> str:
    """A profile's text: a regular file (a link to one is fine), at most MAX_PROFILE_BYTES;
    opened without blocking, so a FIFO or a device never stalls the reader."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise UsageError(f"cannot read profile ({err.strerror})", path=str(path)) from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError("a profile must be a regular file (this is a device, a FIFO or "
                             "a directory)", path=str(path))
        data = os.read(fd, MAX_PROFILE_BYTES + 1)
        while data and len(data) <= MAX_PROFILE_BYTES:
            more = os.read(fd, MAX_PROFILE_BYTES + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as err:
        raise UsageError(f"cannot read profile ({err.strerror})", path=str(path)) from err
    finally:
        os.close(fd)
    if len(data) > MAX_PROFILE_BYTES:
        raise UsageError(f"profile larger than {MAX_PROFILE_BYTES // 1024 // 1024} MiB: refused",
                         path=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"cannot read profile: not UTF-8 ({err.reason})",
                         path=str(path)) from err


def describe(profile: Profile) -> Sequence[Tuple[str, str]]:
    """(setting, value) rows for `jetbench profiles show`."""
    rows: List[Tuple[str, str]] = [("source", profile.source)]
    if profile.description:
        rows.append(("description", profile.description))
    if profile.match_soc or profile.match_family:
        rows.append(("matches", ", ".join(profile.match_soc + profile.match_family)))

    def hz(spec: Optional[FreqSpec]) -> str:
        return "-" if spec is None else spec if isinstance(spec, str) else format_hz(spec)

    def rng(r: Optional[FreqRange]) -> Optional[str]:
        if r is None:
            return None
        return hz(r.min) if r.pinned else f"{hz(r.min)} .. {hz(r.max)}"

    for key, value in (
        ("cpu governor", " or ".join(profile.cpu_governors) or None),
        ("cpu freq", rng(profile.cpu_freq)),
        ("cpu online", profile.cpu_online),
        ("cpu idle states", profile.cpu_idle),
        ("gpu freq", rng(profile.gpu_freq)),
        ("gpu railgate", profile.gpu_railgate),
        ("gpu memory freq", hz(profile.gpu_memory_freq)
         if profile.gpu_memory_freq is not None else None),
        ("gpu power limit", f"{profile.gpu_power_limit / 1000:g} W"
         if isinstance(profile.gpu_power_limit, int) else profile.gpu_power_limit),
        ("emc freq", hz(profile.emc_freq) if profile.emc_freq is not None else None),
        ("fan pwm", profile.fan_pwm),
    ):
        if value is not None:
            rows.append((key, str(value).lower() if isinstance(value, bool) else str(value)))
    for path, value in profile.writes:
        rows.append(("write", f"{path} = {value}"))
    return rows
