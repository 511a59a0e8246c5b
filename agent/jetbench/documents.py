"""The result document (`jetbench.result/1`) as types: what each layer writes into it and what
readers take from it, checked by mypy at both ends.

Every key may be absent (a file written by an older jetbench) and a figure is None where it
was not measured (never 0): readers go through report/schema.py's accessors. Units are in key
names. The document is still a plain dict (what the JSON holds); these are its shapes, nothing
at run time, except that report/schema.py derives from them (REQUIRED, WHOLE and OPEN_KEYS
below add what a type cannot say on Python 3.8) the check a file that is read must pass."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, TypedDict

# The workload's own description: what ran, as the workload layer reports it. Its keys depend
# on the runtime (a network's GMACs, a command's argv, an engine's precision): an open dict.
WorkloadDoc = Dict[str, object]


class WorkloadKeys(TypedDict, total=False):
    """The keys of a result's `workload` that readers take (WorkloadDoc stays an open dict for
    its writers): report/schema.py checks them where a file is read (OPEN_KEYS below)."""
    model: str
    precision: str
    batch: int
    framework: str  # report/schema.py FRAMEWORKS (absent in older results: pytorch)
    provider: str  # ONNX Runtime's execution provider
    runtime: str
    device: str
    unit: str


class UncertaintyParts(TypedDict, total=False):
    """One power figure's uncertainty by cause (sampling/uncertainty.py), in watts."""
    sensor_w: Optional[float]
    integration_w: Optional[float]
    uncovered_w: Optional[float]
    basis: str


class FigureUncertainty(TypedDict, total=False):
    """A power figure's uncertainty as sampling/uncertainty.py works it out, per channel key
    ('ina3221/VDD_IN') or total ('total:ina3221/VDD_IN'): the sum and its parts, in watts."""
    mean_w_uncertainty_w: Optional[float]
    mean_w_uncertainty_pct: Optional[float]
    sensor_w: Optional[float]
    integration_w: Optional[float]
    uncovered_w: Optional[float]
    basis: str


class PowerPoint(TypedDict, total=False):
    """A rail (`kind` "channel") or a whole-device total (`kind` "total") over the window."""
    name: str
    source: str
    point: str
    kind: str
    describe: str
    channels: List[str]  # a total's channels
    mean_w: Optional[float]
    energy_j: Optional[float]
    measured_energy_j: Optional[float]
    samples: int
    coverage: float
    gaps: List[List[float]]  # [start_s, end_s] pairs, relative to the trace's t0
    mean_w_uncertainty_w: Optional[float]
    mean_w_uncertainty_pct: Optional[float]
    uncertainty: UncertaintyParts
    images_per_j: Optional[float]  # efficiency.by_point
    items_per_j: Optional[float]
    scope: str  # module | board | wall: what the figure covers (hw/meters/base.py SCOPES)
    basis: str  # measured | calibrated


class WallFigure(TypedDict, total=False):
    """The wall's power over the window from the board's sensors and a calibration
    (run/calibration.py wall_figure); `refused` says why none is given."""
    scope: str  # "wall"
    basis: str  # "calibrated"
    label: Optional[str]  # the calibration's carrier/supply label
    calibrated_on: Optional[str]
    mean_w: Optional[float]
    energy_j: float
    u95_pct: float  # 95% interval: the calibration's held-out residual, the sensor's, the meter's
    u95_w: float
    u95_parts_pct: Dict[str, Optional[float]]  # residual, sensor, meter (None: unknown)
    from_w: float  # the on-board total it was computed from
    refused: str
    meter_w: float  # a wall meter attached as well: its figure
    meter_diff_pct: float
    images_per_j: Optional[float]  # efficiency.wall
    items_per_j: Optional[float]


class CalibrationBoard(TypedDict, total=False):
    """What a calibration shares with the boards it applies to (run/calibration.py)."""
    model: str
    family: Optional[str]
    soc: Optional[str]
    module: Optional[str]  # device tree part numbers (hw/board_parts.py)
    carrier: Optional[str]
    total: Optional[str]  # the board's total rail (None: a sum)
    simulated: bool


class CalibrationModel(TypedDict, total=False):
    kind: str  # affine | quadratic (sampling/calibration_fit.py MODELS)
    coefficients: List[float]  # wall_w = c0 + c1 * board_w (+ c2 * board_w^2)
    compared_heldout_rms_pct: Dict[str, float]
    formula: str


class CalibrationResidual(TypedDict, total=False):
    heldout_rms_pct: float
    heldout_p95_pct: float
    meter_pct: Optional[float]  # the meter's own limit at the plan's mean power
    bins: int
    bin_s: float


class CalibrationRun(TypedDict, total=False):
    gpu_hz: float
    board_w_min: float
    board_w_max: float
    seconds: float


class CalibrationDoc(TypedDict, total=False):
    """A wall calibration (`jetbench.calibration/1`, run/calibration.py)."""
    schema: str
    simulated: bool
    created: str
    created_unix: float
    label: str  # the carrier and supply, as the user names them
    board: CalibrationBoard
    meter: str
    total: str  # the on-board total it maps (VDD_IN, VIN, a sum)
    range_w: List[float]  # [lowest, highest] on-board W it covered
    lag_s: float
    model: CalibrationModel
    residual: CalibrationResidual
    runs: List[CalibrationRun]


class IdleDoc(TypedDict, total=False):
    clocks: str  # at which clocks the baseline was taken
    duration_s: float
    valid: bool
    total: Optional[PowerPoint]
    channels: List[PowerPoint]


class WindowDoc(TypedDict, total=False):
    start_s: float
    duration_s: float
    valid: bool
    reasons: List[str]


class PowerDoc(TypedDict, total=False):
    meters: List[str]
    phases_s: Dict[str, float]
    trace_csv: Optional[str]
    channels: List[PowerPoint]
    total: Optional[PowerPoint]
    totals: List[PowerPoint]
    faults: Dict[str, Dict[str, int]]  # source -> kind -> count
    window: Optional[WindowDoc]
    idle: Optional[IdleDoc]
    idle_unpinned: Optional[IdleDoc]
    devices_sum: Optional[PowerPoint]  # a multi-device run: the devices' own sources summed
    wall: Optional[WallFigure]  # from a matching calibration (None: the board has none)


class EfficiencyUncertainty(TypedDict, total=False):
    power_pct: Optional[float]
    throughput_pct: Optional[float]
    images_per_j_pct: Optional[float]
    basis: str
    lower_it: List[str]  # what would make it smaller


class AboveIdle(TypedDict, total=False):
    mean_w_uncertainty_w: Optional[float]
    mean_w_uncertainty_pct: Optional[float]
    idle_w: float
    idle_clocks: str
    mean_w: float
    energy_j: float
    images_per_j: Optional[float]
    items_per_j: Optional[float]


class PreRegulation(TypedDict, total=False):
    estimate: bool
    regulator_efficiency: float
    mean_w: float
    images_per_j: Optional[float]
    items_per_j: Optional[float]
    note: str


class EfficiencyDoc(TypedDict, total=False):
    images_per_j: Optional[float]
    items_per_j: Optional[float]
    basis: Optional[str]
    by_point: List[PowerPoint]
    above_idle: AboveIdle
    pre_regulation_estimate: PreRegulation
    uncertainty: EfficiencyUncertainty
    refused: List[str]  # why this window gives no img/J
    wall: WallFigure  # img/J at the wall, from the calibrated wall figure


class PowerModeDoc(TypedDict, total=False):
    id: int
    name: Optional[str]
    text: str
    caps_lifted: bool  # this point ran past the mode's caps (--beyond-power-mode)
    lifted: List[str]
    # what the mode sets that the kernel does not have (hw/mode_in_force.py): reported, not
    # in force
    not_in_force: List[str]


class BoardDoc(TypedDict, total=False):
    model: str
    family: str
    soc: Optional[str]
    l4t: Optional[str]
    power_mode: Optional[PowerModeDoc]
    simulated: bool
    root: str


class ClockDoc(TypedDict, total=False):
    """One clock as documents carry it (hw/readings.py clock_doc)."""
    domain: str
    name: str
    governor: Optional[str]
    min_hz: Optional[int]
    max_hz: Optional[int]
    cur_hz: Optional[int]
    override_hz: Optional[int]
    locked: Optional[bool]
    available_hz: List[int]
    table_hz: List[int]  # hw/clocks/domains.read_applied only (not in a result's settings)


class _ObservedClockKeys(TypedDict):
    domain: str
    name: str
    min_hz: Optional[int]
    mean_hz: Optional[int]
    max_hz: Optional[int]
    samples: int


class ObservedClock(_ObservedClockKeys, total=False):
    """A clock as sampled during the window (run/validity.py ClockSampler): the time it ran at
    each rate ([[Hz, s], ...]: a reading holds until the next) and, for a pinned clock judged
    exactly, the share of that time it ran where its knobs put it."""
    time_at_hz: List[List[float]]
    held_share: float


class SettingsDoc(TypedDict, total=False):
    profile: Optional[str]
    requested: Dict[str, object]  # "gpu_hz": a frequency as asked (690000000 or "max")
    resolved: Dict[str, int]  # the clock that runs for each request (the one named everywhere)
    resolved_why: Dict[str, str]  # why a resolved clock is not the request ("nearest entry")
    applied: Dict[str, Optional[int]]  # the knobs read back ("gpu_hz", "gpu_min_hz", ...)
    clocks: List[ClockDoc]
    pinned: bool


class LatencyMs(TypedDict, total=False):
    min: float
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class ThroughputDoc(TypedDict, total=False):
    images_per_s: Optional[float]
    items_per_s: Optional[float]
    unit: str
    latency_ms: Optional[Dict[str, float]]  # min, mean, p50, p90, p99, max (LatencyMs's keys)
    latency_stdev_ms: Optional[float]
    cv: Optional[float]
    gflops: Optional[float]
    iterations: Optional[int]  # None: a command's (its iterations are its own)
    wall_s: float
    warmup_iterations: int
    warmup_s: float
    per_iteration_ms: List[float]  # `time --per-iteration`
    # a command's (workload/command/run.py): where its rate came from
    source: str
    parsed_value: Optional[float]
    window: str
    qps: Optional[float]  # trtexec's
    gpu_compute_ms: Optional[Dict[str, float]]
    queries: Optional[int]
    inference_s: Optional[float]
    host_walltime_s: Optional[float]


class CommandDoc(TypedDict, total=False):
    """`measure --cmd`'s command as it ran."""
    argv: List[str]
    line: str
    exit_code: Optional[int]
    run_s: float
    throughput_from: str
    output_tail: List[str]
    log: Optional[str]


class ThermalDoc(TypedDict, total=False):
    before_c: Dict[str, float]
    after_c: Dict[str, float]
    trip_points_c: Dict[str, List[float]]
    throttled: bool
    evidence: List[str]
    below_pin: List[str]
    trips_crossed: List[str]


class ValidityDoc(TypedDict, total=False):
    valid: bool
    reasons: List[str]


class ClocksDoc(TypedDict, total=False):
    observed: List[ObservedClock]


class SamplingDoc(TypedDict, total=False):
    """How fast one source was read, and how fast it refreshes (run/meters.py)."""
    source: str
    requested_hz: Optional[float]
    sensor_hz: Optional[float]
    effective_hz: Optional[float]
    distinct_per_s: Optional[float]
    samples: int


class DevicePower(TypedDict):
    channels: List[PowerPoint]  # the device's own source's (NVML GPUi)
    mean_w: Optional[float]


class DeviceDoc(TypedDict, total=False):
    """One device (rank) of a multi-device run (distributed/rows.py)."""
    rank: int
    device: str
    pid: int
    threads: Optional[int]
    cpu_cores: Optional[List[int]]
    workload: WorkloadDoc
    throughput: ThroughputDoc
    timed_in_window_s: Optional[List[float]]  # its timed run against rank 0's window
    sync_s: Dict[str, Optional[float]]  # time in each barrier, and their share of the window
    power: Optional[DevicePower]
    efficiency: EfficiencyDoc


class ScalingDoc(TypedDict, total=False):
    efficiency: Optional[float]
    devices: int
    baseline_images_per_s: Optional[float]
    baseline_device: str
    aggregate_images_per_s: float


class DistributedDoc(TypedDict, total=False):
    """How the ranks of a multi-device run ran (distributed/messages.py)."""
    world_size: int
    backend: Optional[str]
    launcher: str
    devices: List[str]
    gather_s: Optional[float]


class ResultDoc(TypedDict, total=False):
    """One measured configuration (`jetbench.result/1`): report/schema.py SCHEMA."""
    schema: str
    status: str  # report/schema.py STATUSES
    simulated: bool
    id: str
    created: str
    jetbench: str
    message: str  # why a point that did not run did not
    interrupted: str  # report/schema.py INTERRUPT_CAUSES
    board: BoardDoc
    settings: SettingsDoc
    workload: WorkloadDoc
    throughput: Optional[ThroughputDoc]
    power: Optional[PowerDoc]
    efficiency: EfficiencyDoc
    thermal: Optional[ThermalDoc]
    clocks: ClocksDoc
    validity: ValidityDoc
    sampling: List[SamplingDoc]
    devices: List[DeviceDoc]
    scaling: ScalingDoc
    distributed: DistributedDoc
    command: CommandDoc
    warnings: List[str]
    notes: List[str]
    _path: str  # in memory only: the file it was read from (report/io.py), never written


# What a file that is read is held to beyond the types above (report/schema.py result_types),
# said here once, by TypedDict name, as typing cannot on Python 3.8 (no typing.Required):
# the keys that must be there and not null (every other key may be absent, or null where its
# type is not a list's item)...
REQUIRED: Dict[str, Tuple[str, ...]] = {
    "ResultDoc": ("schema", "status", "simulated"),
    "PowerPoint": ("name", "point", "source"),
    "PreRegulation": ("regulator_efficiency",),
    "DeviceDoc": ("device",),
}
# ...the ints that must be whole (any other int read from a file may be any number)...
WHOLE: Dict[str, Tuple[str, ...]] = {"WorkloadKeys": ("batch",)}
# ...and the keys checked in an open dict (its other keys are free).
OPEN_KEYS: Dict[str, Dict[str, str]] = {"ResultDoc": {"workload": "WorkloadKeys"}}
