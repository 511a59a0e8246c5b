"""A stand-in for `ollama run --verbose`: its timing block on stderr, twice (two prompts), in
the layout of published Ollama outputs (not checked against Ollama's source). jetbench's
regex must take the last "eval rate", never the "prompt eval rate" line."""

import sys
import time

run_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
print("Why is the sky blue? Rayleigh scattering.", flush=True)
for rate in ("12.50", "17.25"):
    time.sleep(run_s / 2)
    sys.stderr.write("total duration:       2.1s\n")
    sys.stderr.write("prompt eval count:    21 token(s)\n")
    sys.stderr.write("prompt eval rate:     155.60 tokens/s\n")
    sys.stderr.write("eval count:           42 token(s)\n")
    sys.stderr.write(f"eval rate:            {rate} tokens/s\n")
    sys.stderr.flush()
