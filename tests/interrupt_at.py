"""Test helper: jetbench's CLI with an interrupt landing exactly at one boundary of a
measurement, through measure's test-only hook point (`measure.PHASE_HOOK`).

    INTERRUPT_AT=PHASE[#N]:CAUSE python tests/interrupt_at.py --root BOARD measure ...

PHASE: a phase name measure passes its hook ("pinned", "window-opening", "window-open",
"window-closed", "figures"), "json-write" (inside the result's write: its CSV written, its
JSON not yet), "put-back" (inside a journal restore, after its first write: the board half put
back; once per restore) or "table" (the CLI printing the finished run's table); #N: the N-th
time it is reached (a sweep's second point), 1 by default.
CAUSE: SIGINT or SIGTERM, raised at this process (its handler has run when the hook
returns), or revoke:PID: SIGTERM to the daemon with that pid, which takes back the board it
lent; the hook returns once this process has received that (an event, not a sleep), or
hold:PATH: the process writes PATH.held and waits there until the test creates PATH (so a
test acts while a run is known to be at that boundary, however slow the machine).

The variable is read here only: jetbench itself has no such switch."""

import os
import signal
import sys
import time


def _fire(cause: str) -> None:
    sys.stderr.write(f"interrupt_at: {cause}\n")
    sys.stderr.flush()
    if cause.startswith("revoke:"):
        from jetbench.interrupts import pending

        os.kill(int(cause.split(":", 1)[1]), signal.SIGTERM)
        deadline = time.monotonic() + 60  # a failure bound, not a wait for something to happen
        while pending() is None:  # the lease's watcher has interrupted this process
            if time.monotonic() > deadline:
                raise SystemExit("interrupt_at: the daemon never took the board back")
            time.sleep(0.01)  # a KeyboardInterrupt lands here when nothing holds it
    elif cause.startswith("hold:"):
        release = cause.split(":", 1)[1]
        with open(release + ".held", "w"):
            pass
        deadline = time.monotonic() + 600  # a failure bound: the test releases it
        while not os.path.exists(release):
            if time.monotonic() > deadline:
                raise SystemExit("interrupt_at: never released")
            time.sleep(0.01)
    else:
        signal.raise_signal(getattr(signal, cause))  # the handler runs before this returns


def main() -> None:
    where, cause = os.environ.pop("INTERRUPT_AT").split(":", 1)
    phase, _, nth = where.partition("#")
    wanted = int(nth or 1)
    seen = [0]

    def at(name: str) -> None:
        if name == phase:
            seen[0] += 1
            if seen[0] == wanted:
                _fire(cause)

    import jetbench.report.io as io
    import jetbench.run.measure as measure

    assert hasattr(measure, "PHASE_HOOK"), f"{measure.__file__} has no hook point"
    measure.PHASE_HOOK = at
    real_write_json = io.write_json

    def write_json(*args, **kwargs):  # claim_result: the placeholders and the CSV are written
        at("json-write")
        return real_write_json(*args, **kwargs)

    io.write_json = write_json
    import jetbench.report.tables as tables

    real_rich_table = tables.rich_table

    def rich_table(*args, **kwargs):  # the CLI prints the finished run's table
        at("table")
        return real_rich_table(*args, **kwargs)

    tables.rich_table = rich_table
    import jetbench.hw.knob_io as knob_io
    import jetbench.ownership.journal as journal

    real_restore, real_write_raw = journal.restore, knob_io.write_raw
    first_write = [False]  # inside a restore whose first write has not been made yet

    def restore(*args, **kwargs):  # the put-back of what a run pinned (and `restore`)
        first_write[0] = True
        try:
            return real_restore(*args, **kwargs)
        finally:
            first_write[0] = False

    def write_raw(*args, **kwargs):  # "put-back": after a restore's first write (once each)
        done = real_write_raw(*args, **kwargs)
        if first_write[0]:
            first_write[0] = False
            at("put-back")
        return done

    journal.restore, knob_io.write_raw = restore, write_raw
    from jetbench.cli.main import main as cli

    sys.argv = ["jetbench", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
