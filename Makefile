# The two commands a newcomer types (see README):
#   make demo   set everything up in .venv and run a measurement on a simulated board
#   make test   set everything up in .venv and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Which torch: tools/torch_setup.py holds the table (Python version -> the newest torch with
# wheels for it), keeps a torch that is already importable (NVIDIA's Jetson wheel, seen through
# --system-site-packages), and refuses a CUDA build (gigabytes) unless ALLOW_CUDA_TORCH=1.
# TORCH_PIN=torch==X overrides the table; TORCH_PIN=none sets up without torch.
export TORCH_PIN ALLOW_CUDA_TORCH

.PHONY: setup system-deps ort-gpu-env check-python demo test stress gpu-check lint bench clean

# Before anything is created or downloaded: can this Python get a torch at all?
check-python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 8))' 2>/dev/null || { \
		echo "setup: error: jetbench needs Python 3.8 or newer; $(PYTHON) is $$($(PYTHON) -V 2>&1)" >&2; \
		echo "  fix: make setup PYTHON=python3.11" >&2; exit 1; }
	@$(PYTHON) tools/torch_setup.py check

$(VENV)/.installed: pyproject.toml tools/torch_setup.py
	@$(MAKE) --no-print-directory check-python PYTHON="$(PYTHON)"
	@echo "setup: creating $(VENV) (sees the system's packages, so a Jetson torch is used as it is)"
	$(PYTHON) -m venv --system-site-packages $(VENV)
	@$(PY) tools/torch_setup.py install
	@echo "setup: installing jetbench (editable) and its test tools into $(VENV)..."
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@
	@echo "setup: done. Run: $(VENV)/bin/jetbench --help"

setup: $(VENV)/.installed

# A measurement on a simulated TX1 at 690 MHz (AlexNet FP32/FP16, its rails): no hardware, no root.
# Results go to OUT=dir when given (else a new temporary directory); the last lines name them.
demo: setup
	@echo "demo: measuring on a simulated TX1 (about a minute)..."
	$(VENV)/bin/jetbench demo $(if $(OUT),--out "$(OUT)")

# The system programs some tests need (fuse3, systemd-analyze): installed as root with apt-get,
# else the exact command is printed and those tests skip (the run's last lines count them).
system-deps:
	@sh tools/system_deps.sh

# A second venv with the real onnxruntime-gpu wheel (its GPU providers fail to load here as on
# a machine without CUDA's libraries): the ort_gpu tests run jetbench against it (TESTING.md).
# Never fatal: where it cannot be had, those tests skip and the run's last lines say so.
ORT_VENV ?= .venv-ort-gpu
ort-gpu-env: setup
	@sh tools/ort_gpu_env.sh "$(PYTHON)" "$(VENV)" "$(ORT_VENV)"

# Four pytest-xdist workers on a 2-core machine: a third of the suite's time is waiting on the
# processes its tests start (windows, daemons), which more workers fill; one test handed out at
# a time (--maxschedchunk 1), so no worker is given a long run of long tests (TESTING.md, "How
# long the suite takes"). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 4

test: setup system-deps ort-gpu-env
	$(PY) -m pytest -n $(TEST_WORKERS) --maxschedchunk 1

# Before each stop (TESTING.md): make test from fresh clones, in the background with SIGINT
# ignored, beside BURNERS CPU burners, RUNS times in a row.
RUNS ?= 1
BURNERS ?= 4
stress:
	RUNS=$(RUNS) BURNERS=$(BURNERS) tools/stress_test.sh

# On a machine with an NVIDIA GPU: every GPU path once, one table (tools/gpu_check.py); on a
# machine without one, one line and exit 0.
gpu-check: setup
	$(PY) tools/gpu_check.py $(if $(OUT),--out "$(OUT)")

lint: setup
	$(PY) -m ruff check agent tests benchmarks tools
	$(PY) -m pytest -n 0 -q tests/test_types.py  # mypy against its baseline (TESTING.md)

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(ORT_VENV) build *.egg-info agent/*.egg-info
