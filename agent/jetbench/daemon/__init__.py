"""The agent on the board: `jetbench daemon` holds a profile, re-pins when something else moves
the clocks, restores on stop, and serves status (a Unix control socket) and metrics (Prometheus).

Modules: `service` (the loop), `notify` (sd_notify), `protocol` (requests, validated),
`control` (the socket server), `thermal` (throttling), `metrics`, `client`, `install`.
Nothing here imports torch, numpy or rich: the daemon's budget is 60 MB resident.
"""
