"""What the kernel runs for knob values (hw/clocks/runs.py), by hand from the drivers' rules in
docs/hardware.md ("What a kernel runs under a cap") and the Nano's tables there: CPU ... 825600,
921600 ... kHz; GPU 76.8 MHz x 1..12."""

from jetbench.hw.clocks.runs import at_or_below, cpufreq_runs, devfreq_runs, runs_range

NANO_CPU_KHZ = (102000, 204000, 307200, 403200, 518400, 614400, 710400, 825600, 921600,
                1036800, 1132800, 1224000, 1326000, 1428000, 1479000)
NANO_GPU_HZ = tuple(76_800_000 * k for k in range(1, 13))  # 76.8 .. 921.6 MHz


def test_cpufreq_under_a_cap_that_is_no_entry_runs_the_entry_below_it():
    # min = max = 918000: no entry inside, so the highest entry not above max
    assert cpufreq_runs(NANO_CPU_KHZ, 918000, 918000, 918000) == 825600
    # a cap above an entry with room: RELATION_L picks the lowest entry at or above the target
    assert cpufreq_runs(NANO_CPU_KHZ, 102000, 1000000, 900000) == 921600
    assert cpufreq_runs(NANO_CPU_KHZ, 102000, 918000, 918000) == 825600


def test_devfreq_and_overrides_run_the_highest_entry_not_above_max():
    assert devfreq_runs(NANO_GPU_HZ, 640_000_000) == 614_400_000  # 76.8 x 8
    assert devfreq_runs(NANO_GPU_HZ, 691_200_000) == 691_200_000  # an entry: itself
    assert at_or_below(NANO_GPU_HZ, 10) == 76_800_000  # below the table: its lowest


def test_the_range_a_governor_may_run_between_knobs():
    assert runs_range(NANO_GPU_HZ, 640_000_000, 640_000_000) == (614_400_000, 614_400_000)
    assert runs_range(NANO_GPU_HZ, 100_000_000, 640_000_000) == (153_600_000, 614_400_000)
    assert runs_range((), 5, 9) == (5, 9)  # no table: the knobs themselves
