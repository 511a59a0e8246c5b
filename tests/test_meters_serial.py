"""Each meter protocol against its simulated instrument over a real pty (and loopback TCP)
through pyserial: clean readings, and each fault counted and recovered from."""

from __future__ import annotations

import time

import pytest

from jetbench.errors import HardwareError
from jetbench.hw.fs import Root
from jetbench.hw.meters.base import SourceFault
from jetbench.hw.meters.registry import open_sources
from jetbench.sim.meters import ScpiSim, StreamSim, sim_for

PROTOCOLS = ["scpi", "wt310", "stream", "um25c"]
TIMEOUT = "timeout=0.15"


def _sim(protocol, tmp_path, power=7.25, transport="pty", **kw):
    if protocol == "stream":
        kw.setdefault("columns", "ms,W")
        kw.setdefault("interval_s", 0.005)
    sim = sim_for(protocol, power, transport=transport, directory=tmp_path, **kw)
    sim.partial_pause_s = 0.2
    return sim


def _driver(sim, extra=""):
    opts = [TIMEOUT] + ([f"columns={','.join(sim.columns)}"] if sim.protocol == "stream" else [])
    if extra:
        opts.append(extra)
    (src,) = open_sources([sim.spec + "?" + "&".join(opts)], Root("/"))
    return src


def _read_until_fault(src, kind, limit_s=5.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            src.read()
        except SourceFault as fault:
            if fault.kind == kind:
                return fault
    pytest.fail(f"no {kind} fault within {limit_s} s")


def _read_until_good(src, limit_s=5.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            return src.read()
        except SourceFault:
            continue
    pytest.fail("no good reading after the fault")


def _reopen(src, limit_s=5.0):
    deadline = time.monotonic() + limit_s
    while True:
        src.close()
        try:
            src.open()
            return
        except HardwareError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("transport", ["pty", "tcp"])
def test_clean_readings(protocol, transport, tmp_path):
    with _sim(protocol, tmp_path, transport=transport) as sim:
        src = _driver(sim)
        src.open()
        try:
            readings = [src.read() for _ in range(5)]
        finally:
            src.close()
    for r in readings:
        assert r.power_w == (pytest.approx(7.25, rel=1e-4),)
    assert all(b.t_s >= a.t_s for a, b in zip(readings, readings[1:]))
    (ch,) = src.channels()
    assert ch.point == "external" and ch.source == src.name
    assert src.total().channels == (ch.name,)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", ["stall", "garbage", "partial"])
def test_fault_is_raised_then_sampling_resumes(protocol, kind, tmp_path):
    with _sim(protocol, tmp_path) as sim:
        src = _driver(sim)
        src.open()
        try:
            src.read()
            if kind == "stall":
                sim.stall(0.4)
            elif kind == "garbage":
                sim.garbage(1)
            else:
                sim.partial(1)
            fault = _read_until_fault(src, kind)
            assert not fault.reopen
            assert _read_until_good(src).power_w == (pytest.approx(7.25, rel=1e-4),)
        finally:
            src.close()


@pytest.mark.parametrize("protocol", ["scpi", "wt310"])
def test_scpi_error_reply_is_a_fault(protocol, tmp_path):
    with _sim(protocol, tmp_path) as sim:
        src = _driver(sim)
        src.open()
        try:
            sim.error(1)
            fault = _read_until_fault(src, "error_reply")
            assert "-113" in str(fault)
            assert src.read().power_w == (pytest.approx(7.25, rel=1e-4),)
        finally:
            src.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("transport", ["pty", "tcp"])
def test_disconnect_then_reopen(protocol, transport, tmp_path):
    with _sim(protocol, tmp_path, transport=transport) as sim:
        src = _driver(sim)
        src.open()
        try:
            src.read()
            sim.disconnect(0.5)  # long enough to be seen on a loaded machine
            fault = _read_until_fault(src, "disconnect")
            assert fault.reopen
            _reopen(src)
            assert _read_until_good(src).power_w == (pytest.approx(7.25, rel=1e-4),)
            assert sim.connections == 2
        finally:
            src.close()


def test_scpi_volts_times_amps_and_identity(tmp_path):
    with ScpiSim(12.0, volts=19.0, watts=False, directory=tmp_path) as sim:
        src = _driver(sim, "vquery=MEAS:VOLT?&iquery=MEAS:CURR?")
        src.open()
        try:
            assert src.identity.startswith("JETBENCH,SIMULATED")
            assert src.read().power_w == (pytest.approx(12.0, rel=1e-6),)
        finally:
            src.close()
        assert src.channels()[0].unit == "V x A"
        # MEAS:POW? on a meter without watts is an error reply, not a zero
        plain = _driver(sim)
        plain.open()
        with pytest.raises(SourceFault) as err:
            plain.read()
        plain.close()
        assert err.value.kind == "error_reply"


def test_wt310_sets_up_its_numeric_items(tmp_path):
    with sim_for("wt310", 3.0, directory=tmp_path) as sim:
        src = _driver(sim)
        src.open()
        assert src.read().power_w == (pytest.approx(3.0),)
        src.close()
        assert ":NUMERIC:NORMAL:ITEM3 P,1" in sim.setup
        assert src.identity.startswith("YOKOGAWA,WT310")


def test_stream_default_columns_millis_mv_ma(tmp_path):
    with StreamSim(2.5, volts=5.0, interval_s=0.005, directory=tmp_path) as sim:
        src = _driver(sim)
        src.open()
        try:
            rs = [src.read() for _ in range(10)]
        finally:
            src.close()
    assert src.columns_text == "millis,mV,mA"
    assert rs[-1].power_w == (pytest.approx(2.5, rel=1e-5),)


def test_stream_wrong_column_count_is_garbage(tmp_path):
    with StreamSim(2.5, columns="ms,W", interval_s=0.005, directory=tmp_path) as sim:
        (src,) = open_sources([sim.spec + "?columns=ms,mV,mA&" + TIMEOUT], Root("/"))
        src.open()
        try:
            with pytest.raises(SourceFault) as err:
                src.read()
        finally:
            src.close()
    assert err.value.kind == "garbage"


def test_open_without_an_instrument_is_a_clear_error(tmp_path):
    (src,) = open_sources([f"scpi:{tmp_path}/nothing?{TIMEOUT}"], Root("/"))
    with pytest.raises(HardwareError, match="cannot open the meter port"):
        src.open()
    # a port that answers nothing: the set-up query stalls
    with ScpiSim(1.0, directory=tmp_path) as sim:
        sim.stall(5.0)
        src = _driver(sim)
        with pytest.raises(HardwareError, match="did not answer"):
            src.open()


def test_a_port_that_answers_eio_to_a_flush_is_a_disconnect(tmp_path, monkeypatch):
    """pyserial lets termios.error (EIO from tcflush: an unplugged adapter, a closed pty) through
    reset_input_buffer, and termios.error is not an OSError: it must still read as a
    disconnect to reopen from, never escape the driver."""
    import termios

    with _sim("scpi", tmp_path) as sim:
        src = _driver(sim)
        src.open()
        try:
            def eio() -> None:
                raise termios.error(5, "Input/output error")

            monkeypatch.setattr(src._port(), "reset_input_buffer", eio)
            with pytest.raises(SourceFault) as fault:
                src.read()
            assert fault.value.kind == "disconnect" and fault.value.reopen
        finally:
            src.close()
