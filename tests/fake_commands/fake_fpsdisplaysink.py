"""A stand-in for `gst-launch-1.0 -v ... ! fpsdisplaysink text-overlay=false video-sink=fakesink`:
the fps sink's last-message property lines (unverified against a real DeepStream run)."""

import sys
import time

run_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
print("Setting pipeline to PLAYING ...", flush=True)
for rendered, current, average in ((15, "29.80", "29.80"), (31, "30.40", "30.12")):
    time.sleep(run_s / 2)
    print("/GstPipeline:pipeline0/GstFPSDisplaySink:fpsdisplaysink0: last-message = "
          f"rendered: {rendered}, dropped: 0, current: {current}, average: {average}",
          flush=True)
print("Execution ended after 0:00:01.0", flush=True)
