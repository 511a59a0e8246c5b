# The two commands a newcomer types (see README):
#   make demo   set everything up in .venv and run a measurement on a simulated board
#   make test   set everything up in .venv and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU wheel used when no torch is present. A torch that is already importable (NVIDIA's
# Jetson wheel, seen through --system-site-packages) is never replaced.
TORCH_PIN ?= torch==2.13.0

.PHONY: setup demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	@if $(PY) -c "import torch" >/dev/null 2>&1; then \
		echo "torch already present: $$($(PY) -c 'import torch; print(torch.__version__)') (kept)"; \
	else \
		$(PY) -m pip install -q "$(TORCH_PIN)"; \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

setup: $(VENV)/.installed

# A measurement on a simulated TX1 at 690 MHz (AlexNet FP32/FP16, its rails): no hardware, no root.
demo: setup
	$(VENV)/bin/jetbench demo

test: setup
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check agent tests benchmarks

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info agent/*.egg-info
