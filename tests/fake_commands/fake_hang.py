"""A command that never ends by itself, with a child of its own (both in its process group):
writes both pids to MARKER once running, so a test knows the window is open.

    fake_hang.py MARKER [--stubborn]    (--stubborn: ignores SIGTERM, as a wedged program might)"""

import os
import signal
import subprocess
import sys
import time

marker = sys.argv[1]
if "--stubborn" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(marker + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}\n")
os.replace(marker + ".tmp", marker)
print("running until stopped", flush=True)
while True:
    time.sleep(1)
