"""`jetbench daemon`: hold a profile on a board, in the foreground, under systemd.

Start: finish any interrupted job from the state journal, pin the boot profile (journalled
anew), open the control socket and the metrics endpoint, then tell systemd READY=1 with a
STATUS= line saying what is pinned. Every interval, the check (drift.py): throttling only with
evidence, a clock below its pin said as just that, any knob something else moved written back
and counted. WATCHDOG=1 at half of $WATCHDOG_USEC while the loop is healthy. SIGTERM/SIGINT:
restore the journal (the state before the daemon pinned), exit 0. SIGHUP: re-read the profile
and pin it.

The daemon owns the board for its whole life (the board lock, `ownership/lock.py`, naming its
control socket) and is the broker: `apply`, `restore` and `maxperf` from the CLI arrive as
requests (`handle`), and `measure`/`sweep` borrow the board with a lease (lending.py). Inside
the process, one lock guards the board: the loop and the socket's thread never write at once.

This file: lifecycle, signals, pinning and status. commands.py: the control requests. drift.py:
the periodic check. lending.py: leases. rails.py: the power readings and energy totals.
live_tuning.py: --tune's windows and the point it pins. logs.py: the log. held.py: what is held,
and the status line.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import signal
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Sequence, Tuple, Union

from ..errors import HardwareError, JetbenchError, UsageError
from ..hw import thermal
from ..hw.board import Board, detect
from ..hw.clocks.types import ClockReading
from ..hw.fs import Root
from ..hw.readings import read_now
from ..open_board import served_kernel
from ..ownership import journal
from ..ownership import lease as lease_file
from ..ownership.lock import BoardLock
from ..ownership.wire import DEFAULT_SOCKET, Request
from ..profiles.apply import ApplyResult, apply_profile
from ..profiles.profile import Profile, load_profile
from ..profiles.targets import resolve
from .commands import Commands
from .control import ControlServer, Peer
from .drift import SETTLE_GRACE_S, Drift, iso
from .held import Held, ReadingsDoc, StatusDoc, summary_line
from .lending import LEASE_STOP_WAIT_S, Lending
from .live_space import tuned_profile
from .live_tuning import LiveTuning, TuneConfig, open_live_tuning
from .logs import log_moved, setup_logging
from .notify import Notifier, watchdog_period_s
from .phase_windows import PhaseCounter
from .phased_tuning import PhasedTuning, open_phased_tuning
from .rails import RailMeter
from .shutdown import shut_down
from .status_doc import status_doc

if TYPE_CHECKING:  # imported where used: only on a simulated board, only with --metrics
    from ..sim.file_kernel import FileKernel
    from .metrics import MetricsServer

log = logging.getLogger("jetbench.daemon")

DEFAULT_INTERVAL_S = 5.0
SIM_KERNEL_INTERVAL_S = 0.02  # the simulated kernel beside the daemon (simulated boards only)
UNHEALTHY_AFTER = 3  # consecutive failed checks: stop feeding the watchdog, let systemd restart


@dataclass(frozen=True)
class DaemonConfig:
    profile: Optional[str] = None  # a name or a file, as the operator gave it; None: monitor only
    beyond_power_mode: bool = False  # pin past the power mode's caps (--beyond-power-mode)
    socket_path: Path = DEFAULT_SOCKET
    metrics: Optional[str] = None  # "127.0.0.1:9101"
    interval_s: float = DEFAULT_INTERVAL_S
    client_timeout_s: float = 5.0
    sim_kernel: bool = True  # run the simulated kernel in-process on a simulated board
    lease_stop_wait_s: float = LEASE_STOP_WAIT_S  # tests shorten it (--lease-stop-wait)
    tune: Optional[TuneConfig] = None  # --tune: search clocks on the live workload
    meters: Tuple[str, ...] = ()  # --meter: the power sources (default: the board's own)
    phases: Tuple[PhaseCounter, ...] = ()  # --tune --phases: a point per workload phase


class Daemon:
    """The service. Constructing one touches nothing; `run()` does everything and returns the
    exit status. Its parts: `drift` (the periodic check), `lending` (leases) and `commands`
    (the control requests), each given what it uses; what they share is `held` (held.py),
    under one lock."""

    def __init__(self, root: Root, config: DaemonConfig,
                 env: Optional[Mapping[str, str]] = None):
        self.root = root
        self.config = config
        self.env = dict(os.environ if env is None else env)
        self.notifier = Notifier.from_env(self.env)
        self.held = Held()  # the board, profile, lease, counters: shared with the parts below
        self.profile_refused: Optional[str] = None  # why the configured profile is not held
        self._lock = threading.RLock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stop_signal: Optional[int] = None
        self._reload = False
        self._started = time.time()
        self._ready = False
        self._snapshot: StatusDoc = {}
        self._rails = RailMeter([], self._error)
        self._sim: Optional[FileKernel] = None
        self._control: Optional[ControlServer] = None
        self._metrics: Optional[MetricsServer] = None
        self._board_lock: Optional[BoardLock] = None
        self.tuning: Optional[Union[LiveTuning, PhasedTuning]] = None  # --tune
        # The parts, each given what it uses (as prometheus_client composes collectors).
        self.drift = Drift(root, self.held, self._lock, self._error, self._read, self._publish)
        self.lending = Lending(root, self.held, self._lock, self.notifier, self.drift,
                               self._error, self._pin_new, self.summary)
        self.commands = Commands(root, self.held, self._lock, self.drift, self.lending,
                                 snapshot=self.snapshot,
                                 profile_refused=lambda: self.profile_refused,
                                 summary=self.summary, read=self._read, pin_new=self._pin_new,
                                 check=lambda: self.check(),
                                 stop_tuning=self._stop_tuning,
                                 resume_tuning=self._resume_tuning)

    def check(self) -> None:
        """The periodic check (drift.py); the loop calls it every interval."""
        self.drift.check()

    def _publish(self, readings: ReadingsDoc) -> None:
        self._snapshot = self._status_doc(readings)

    # -- signals -----------------------------------------------------------------------------
    # Handlers only set a flag and write a byte to a pipe the loop waits on (never Event.set:
    # a handler that takes a lock the interrupted main thread holds deadlocks).
    def _on_stop(self, signum: int, _frame: object) -> None:
        self._stop_signal = signum
        self._poke()

    def _on_hup(self, _signum: int, _frame: object) -> None:
        self._reload = True
        self._poke()

    def _poke(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # the pipe is full: the loop is awake already
            pass

    def _sleep(self, timeout: float) -> None:
        ready, _, _ = select.select([self._wake_r], [], [], timeout)
        if ready:
            try:
                os.read(self._wake_r, 512)
            except OSError:
                pass

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> int:
        self.install_signal_handlers()
        try:
            self._start()
            self._loop()
        finally:
            code = self._shutdown()
        return code

    def _start(self) -> None:
        # The board lock first, for the daemon's whole life: a second daemon on this board (any
        # socket) is refused before it touches anything. It names the socket: the CLI finds
        # the broker through it.
        lock = BoardLock(self.root, "daemon", wait_s=0.0,
                         socket=str(Path(self.config.socket_path).absolute()))
        lock.acquire()
        self._board_lock = lock
        # A token a killed daemon left: nobody holds the board lock, so no borrower uses it.
        lease_file.revoke(self.root, wait_s=0.0)
        self._control = ControlServer(self.config.socket_path, self.handle,
                                      client_timeout_s=self.config.client_timeout_s,
                                      on_disconnect=self.lending.connection_closed)
        self._control.start()
        log.info("control socket: %s", self.config.socket_path)
        board = detect(self.root)
        self.held.board = board
        if board.emc is not None:
            self.drift.known_rates(board.emc.available_hz)  # listed: each runs as written
        if board.simulated and self.config.sim_kernel and not served_kernel(self.root):
            from ..sim.file_kernel import FileKernel

            self._sim = FileKernel(self.root.base, interval_s=SIM_KERNEL_INTERVAL_S)
            self._sim.start()
        log.info("board: %s (%s)%s, root %s", board.model, board.family,
                 " [simulated]" if board.simulated else "", self.root.base)
        self._open_sources(board)  # before any pin: a --meter that does not open stops here
        with self._lock:
            pending = journal.load(self.root)
            if pending:
                log.warning("finishing an interrupted job: restoring %d journalled value(s)",
                            len(pending))
                result = journal.restore(self.root)
                log_moved(result)
                log.info("restored %d value(s), %d already in place", len(result.written),
                         result.unchanged)
            if self.config.profile:
                try:
                    profile = load_profile(self.config.profile, self.root.base,
                                           allow_paths=True)
                    self._pin_new(profile)
                except UsageError as err:
                    # A bad profile file at start: monitor on none rather than exit and be
                    # restarted by systemd for ever; SIGHUP tries the file again.
                    self.profile_refused = str(err)
                    self._error(f"profile {self.config.profile} refused, pinning nothing "
                                f"(fix it, then systemctl reload jetbench): {err}")
        self.drift.layout = thermal.scan(self.root, board)
        self.lending.attach(self._control, self._sim, self._board_lock)
        self.drift.wait_settled(board)
        if self.config.tune is not None:
            self.tuning = self._start_tuning(board, self.config.tune)
        if self.config.metrics:
            from .metrics import MetricsServer

            self._metrics = MetricsServer(self.config.metrics, self.snapshot)
            self._metrics.start()
            log.info("metrics: http://%s/metrics", self._metrics.address)
        self.check()
        self._ready = True
        status = self.summary()
        log.info("ready: %s", status)
        self.notifier.send(READY="1", STATUS=status, MAINPID=str(os.getpid()))

    def _start_tuning(self, board: Board, tune: TuneConfig
                      ) -> Union[LiveTuning, PhasedTuning]:
        """--tune (live_tuning.open_live_tuning; with --phases phased_tuning's), from the point
        the board holds."""
        return (partial(open_phased_tuning, phases=self.config.phases) if self.config.phases
                else open_live_tuning)(
            self.root, board, tune, self.config.beyond_power_mode, self._rails.total_power_w,
            self._pin_point, lambda: self._read(board).get("clocks") or [],
            lent_to=lambda: (f"lent to {self.held.lease.who}" if self.held.lease is not None
                             else None),
            known_rates=self.drift.known_rates,
            read_energy=lambda: self._rails.total_energy)

    def _stop_tuning(self, why: str) -> bool:
        """The operator's restore/apply/maxperf: the tuning stops (no pin of it lands after
        this: _pin_point checks under the same lock). True where it was tuning."""
        if self.tuning is None or self.tuning.stopped is not None:
            return False
        self.tuning.stop(why)
        return True

    def _resume_tuning(self) -> bool:
        """`pin` or a reload: a stopped tuning searches again. True where it resumed."""
        if self.tuning is None or self.tuning.stopped is None:
            return False
        self.tuning.resume()
        return True

    def _pin_point(self, hz: Dict[str, int]) -> None:
        """--tune: pin the controller's point over what is held (the journal keeps the values
        from before the daemon's first pin), within the power mode unless told otherwise."""
        with self._lock:
            assert self.held.board is not None
            if self.tuning is not None and self.tuning.stopped is not None:
                return  # the operator took the board (restore, apply): its word stands
            if self.held.lease is not None:
                # lent since the tuning last looked: nothing is written under a borrower (the
                # tuning pauses, and pins its point again when the board comes back)
                return
            profile = tuned_profile(self.held.profile, hz, self.config.beyond_power_mode)
            resolve(profile, self.held.board, self.root)
            self._apply_held(profile)

    def _open_sources(self, board: Board) -> None:
        if self.config.meters:  # asked for by name: one that does not open stops the daemon
            self._rails.open_for(self.root, board, self.config.tune, self.config.meters)
            log.info("power: %s", ", ".join(s.name for s in self._rails.sources))
            return
        try:
            self._rails.open_for(self.root, board, self.config.tune)
        except JetbenchError as err:
            log.warning("power readings unavailable: %s", err)
            self._rails.sources = []

    def _loop(self) -> None:
        interval = self.config.interval_s
        wd_period = watchdog_period_s(self.env)
        if wd_period is not None:
            log.info("systemd watchdog: pinging every %.1f s", wd_period)
        now = time.monotonic()
        next_check = now + interval
        next_wd = now if wd_period is not None else float("inf")
        next_tune = now if self.tuning is not None else float("inf")
        while self._stop_signal is None:
            timeout = max(0.0, min(next_check, next_wd, next_tune) - time.monotonic())
            self._sleep(timeout)
            if self._stop_signal is not None:
                break
            if self._reload:
                self._reload = False
                self.reload()
            now = time.monotonic()
            if now >= next_check:
                self.check()
                next_check += interval * max(1, int((now - next_check) // interval) + 1)
            if self.tuning is not None and now >= next_tune:
                try:
                    with self._lock:  # a restore/apply on the socket never lands mid-tick
                        next_tune = self.tuning.tick()
                except JetbenchError as err:  # a pin refused: the loop goes on, said once
                    self._error(f"tune: {err}")
                    next_tune = now + self.tuning.config.window_s
            if wd_period is not None and now >= next_wd:
                if self.drift.failed_checks < UNHEALTHY_AFTER:
                    self.notifier.send(WATCHDOG="1")
                next_wd = now + wd_period

    def _shutdown(self) -> int:
        """Stop serving, restore the board, stop the simulated kernel (shutdown.py)."""
        return shut_down(self)

    # -- pinning -----------------------------------------------------------------------------
    def _pin_new(self, profile: Profile) -> None:
        """Pin a (new) profile: validated whole against the board first; if one is pinned
        already, the board goes back to its journalled state before the new one is written."""
        assert self.held.board is not None
        profile = dataclasses.replace(profile, beyond_power_mode=self.config.beyond_power_mode)
        resolve(profile, self.held.board, self.root)  # raises ProfileError: nothing changed
        if journal.load(self.root):
            journal.restore(self.root)
            self.held.pinned = False
        result = self._apply_held(profile)
        writes = sum(len(s.writes) for s in result.steps)
        log.info("pinned profile %s (%d write(s))", profile.name, writes)

    def _apply_held(self, profile: Profile) -> ApplyResult:
        """Pin `profile` (journalled) and hold it: what the drift check judges from now on,
        after the settle grace. The caller holds the lock and has resolved it."""
        assert self.held.board is not None
        result = apply_profile(self.root, self.held.board, profile)
        self.drift.pinned(result.steps)  # a rate the kernel rounds: as it kept it, not drift
        self.held.judge_after = time.monotonic() + SETTLE_GRACE_S
        self.held.profile, self.held.targets, self.held.pinned = profile, result.targets, True
        return result

    def reload(self) -> None:
        """SIGHUP: re-detect the board, re-read the configured profile and pin it. A profile
        that no longer loads or validates keeps the old one pinned."""
        with self._lock:
            if self.held.lease is not None:  # nothing is written under a borrower: try again later
                log.info("reload deferred: the board is lent to %s", self.held.lease.who)
                self._reload = True
                return
        self.notifier.send(RELOADING="1", STATUS="reloading the profile")
        with self._lock:
            try:
                self.held.board = detect(self.root)
                if self.config.profile:
                    self._pin_new(load_profile(self.config.profile, self.root.base))
                    self.profile_refused = None
                if self.tuning is not None and not self._resume_tuning():
                    self.tuning.repin()  # the profile is pinned again: so is the point
                log.info("reloaded: %s", self.summary())
            except JetbenchError as err:
                self._error(f"reload failed, keeping the current state: {err}")
        self.notifier.send(READY="1", STATUS=self.summary())

    def _error(self, message: str) -> None:
        self.held.counters["errors"] += 1
        if message != self.held.last_error:  # the same failure every interval is logged once
            log.error("%s", message)
        self.held.last_error = message

    def _read(self, board: Board,
              clock_readings: Optional[Sequence[ClockReading]] = None) -> ReadingsDoc:
        """The board now and its rails, as status and `readings` serve them."""
        now = read_now(self.root, board)
        if clock_readings is not None:
            now = dataclasses.replace(now, clocks=tuple(clock_readings))
        rails, total = self._rails.read()
        doc = now.to_dict()
        return {"clocks": doc["clocks"], "temperatures_c": doc["temperatures_c"],
                "power_mode": doc["power_mode"], "gpu_load_pct": doc["gpu_load_pct"],
                "rails": rails, "total": total, "power_source": self._rails.power_source,
                "read_at": iso(time.time())}

    # -- what the socket and metrics see -----------------------------------------------------
    def summary(self) -> str:
        """The STATUS= line: what is pinned, at which clocks (held.summary_line)."""
        return summary_line(self.held, self._snapshot.get("clocks") or [], self.config.profile,
                            self.profile_refused,
                            self.tuning.phase if self.tuning is not None else None,
                            self.drift.throttle_reasons, self.drift.below_pin,
                            tuple(self.drift.hold.not_held.values()))

    def _status_doc(self, readings: ReadingsDoc) -> StatusDoc:
        return status_doc(self, readings)

    def snapshot(self) -> StatusDoc:
        """The latest check's document (metrics read this: no hardware access per scrape)."""
        return self._snapshot

    def handle(self, request: Request, peer: Optional[Peer] = None) -> Dict[str, object]:
        """A validated control request -> its reply (called from the control thread;
        commands.py answers it)."""
        if not self._ready:
            raise HardwareError("the daemon is starting (restoring, pinning): ask again")
        return self.commands.handle(request, peer)


def run_daemon(root: Root, config: DaemonConfig) -> int:
    """The CLI's entry: log to stderr, run until SIGTERM/SIGINT, return the exit status."""
    if config.interval_s <= 0:
        raise UsageError("--interval must be positive")
    setup_logging(os.environ)
    return Daemon(root, config).run()
