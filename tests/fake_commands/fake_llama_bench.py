"""A stand-in for `llama-bench -p 0 -n 128`: its markdown table (layout of published
llama-bench outputs, not checked against llama.cpp's source), tg128 in tokens/s."""

import sys
import time

run_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
print("| model                          |       size |     params | backend    | ngl |"
      "            test |                  t/s |")
print("| ------------------------------ | ---------: | ---------: | ---------- | --: |"
      " --------------: | -------------------: |", flush=True)
time.sleep(run_s)
print("| llama 1B Q4_K - Medium         | 762.81 MiB |     1.24 B | CUDA       |  99 |"
      "           tg128 |         42.37 ± 0.21 |")
print("")
print("build: 0a1b2c3d (4567)", flush=True)
