"""Child processes: how a child dies with its parent, and how a child's whole process group is
ended. The children themselves are started by the modules that own them (the sampler process,
the --workload-python child, a --cmd workload, the ranks of a multi-device run, systemctl);
each of them goes through here for these two rules.

Python 3.6 and the standard library only: the --workload-python child imports it too.
"""

import ctypes
import os
import signal
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
TERM_GRACE_S = 3.0  # between SIGTERM and SIGKILL to a child's process group


def die_with_parent(sig, parent_pid=None):
    """Ask the kernel to send `sig` to this process when its parent dies (Linux prctl;
    elsewhere a no-op: the parent's closed pipe is all there is). False when the parent
    (`parent_pid`) has already gone: the caller should exit now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    return parent_pid is None or os.getppid() == parent_pid


def end_process_group(proc, grace_s=TERM_GRACE_S):
    """SIGTERM to every process left in `proc`'s group (started with start_new_session, so the
    leader's pid is the group's id), SIGKILL after `grace_s`; True when there was any."""
    pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False  # none left (or the id is no longer ours)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader: a zombie still counts as a member of the group
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return True
