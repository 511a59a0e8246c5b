"""A stand-in for `systemctl` (show / start / stop of one unit), for JETBENCH_SYSTEMCTL.

    fake_systemctl.py STATE_DIR show --property=LoadState --property=ActiveState UNIT.service
    fake_systemctl.py STATE_DIR start|stop UNIT.service

STATE_DIR/<unit> holds `active` or `inactive`; a unit without a file is not installed (show
answers LoadState=not-found, ActiveState=inactive, exit 0, as systemd does; start/stop fail with
exit 5, "Unit ... not found."). Every call is appended to STATE_DIR/calls.log, one line each."""

import os
import sys

state_dir, verb, *args = sys.argv[1:]
unit = args[-1]
name = unit[:-len(".service")] if unit.endswith(".service") else unit
with open(os.path.join(state_dir, "calls.log"), "a") as log:
    log.write(" ".join([verb] + args) + "\n")
state_file = os.path.join(state_dir, name)
installed = os.path.exists(state_file)
if verb == "show":
    state = open(state_file).read().strip() if installed else "inactive"
    print(f"LoadState={'loaded' if installed else 'not-found'}")
    print(f"ActiveState={state}")
    sys.exit(0)
if verb in ("start", "stop"):
    if not installed:
        print(f"Failed to {verb} {unit}: Unit {unit} not found.", file=sys.stderr)
        sys.exit(5)
    with open(state_file, "w") as f:
        f.write("active\n" if verb == "start" else "inactive\n")
    sys.exit(0)
print(f"fake_systemctl: unsupported verb {verb!r}", file=sys.stderr)
sys.exit(1)
