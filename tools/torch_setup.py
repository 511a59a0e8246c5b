"""The torch step of `make setup`: a torch that exists for this Python, never a CUDA build by
surprise, never a replacement for a torch that is already there (NVIDIA's Jetson wheel).

    python tools/torch_setup.py check     # before anything is created: can this Python get one?
    python tools/torch_setup.py install   # inside the venv: install the pin for this Python

TORCH_PIN=SPEC overrides the table (TORCH_PIN=none: set up without torch); ALLOW_CUDA_TORCH=1
lets pip install a build that brings CUDA libraries (gigabytes) when that is what you want.
Runs on every Python 3 (no syntax newer than 3.6), so that an old one gets a message, not a
SyntaxError.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile

# The newest torch release with wheels for each Python (PyPI's Requires-Python and wheel tags,
# checked with `pip index versions torch --python-version X`): one place for this fact.
TORCH_PINS = {
    (3, 8): "torch==2.4.1",
    (3, 9): "torch==2.8.0",
    (3, 10): "torch==2.13.0",
    (3, 11): "torch==2.13.0",
    (3, 12): "torch==2.13.0",
    (3, 13): "torch==2.13.0",
}
# Packages that mean the planned torch is a CUDA build (the x86_64 wheels on PyPI are).
CUDA_PACKAGE_PREFIXES = ("nvidia-", "nvidia_", "cuda-", "cuda_", "triton")
# PyTorch's own index of CPU-only wheels (every release since 1.x, x86_64 and aarch64):
# where a CPU torch comes from when PyPI's wheel for this machine is a CUDA build.
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


def say(line):
    print("setup: " + line, flush=True)


def fail(line, fixes):
    sys.stderr.write("setup: error: " + line + "\n")
    for fix in fixes:
        sys.stderr.write("  fix: " + fix + "\n")
    return 1


def python_name(version=None):
    major, minor = (version or sys.version_info)[:2]
    return "Python {}.{}".format(major, minor)


def supported_range():
    versions = sorted(TORCH_PINS)
    return "{}.{} to {}.{}".format(*(versions[0] + versions[-1]))


def pin_for(version, override=None):
    """The torch requirement to install for a Python (major, minor); None: none is known."""
    if override:
        return override
    return TORCH_PINS.get(tuple(version[:2]))


def installed_torch():
    """The version of a torch this Python can import (found, not imported: that takes
    seconds), or None."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:  # an importable torch without metadata (a source build)
        return "unknown version"


def cuda_packages(report):
    """Names in a `pip install --report` plan that are CUDA libraries."""
    names = [item["metadata"]["name"] for item in report.get("install", [])]
    return [n for n in names if n.lower().startswith(CUDA_PACKAGE_PREFIXES)]


def index_args(index_url):
    return ["--index-url", index_url] if index_url else []


def plan(pin, index_url=None):
    """What pip would install for `pin` (metadata only, nothing downloaded but that), from the
    configured index or `index_url`: (the report, None) or (None, pip's last error lines)."""
    fd, path = tempfile.mkstemp(prefix="jetbench-torch-plan.", suffix=".json")
    os.close(fd)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
             "--ignore-installed", "--report", path] + index_args(index_url) + [pin],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if res.returncode != 0:
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
            return None, "\n".join(errors[-2:]) or res.stderr.strip()[-500:]
        with open(path) as fh:
            return json.load(fh), None
    finally:
        os.unlink(path)


def check():
    """Before anything is created: this Python has a torch, or the table has one for it."""
    say("using {} at {}".format(python_name(), sys.executable))
    present = installed_torch()
    if present:
        say("torch {} is already installed: it will be used as it is".format(present))
        return 0
    pin = pin_for(sys.version_info, os.environ.get("TORCH_PIN"))
    if pin is None:
        return fail(
            "no torch is known for {} (set-up supports {}), and it has no torch of its own"
            .format(python_name(), supported_range()),
            ["make setup PYTHON=python3.11 (any of {})".format(supported_range()),
             "or install a torch for this Python first (make setup keeps it)",
             "or make setup TORCH_PIN=none (everything but the workloads)"])
    return 0


def pip_can_plan():
    """pip 22.2+ has `install --dry-run --report` (a fresh Ubuntu 20.04 venv has pip 20)."""
    try:
        import pip
        major, minor = (int(p) for p in pip.__version__.split(".")[:2])
    except Exception:  # noqa - no pip, or a version string we cannot read: let pip say
        return True
    return (major, minor) >= (22, 2)


def install():
    """Inside the venv: keep a torch that is there, else install the pin for this Python."""
    present = installed_torch()
    if present:
        say("torch {} already present (kept)".format(present))
        return 0
    pin = pin_for(sys.version_info, os.environ.get("TORCH_PIN"))
    if pin == "none":
        say("no torch (TORCH_PIN=none): measure, sweep, time and demo will say it is missing")
        return 0
    if pin is None:
        return check()
    if not pip_can_plan():
        say("upgrading this venv's pip (22.2 or newer plans an install without doing it)...")
        if subprocess.call([sys.executable, "-m", "pip", "install", "-q", "-U", "pip>=22.2"]):
            return fail("could not upgrade pip in the venv", ["see pip's message above"])
    say("asking pip what {} means for {} on this machine (metadata only)...".format(
        pin, python_name()))
    report, error = plan(pin)
    if report is None:
        return fail("pip finds no installable {} for {}:\n{}".format(pin, python_name(), error),
                    ["make setup TORCH_PIN=torch==VERSION (one that exists for this Python)",
                     "or make setup TORCH_PIN=none (everything but the workloads)"])
    index_url = None
    cuda = cuda_packages(report)
    if cuda and os.environ.get("ALLOW_CUDA_TORCH") != "1":
        say("the {} pip finds for this machine is a CUDA build ({} CUDA packages, gigabytes);"
            " asking PyTorch's CPU index ({}) instead...".format(pin, len(cuda), CPU_INDEX_URL))
        cpu_report, cpu_error = plan(pin, CPU_INDEX_URL)
        if cpu_report is None or cuda_packages(cpu_report):
            why = cpu_error if cpu_report is None else "it plans CUDA packages too"
            return fail(
                "no CPU build of {} for {} could be planned: PyPI's is a CUDA build ({}...),"
                " and PyTorch's CPU index gave: {}".format(
                    pin, python_name(), ", ".join(cuda[:3]), why),
                ["install a CPU torch into the venv first (pip install TORCH --index-url {}),"
                 " then make setup again: an installed torch is kept".format(CPU_INDEX_URL),
                 "or make setup TORCH_PIN=none (everything but the workloads)",
                 "or make setup ALLOW_CUDA_TORCH=1 to download the CUDA build anyway"])
        report, index_url = cpu_report, CPU_INDEX_URL
    say("installing {}{} ({} packages; a large download, a minute or more)...".format(
        pin, " from " + index_url if index_url else "", len(report.get("install", []))))
    return subprocess.call([sys.executable, "-m", "pip", "install", "-q"]
                           + index_args(index_url) + [pin])


if __name__ == "__main__":
    steps = {"check": check, "install": install}
    if len(sys.argv) != 2 or sys.argv[1] not in steps:
        sys.exit("usage: torch_setup.py check|install")
    sys.exit(steps[sys.argv[1]]())
