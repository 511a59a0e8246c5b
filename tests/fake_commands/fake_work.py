"""A command that works for a while and prints what it is told (or nothing).

    fake_work.py RUN_S [EXIT_CODE] [TEXT]"""

import sys
import time

run_s = float(sys.argv[1])
code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
time.sleep(run_s)
print(sys.argv[3] if len(sys.argv) > 3 else "done, nothing to report", flush=True)
if code:
    print("error: the engine file is corrupt", file=sys.stderr, flush=True)
sys.exit(code)
