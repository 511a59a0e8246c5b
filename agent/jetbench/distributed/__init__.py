"""Several devices measured as one run: one process per device (rank), started by
torch.distributed's own launcher (`measure --devices N`, or the user's `torchrun`).

Rank 0 alone owns the board (lock, clocks, power sampling, restore, the result file); every
rank builds the workload on its own device, and all ranks open and close the timed window
together. Only `spec` is imported without torch; the other modules load torch.distributed.
"""
