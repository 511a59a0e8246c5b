"""A stand-in for `journalctl --unit UNIT --follow --output cat --lines 0 --no-pager`: writes
DeepStream-like `**PERF:` lines for the unit, one every 0.05 s, at the rate in the file named
by $FAKE_JOURNAL_RATE (read each time), until it is terminated. Its arguments are appended to
$FAKE_JOURNAL_RATE.args."""

import os
import sys
import time

rate_file = os.environ["FAKE_JOURNAL_RATE"]
with open(rate_file + ".args", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
while True:
    with open(rate_file) as f:
        rate = f.read().strip()
    sys.stdout.write(f"**PERF:  {rate} ({rate})\n")
    sys.stdout.flush()
    time.sleep(0.05)
