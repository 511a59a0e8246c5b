# The two commands a newcomer types (see README):
#   make demo   set everything up in .venv and run a measurement on a simulated board
#   make test   set everything up in .venv and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU wheel used when no torch is present. A torch that is already importable (NVIDIA's
# Jetson wheel, seen through --system-site-packages) is never replaced.
TORCH_PIN ?= torch==2.13.0
# The oldest Python that pin has wheels for (its Requires-Python: >=3.10). An older Python works
# only with a torch already installed (JetPack 5's NVIDIA wheel on Python 3.8, for instance).
TORCH_PIN_MIN_PYTHON ?= 3.10

.PHONY: setup check-python demo test lint bench clean

# Before anything is created or downloaded: can this Python get a torch at all?
check-python:
	@$(PYTHON) -c 'import sys; print("setup: using Python %d.%d at %s" % (sys.version_info[:2] + (sys.executable,)))'
	@if $(PYTHON) -c "import torch" >/dev/null 2>&1; then :; \
	elif ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < tuple(map(int, "$(TORCH_PIN_MIN_PYTHON)".split("."))))'; then \
		echo "setup: error: the CPU torch this set-up installs ($(TORCH_PIN)) needs Python $(TORCH_PIN_MIN_PYTHON) or newer, and $(PYTHON) has no torch of its own." >&2; \
		echo "  fix: make setup PYTHON=python3.11 (any Python >= $(TORCH_PIN_MIN_PYTHON)), or install NVIDIA's torch wheel for your JetPack first (make setup keeps it)" >&2; \
		exit 1; \
	fi

$(VENV)/.installed: pyproject.toml
	@$(MAKE) --no-print-directory check-python PYTHON="$(PYTHON)"
	@echo "setup: creating $(VENV) (sees the system's packages, so a Jetson torch is used as it is)"
	$(PYTHON) -m venv --system-site-packages $(VENV)
	@if $(PY) -c "import torch" >/dev/null 2>&1; then \
		echo "setup: torch already present: $$($(PY) -c 'import torch; print(torch.__version__)') (kept)"; \
	else \
		echo "setup: installing $(TORCH_PIN) into $(VENV) (a large download: a minute or more)..."; \
		$(PY) -m pip install -q "$(TORCH_PIN)" || exit 1; \
	fi
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

test: setup
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check agent tests benchmarks

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info agent/*.egg-info
