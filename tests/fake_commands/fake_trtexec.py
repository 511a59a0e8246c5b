"""A stand-in for trtexec: its log lines in the format of NVIDIA/TensorRT
samples/common/sampleReporting.cpp (printProlog/printEpilog, TensorRT 8.6+: several
percentiles), behind its logger's "[date-time] [I] " prefix. Figures are fixed so tests can
hand-compute what jetbench must report.

    fake_trtexec.py [--load-s=0.3] [--run-s=0.6] [--shapes=input:8x3x224x224] [--old]

It "loads an engine" for --load-s, then "infers" for --run-s and reports that span (as
trtexec does, right after its inference ends), then lingers 0.2 s as trtexec does tearing down.
"""

import sys
import time

QPS = 411.25
RUN_S = 0.6


def log(text: str) -> None:
    print(f"[11/22/2026-13:50:01] [I] {text}", flush=True)


def main(argv):
    run_s, load_s = RUN_S, 0.0
    old = "--old" in argv  # TensorRT 8.0-8.5: one percentile, an End-to-End line
    for arg in argv:
        if arg.startswith("--run-s="):
            run_s = float(arg.split("=", 1)[1])
        if arg.startswith("--load-s="):
            load_s = float(arg.split("=", 1)[1])
    log("=== Model Options ===")
    time.sleep(load_s)
    log("Starting inference")
    time.sleep(run_s)
    log("Warmup completed 20 queries over 200 ms")
    log(f"Timing trace has 1234 queries over {run_s:g} s")
    log("")
    log("=== Trace details ===")
    log("Average on 10 runs - GPU latency: 2.38 ms - Host latency: 2.45 ms (enqueue 0.3 ms)")
    log("")
    log("=== Performance summary ===")
    log(f"Throughput: {QPS} qps")
    if old:
        log("Latency: min = 2.25 ms, max = 2.9 ms, mean = 2.4 ms, median = 2.375 ms, "
            "percentile(99%) = 2.8 ms")
        log("End-to-End Host Latency: min = 4.5 ms, max = 5.8 ms, mean = 4.8 ms, "
            "median = 4.75 ms, percentile(99%) = 5.6 ms")
    else:
        log("Latency: min = 2.25 ms, max = 2.9 ms, mean = 2.4 ms, median = 2.375 ms, "
            "percentile(90%) = 2.5 ms, percentile(95%) = 2.625 ms, percentile(99%) = 2.8 ms")
    log("Enqueue Time: min = 0.25 ms, max = 0.5 ms, mean = 0.3 ms, median = 0.3 ms, "
        "percentile(99%) = 0.45 ms")
    log("H2D Latency: min = 0.0625 ms, max = 0.125 ms, mean = 0.07 ms, median = 0.07 ms, "
        "percentile(99%) = 0.1 ms")
    log("GPU Compute Time: min = 2.125 ms, max = 2.75 ms, mean = 2.25 ms, median = 2.25 ms, "
        "percentile(90%) = 2.375 ms, percentile(95%) = 2.5 ms, percentile(99%) = 2.625 ms")
    log("D2H Latency: min = 0.01 ms, max = 0.02 ms, mean = 0.015 ms, median = 0.015 ms, "
        "percentile(99%) = 0.02 ms")
    log(f"Total Host Walltime: {run_s:g} s")
    log("Total GPU Compute Time: 2.7765 s")
    log("Explanations of the performance metrics are printed in the verbose logs.")
    time.sleep(0.2 if run_s else 0.0)
    print("&&&& PASSED TensorRT.trtexec [TensorRT v8601] # trtexec " + " ".join(argv),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
