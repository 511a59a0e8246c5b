"""A stand-in for nvidia-ml-py's `pynvml` (tests only): the calls jetbench makes, with the
signatures of nvidia-ml-py (pynvml.py: nvmlDeviceSetGpuLockedClocks(handle, minGpuClockMHz,
maxGpuClockMHz), nvmlDeviceGetSupportedGraphicsClocks(handle, memoryClockMHz),
nvmlDeviceSetPowerManagementLimit(handle, limit) in mW, ...), and the return codes of nvml.h.

Its GPUs live in a JSON file named by $JETBENCH_TEST_NVML_STATE, so a `jetbench` subprocess (this
directory on its PYTHONPATH), a kill -9 and a later `jetbench restore` all see one GPU state.
Every setter and reset is appended to the file's "calls" list, in order."""

import json
import os

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_TURING = 6
NVML_DEVICE_ARCH_AMPERE = 7
IDLE_GRAPHICS_MHZ = 210  # an unlocked, idle GPU

_inits = 0


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return {2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions"}.get(
            self.value, f"NVML error {self.value}")


def a100(bus_id="00000000:01:00.0", power_limit_mw=300_000, **extra):
    """An A100-SXM4-40GB as NVML describes it: memory 1215 MHz, graphics 210..1410 MHz in 15 MHz
    steps, power limit settable 100..400 W (default 400 W)."""
    gpu = {"bus_id": bus_id, "name": "NVIDIA A100-SXM4-40GB", "memory_mhz": [1215],
           "graphics_mhz": list(range(1410, 209, -15)), "power_limit_mw": power_limit_mw,
           "limits_mw": [100_000, 400_000], "default_mw": 400_000, "locked_gpu": None,
           "locked_mem": None, "permission": True, "memory_lock_supported": True,
           "architecture": NVML_DEVICE_ARCH_AMPERE}
    gpu.update(extra)
    return gpu


def write_state(path, gpus):
    with open(path, "w") as f:
        json.dump({"gpus": gpus, "calls": []}, f)


def _path():
    return os.environ["JETBENCH_TEST_NVML_STATE"]


def _load():
    with open(_path()) as f:
        return json.load(f)


def _save(state):
    tmp = _path() + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, _path())


def _check_init():
    if _inits <= 0:
        raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED


def nvmlInit():
    global _inits
    _inits += 1


def nvmlShutdown():
    global _inits
    _check_init()
    _inits -= 1


def nvmlDeviceGetCount():
    _check_init()
    return len(_load()["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    _check_init()
    if not 0 <= index < len(_load()["gpus"]):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return index


class _PciInfo:
    def __init__(self, bus_id):
        self.busId = bus_id


def _gpu(handle):
    _check_init()
    return _load()["gpus"][handle]


def nvmlDeviceGetPciInfo(handle):
    return _PciInfo(_gpu(handle)["bus_id"])


def nvmlDeviceGetName(handle):
    return _gpu(handle)["name"]


def nvmlDeviceGetArchitecture(handle):
    return _gpu(handle)["architecture"]


def nvmlDeviceGetPersistenceMode(handle):
    """NVML_FEATURE_ENABLED (1) or NVML_FEATURE_DISABLED (0); Linux only, as in nvml.h."""
    return _gpu(handle).get("persistence", 1)


def nvmlDeviceGetSupportedMemoryClocks(handle):
    return list(_gpu(handle)["memory_mhz"])


def nvmlDeviceGetSupportedGraphicsClocks(handle, memoryClockMHz):
    gpu = _gpu(handle)
    if memoryClockMHz not in gpu["memory_mhz"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return list(gpu["graphics_mhz"])


def nvmlDeviceGetPowerManagementLimitConstraints(handle):
    return list(_gpu(handle)["limits_mw"])


def nvmlDeviceGetPowerManagementDefaultLimit(handle):
    return _gpu(handle)["default_mw"]


def nvmlDeviceGetPowerManagementLimit(handle):
    return _gpu(handle)["power_limit_mw"]


def nvmlDeviceGetClockInfo(handle, clock_type):
    gpu = _gpu(handle)
    if clock_type == NVML_CLOCK_MEM:
        return gpu["locked_mem"][1] if gpu["locked_mem"] else max(gpu["memory_mhz"])
    return gpu["locked_gpu"][1] if gpu["locked_gpu"] else IDLE_GRAPHICS_MHZ


def _set(handle, call, update, *args, supported=True):
    _check_init()
    state = _load()
    gpu = state["gpus"][handle]
    if not gpu["permission"]:
        raise NVMLError(NVML_ERROR_NO_PERMISSION)
    ok = supported(gpu) if callable(supported) else supported
    if not ok:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    update(gpu)
    state["calls"].append([call, gpu["bus_id"], *args])
    _save(state)


def nvmlDeviceSetGpuLockedClocks(handle, minGpuClockMHz, maxGpuClockMHz):
    _set(handle, "SetGpuLockedClocks",
         lambda g: g.update(locked_gpu=[minGpuClockMHz, maxGpuClockMHz]),
         minGpuClockMHz, maxGpuClockMHz)


def nvmlDeviceResetGpuLockedClocks(handle):
    _set(handle, "ResetGpuLockedClocks", lambda g: g.update(locked_gpu=None))


def nvmlDeviceSetMemoryLockedClocks(handle, minMemClockMHz, maxMemClockMHz):
    _set(handle, "SetMemoryLockedClocks",
         lambda g: g.update(locked_mem=[minMemClockMHz, maxMemClockMHz]),
         minMemClockMHz, maxMemClockMHz, supported=lambda g: g["memory_lock_supported"])


def nvmlDeviceResetMemoryLockedClocks(handle):
    _set(handle, "ResetMemoryLockedClocks", lambda g: g.update(locked_mem=None),
         supported=lambda g: g["memory_lock_supported"])


def nvmlDeviceSetPowerManagementLimit(handle, limit):
    def update(g):
        lo, hi = g["limits_mw"]
        if not lo <= limit <= hi:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g["power_limit_mw"] = limit

    _set(handle, "SetPowerManagementLimit", update, limit)
