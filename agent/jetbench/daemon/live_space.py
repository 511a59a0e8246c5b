"""What `daemon --tune` searches and pins: the knobs (those the board has, by default), each
knob's rates as the kernel runs them, the profile that pins a point over the one held, and a
window's power from the total's energy."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import HardwareError
from ..hw.board import Board
from ..hw.fs import Root
from ..units import format_hz

if TYPE_CHECKING:
    from ..documents import ClockDoc
    from ..profiles.profile import Profile

log = logging.getLogger("jetbench.daemon")


def knobs_for(board: Board) -> Tuple[str, ...]:
    """--tune-knobs by default: the clocks this board has (a PC's NVIDIA GPU: gpu; a Jetson:
    gpu and emc); HardwareError where it has none jetbench can set."""
    knobs = tuple(k for k, present in (("gpu", board.gpu is not None or bool(board.nvml_gpus)),
                                       ("emc", board.emc is not None)) if present)
    if not knobs:
        raise HardwareError("--tune: this machine has no GPU or EMC clock jetbench can set",
                            hint="jetbench info lists what it found")
    return knobs


def energy_power(energies: Sequence[Tuple[float, float]]
                  ) -> Optional[Tuple[float, List[float]]]:
    """A window's power from the total's energy at its samples: the first-to-last difference
    over its time, and the intervals' powers (their spread is its noise: window_noise.py); None
    where the energy did not grow monotonically over at least two samples."""
    if len(energies) < 2:
        return None
    (t0, e0), (t1, e1) = energies[0], energies[-1]
    steps = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(energies, energies[1:])
             if b[0] > a[0]]
    if t1 <= t0 or e1 < e0 or any(p < 0 for p in steps):
        return None
    return (e1 - e0) / (t1 - t0), steps


def live_space(root: Root, board: Board, knobs: Sequence[str], beyond_power_mode: bool,
               pin: Callable[[Dict[str, int]], None]) -> Dict[str, List[int]]:
    """Each knob's candidates, the rates the kernel runs, each once: the GPU's and CPU's table
    entries within the power mode's caps (the mode's, from the journal's originals: a profile
    the daemon pinned is no cap), the EMC's listed rates, or where the kernel lists none the
    rates it runs when asked for shares of its max, probed as `tune` probes them (each pinned
    with the daemon's own journalled pin, `pin`): a share rounds to a table rate, and several
    shares to the same one."""
    from ..hw.readings import emc_running_hz, rates_that_run
    from ..ownership import journal
    from ..run.tune.space import search_space

    originals = {e.path: e.raw for e in journal.load(root)}
    tables = search_space(root, board, knobs, beyond_power_mode, originals)
    emc = board.emc
    if "emc" in tables and emc is not None and not emc.available_hz:
        asked = tables["emc"]
        tables["emc"] = rates_that_run(asked, lambda hz: pin({"emc": hz}),
                                       lambda: emc_running_hz(root, board))
        log.info("tune: the EMC lists no rates: asked for %s, it runs %s", rates_text(asked),
                 rates_text(tables["emc"]))
    return tables


def opened_space(root: Root, board: Board, knobs: Optional[Sequence[str]],
                 beyond_power_mode: bool, total_power_w: Callable[[], Optional[float]],
                 pin: Callable[[Dict[str, int]], None],
                 read_clocks: Callable[[], Sequence[ClockDoc]],
                 known_rates: Callable[[Sequence[int]], None]
                 ) -> Tuple[Dict[str, Optional[int]], Dict[str, List[int]]]:
    """What `--tune` (with or without --phases) needs of the board before its first window:
    a power reading (HardwareError where there is none), the point the board holds (read
    before the EMC's rates are probed, which moves it) and the knobs' tables among the rates
    that run (`live_space`, told to `known_rates` before the first pin)."""
    import time

    from ..errors import UsageError

    total_power_w()  # an energy counter gives watts from its second reading on
    time.sleep(0.3)
    if total_power_w() is None:
        raise HardwareError("--tune: this board has no power reading to divide by (no "
                            "rails, RAPL or NVML): items per joule cannot be measured")
    names = tuple(knobs) if knobs else knobs_for(board)
    held: Dict[str, Optional[int]] = {}
    for c in read_clocks():
        if c["domain"] in names and c.get("cur_hz"):
            held[c["domain"]] = max(held.get(c["domain"]) or 0, int(c["cur_hz"] or 0))
    try:
        tables = live_space(root, board, names, beyond_power_mode, pin)
    except UsageError as err:  # said in the daemon's own option's name
        raise UsageError(err.message.replace("--knobs", "--tune-knobs"), hint=err.hint) \
            from None
    for rates in tables.values():
        known_rates(rates)
    return held, {k: list(v) for k, v in tables.items()}


def rates_text(hz: Sequence[int]) -> str:
    return ", ".join(format_hz(v) for v in hz)


def tuned_profile(held: Optional[Profile], hz: Dict[str, int], beyond_power_mode: bool
                  ) -> Profile:
    """The profile that pins the controller's point `hz` over the one held (or alone)."""
    from ..profiles.profile import FreqRange, Profile

    base = held or Profile("live-tuned", "daemon --tune")
    return dataclasses.replace(
        base, name="live-tuned", source="daemon --tune",
        gpu_freq=FreqRange(hz["gpu"], hz["gpu"]) if "gpu" in hz else base.gpu_freq,
        gpu_railgate=False if "gpu" in hz else base.gpu_railgate,
        emc_freq=hz.get("emc", base.emc_freq),
        cpu_freq=FreqRange(hz["cpu"], hz["cpu"]) if "cpu" in hz else base.cpu_freq,
        cpu_online=True if "cpu" in hz else base.cpu_online,
        sections=tuple(dict.fromkeys(base.sections + tuple(hz))),
        beyond_power_mode=beyond_power_mode)
