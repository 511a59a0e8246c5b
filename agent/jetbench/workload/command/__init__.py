"""`--cmd`: the user's own program as the workload: `spec.py` what to run and how its
throughput is read (checked before anything starts), `run.py` running it around the power
window, `throughput_from.py` reading its output."""
