"""Issue 59, item 3: `daemon --tune --phases` tells which phase runs from which counter moves,
and measures each phase's windows from move to move of its own counter at its own point
(daemon/phase_windows.py), pure: synthetic readings every 50 ms, an energy total growing at a
known power."""

from __future__ import annotations

import pytest

from jetbench.daemon.live_rate import PrometheusSource, Selector
from jetbench.daemon.phase_windows import (
    IDLE,
    EnergyTrace,
    PhaseReading,
    PhaseWindows,
    parse_phases,
)
from jetbench.errors import UsageError

URL = "http://127.0.0.1:8000/metrics"
TOP, LOW = (3, 2), (0, 2)


def _reading(t: float, prompt: float, generated: float) -> PhaseReading:
    return PhaseReading(t, prompt + generated, counts=(prompt, generated))


def _energy(watts_at):
    """An energy trace read every 10 ms from t=0, at watts_at(t)."""
    trace, joules = EnergyTrace(), 0.0
    for k in range(0, 6001):
        t = k * 0.01
        trace.add(t, joules)
        joules += watts_at(t) * 0.01
    return trace


def test_the_phase_is_the_counter_that_moves_and_idle_after_a_second_of_none():
    w = PhaseWindows(("prefill", "decode"), window_s=10.0)
    flat = _energy(lambda t: 5.0)
    seen = []
    for t, p, g in ((0.00, 0, 0), (0.05, 256, 0), (0.10, 256, 0), (0.15, 512, 1),
                    (0.20, 512, 2), (0.25, 512, 3), (0.30, 768, 4), (0.35, 768, 4),
                    (1.30, 768, 4), (1.40, 768, 4)):
        w.observe(_reading(t, p, g), flat.at, TOP, pinned_at=-1.0)
        seen.append(w.running)
    # prefill moves; nothing moves (a chunk under way: still prefill); both move at the
    # prefill's last chunk (the first listed wins); decode; both again; nothing for 0.05 s
    # (decode goes on), then for 1 s (idle)
    assert seen == [IDLE, "prefill", "prefill", "prefill", "decode", "decode", "prefill",
                    "prefill", IDLE, IDLE]
    assert w.switches == 4


def test_a_window_is_the_phases_own_time_from_move_to_move_at_its_point():
    # decode: a token every 50 ms at 10 W; prefill (between requests): 256 tokens every
    # 100 ms at 15 W. Only decode's pieces count in decode's window: 20 tokens/s, 10 W, 2/J.
    def watts(t: float) -> float:
        return 15.0 if 1.0 <= t < 1.5 else 10.0

    trace = _energy(watts)
    w = PhaseWindows(("prefill", "decode"), window_s=1.5)
    prompt = generated = 0.0
    done = []
    for k in range(1, 61):
        t = round(k * 0.05, 2)
        if 1.0 < t <= 1.5:
            if k % 2 == 0:
                prompt += 256
        else:
            generated += 1
        done += w.observe(_reading(t, prompt, generated), trace.at, LOW, pinned_at=0.0)
    decode = [d for d in done if d[0] == "decode"]
    assert len(decode) == 1 and decode[0][1] == LOW
    window = decode[0][2]
    assert window.items_per_s == pytest.approx(20.0)
    assert window.power_w == pytest.approx(10.0)
    assert window.items_per_j == pytest.approx(2.0)
    # its time: 1.5 s of decode's pieces, none across the prefill, whose own time is 0.4 s
    # (its first chunk anchors, four pieces of 100 ms follow) at 15 W and 2560 tokens/s
    assert w.totals["prefill"].seconds == pytest.approx(0.4)
    assert w.totals["prefill"].items / w.totals["prefill"].joules == pytest.approx(2560 / 15)


def test_no_piece_spans_a_pin_nor_a_restart_of_the_counters():
    trace = _energy(lambda t: 8.0)
    w = PhaseWindows(("prefill", "decode"), window_s=100.0)
    generated = 0.0
    for k in range(1, 21):  # a token every 50 ms; pinned anew at 0.52 s
        generated += 1
        t = round(k * 0.05, 2)
        w.observe(_reading(t, 0, generated), trace.at, LOW if t > 0.52 else TOP,
                  pinned_at=0.52 if t > 0.52 else 0.0)
    # the first reading is the baseline, the second move the first anchor: pieces at TOP from
    # 0.10 to 0.50 (8 of them); at LOW only from the first move after 0.52 + SETTLE_S (the
    # 0.60 s reading) on: 0.60..1.00 (8): none across the pin
    assert w.totals["decode"].seconds == pytest.approx(0.40 + 0.40)
    w.observe(_reading(1.05, 0, 0.0), trace.at, LOW, pinned_at=0.52)  # the server restarted
    w.observe(_reading(1.10, 0, 1.0), trace.at, LOW, pinned_at=0.52)
    assert w.totals["decode"].seconds == pytest.approx(0.80)  # nothing across the restart


def test_the_rate_uncertainty_is_the_timing_of_the_runs_ends_or_their_spread():
    trace = _energy(lambda t: 8.0)
    w = PhaseWindows(("prefill", "decode"), window_s=0.999)
    out = []
    for k in range(1, 23):  # a baseline, an anchor, then one run of 20 pieces of 50 ms
        out += w.observe(_reading(round(k * 0.05, 2), 0, float(k)), trace.at, TOP, 0.0)
    (_, _, window), = out
    # one run of 1 s: its ends each seen up to 50 ms late, 50 ms / sqrt(6) = 2.04%
    assert window.items_per_s_uncertainty_pct == pytest.approx(100 * 0.05 / 6 ** 0.5)


def test_phases_are_parsed_with_their_counters_or_refused():
    rate = PrometheusSource(URL, Selector("vllm:generation_tokens_total"))
    phases = parse_phases('prefill:vllm:prompt_tokens_total{model_name="a",x="b,c"},'
                          'decode:vllm:generation_tokens_total', rate)
    assert [p.name for p in phases] == ["prefill", "decode"]
    assert phases[0].selector == Selector("vllm:prompt_tokens_total",
                                          (("model_name", "a"), ("x", "b,c")))
    for bad in ("prefill:a", "prefill:a,prefill:b", "prefill:a,decode:a", "Pre fill:a,b:c",
                "idle:a,decode:b", "prefill,decode:b", "prefill:a,decode:9x"):
        with pytest.raises(UsageError):
            parse_phases(bad, rate)


class _Source:
    """Hands PhasedTuning the readings a test sets, as a polled source would."""

    def __init__(self) -> None:
        self.reading = _reading(0.0, 0, 0)
        self.faults = 0

    def read(self):
        return self.reading

    def close(self) -> None:
        pass


def test_the_running_phases_point_is_pinned_and_idle_pins_the_first_phases():
    from jetbench.daemon.live_rate import PrometheusSource
    from jetbench.daemon.live_tuning import TuneConfig
    from jetbench.daemon.online_tuner import Space
    from jetbench.daemon.phase_windows import PhaseCounter
    from jetbench.daemon.phased_tuning import PhasedTuning

    space = Space(("gpu", "emc"), ((306, 408, 510, 624), (204, 665, 2133)))
    now = [0.0]
    pins: list = []
    source = _Source()
    tuning = PhasedTuning(
        TuneConfig(rate=PrometheusSource(URL, Selector("x")), window_s=1.0),
        (PhaseCounter("prefill", Selector("p")), PhaseCounter("decode", Selector("g"))),
        source, space, read_power=lambda: 5.0, pin=pins.append, clock=lambda: now[0],
        read_energy=lambda: (now[0], 5.0 * now[0]))  # type: ignore[arg-type]
    tuning.begin({"gpu": 624, "emc": 2133})
    assert pins == [{"gpu": 624, "emc": 2133}]
    tuning.points["decode"] = (0, 2)  # as if decode's controller had chosen 306 / 2133

    def at(t: float, prompt: float, generated: float) -> None:
        now[0] = t
        source.reading = _reading(t, prompt, generated)
        tuning.tick()

    at(0.05, 0, 0)
    at(0.10, 256, 0)  # prefill runs: its point is the one pinned, nothing new
    at(0.15, 256, 1)
    at(0.20, 256, 2)  # decode runs: decode's point
    assert pins[-1] == {"gpu": 306, "emc": 2133} and len(pins) == 2
    at(0.25, 256, 3)
    at(1.30, 256, 3)  # nothing for over a second: idle, the first phase's point again
    assert tuning.windows.running == IDLE and pins[-1] == {"gpu": 624, "emc": 2133}
    tuning.stop("restore")
    at(1.35, 256, 4)  # stopped by the operator: no pin
    assert len(pins) == 3 and tuning.phase == "stopped"
    tuning.resume()  # the point it held, pinned again
    assert len(pins) == 4
    doc = tuning.doc()
    assert doc["workload_phase"] == IDLE and set(doc["workload_phases"]) == {"prefill",
                                                                             "decode"}
