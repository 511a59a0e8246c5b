"""`--cmd`'s options as a `CommandSpec`: the command line split as a shell would, where its
throughput is read from, its unit and batch; checked before anything starts (nothing here
runs the command, nor imports the power sampling: a bad option is refused at once)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from ...errors import UsageError
from ...work_units import DEFAULT_UNIT, UNITS
from .throughput_from import ThroughputFrom, implicit_batch, parse_throughput_from, shapes_batch

_LAUNCHER = re.compile(r"^(python[0-9.]*|env|nice|ionice|taskset|numactl|sudo|chrt|time)$")
PRECISION = "cmd"  # a command's precision is its own business: the point id says "cmd"


@dataclass(frozen=True)
class CommandSpec:
    argv: Tuple[str, ...]
    throughput_from: ThroughputFrom
    unit: str = DEFAULT_UNIT
    batch: int = 1  # the items in one of trtexec's queries (recorded for the others)
    batch_source: str = "default"  # "--batch", "--shapes", "trtexec --batch" or "default"
    qps_factor: int = 1  # items/s = trtexec's qps x this
    notes: Tuple[str, ...] = ()
    log_path: Optional[Path] = None  # --cmd-log: the command's output goes there
    stdout_to_stderr: bool = False  # --json: jetbench's stdout carries the JSON alone

    @property
    def line(self) -> str:
        return shlex.join(self.argv)

    @property
    def name(self) -> str:
        """What the result calls the workload: the program, past launchers
        (`python3 bench.py` -> 'bench', `taskset -c 0 trtexec` -> 'trtexec')."""
        for arg in self.argv:
            base = os.path.basename(arg)
            if arg.startswith("-") or base.isdigit() or _LAUNCHER.match(base):
                continue
            return base[:-3] if base.endswith(".py") else base
        return os.path.basename(self.argv[0]) or "command"


def command_spec(cmd: str, throughput_from: Optional[str], unit: Optional[str] = None,
                 batch: Optional[int] = None, log_path: Optional[Path] = None,
                 stdout_to_stderr: bool = False) -> CommandSpec:
    """The CLI's options checked (UsageError, nothing run): a command line split as a shell
    would (no shell runs it: `sh -c '...'` for pipes), a throughput source, a known unit."""
    try:
        argv = tuple(shlex.split(cmd))
    except ValueError as err:
        raise UsageError(f"--cmd: cannot split {cmd!r} ({err})") from None
    if not argv:
        raise UsageError("--cmd needs a command")
    if throughput_from is None:
        raise UsageError("--cmd needs --throughput-from (trtexec, regex:PATTERN or items:N)",
                         hint="e.g. --throughput-from trtexec, or "
                              "--throughput-from 'regex:^eval rate: +([0-9.]+) tokens/s' "
                              "--unit tokens")
    spec = parse_throughput_from(throughput_from)
    unit = (unit or DEFAULT_UNIT).strip().lower()
    if unit not in UNITS:
        raise UsageError(f"--unit {unit!r}: expected one of {', '.join(UNITS)}")
    size, source, factor, notes = _batch(argv, spec, batch)
    return CommandSpec(argv, spec, unit, size, source, factor, tuple(notes), log_path,
                       stdout_to_stderr)


def _batch(argv: Tuple[str, ...], spec: ThroughputFrom, given: Optional[int]
           ) -> Tuple[int, str, int, List[str]]:
    """(batch, where it came from, qps multiplier, notes). trtexec's qps counts queries of
    one engine batch each (explicit batch) but samples when trtexec itself has --batch=N
    (implicit batch): see workload/command/throughput_from.py."""
    if spec.kind != "trtexec":
        return (given or 1), ("--batch" if given else "default"), 1, []
    own = implicit_batch(argv)
    if own is not None:
        notes = [] if given in (None, own) else [
            f"--batch {given} ignored: the command gives trtexec --batch={own}, whose qps "
            "already counts samples"]
        return own, "trtexec --batch", 1, notes
    shaped, notes = shapes_batch(argv)
    if given is not None:
        if shaped is not None and shaped != given:
            notes.append(f"--batch {given} differs from the command's --shapes batch "
                         f"{shaped}: {given} is used (items/s = qps x {given})")
        return given, "--batch", given, notes
    if shaped is not None:
        return shaped, "--shapes", shaped, notes
    return 1, "default", 1, ["trtexec's batch is not known (no --shapes, no --batch): 1 "
                             "assumed, items/s = qps; give jetbench --batch N if the "
                             "engine's batch is N"]
