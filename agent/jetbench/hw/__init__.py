"""The board: the only code that reads or writes /sys, /proc, debugfs, the serial ports of
meters and NVML, always under a `Root` (hw/fs.py), and imports nothing above it (README,
"Layout"). How child processes die with their parent and are ended is jetbench/procs.py."""
