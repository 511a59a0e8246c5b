"""`python -m jetbench ...`: the CLI, also as `torchrun --nproc-per-node N -m jetbench measure`."""

from .cli import entry

entry()
