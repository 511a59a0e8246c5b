"""The real-kernel behaviours a simulated board can show (docs/hardware.md, "What real kernels do").

One place for their names and meaning. A board created with quirks lists them in its marker
(`/etc/jetbench/simulated.json`, key `"quirks"`); both simulated kernels (the file-based thread in
`sim/file_kernel.py` and the FUSE-served board) read that list and behave accordingly. The default
boards have none and behave as before.
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

QUIRKS: Dict[str, str] = {
    "static-cur": "devfreq cur_freq (and the tegra210 debugfs rate) never follows a pin: it stays "
                  "at the value it had (a railgated or idle GPU, a clock the driver cannot reach)",
    "amu-cpu": "CPU scaling_cur_freq is measured from activity counters: a few percent off the "
               "set frequency, and much lower while cores idle (Xavier, Orin, Thor)",
    "qos-cap": "a PM QoS / cooling-device cap holds the running GPU clock below the pin without "
               "rewriting min_freq/max_freq",
    "late-gpu": "the GPU devfreq node appears only a few seconds after the board starts",
    "round-emc": "EMC rate writes are accepted and rounded to the nearest rate the memory "
                 "controller can run",
    "emc-boot-cap": "the BPMP boots with the EMC capped at its boot rate (the table's second "
                    "highest entry; AGX Orin on L4T R36 until NVIDIA's nvphs lifts it): rate "
                    "writes above it run the cap, without an error",
    "mode-cores-online": "a power mode switch that failed to take cores offline (Orin NX over "
                         "SSH): nvpmodel's status names the mode, its other caps are in "
                         "force, the cores it takes offline stay online",
    "emc-refloor": "the firmware re-floors the EMC from its QoS clients (Thor's OSP "
                   "controller): the running EMC reads the table's top for a share of each "
                   "second, its knobs untouched (share and rate: /etc/jetbench/emc-refloor)",
}

# The cap that `qos-cap` applies, as a fraction of the GPU table's top (then the nearest entry
# at or below it), and the delay of `late-gpu`.
QOS_CAP_FRACTION = 0.5
LATE_GPU_S = 3.0
# `amu-cpu`: the busy reading is this far below the set clock; an idle core reads this fraction.
AMU_BUSY_ERROR = 0.02
AMU_IDLE_FRACTION = 0.3
# `emc-refloor`: the share of each period the firmware holds the EMC above its pin (a file
# `EMC_REFLOOR_FILE` in the tree, "SHARE [HZ]", overrides the share and the rate it raises to).
EMC_REFLOOR_SHARE = 1 / 3
EMC_REFLOOR_PERIOD_S = 1.0
EMC_REFLOOR_FILE = "/etc/jetbench/emc-refloor"
# `round-emc`: EMC rates are multiples of this step (Hz).
EMC_ROUND_STEP_HZ = 6_400_000
# `amu-cpu`: a cluster counts as busy while the process using the board (leaving out the
# simulated kernel's own work) runs at least this share of one core, averaged over about
# AMU_LOAD_TAU_S (an exponential average); otherwise its cores idle.
AMU_BUSY_CORE_SHARE = 0.1
AMU_LOAD_TAU_S = 0.2
# `late-gpu` (file-based kernel): until it appears, the GPU's devfreq directory is kept here,
# under the tree's root, and moved into place LATE_GPU_S after the kernel starts.
LATE_GPU_STAGING = "etc/jetbench/late-gpu"


def check(names: Iterable[str]) -> Tuple[str, ...]:
    """Validated quirk names, in a stable order; unknown ones raise ValueError naming them."""
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in QUIRKS]
    if unknown:
        raise ValueError(f"unknown quirk(s) {', '.join(unknown)}; known: {', '.join(QUIRKS)}")
    return tuple(n for n in QUIRKS if n in wanted)
