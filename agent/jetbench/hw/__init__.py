"""The only code that touches /sys, /proc, debugfs, ttys and subprocesses."""
