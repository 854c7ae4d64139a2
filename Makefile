# The two commands of the README:
#   make demo   train, test and compare the three demo encodings on the shipped corpus (CPU, < 30 min)
#   make test   run the test suite
# Both create the virtual environment (.venv) from requirements.txt when it is missing.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_CONFIGS := configs/demo/sinusoidal.yaml configs/demo/learnable.yaml configs/demo/rope.yaml

.PHONY: demo test test-slow venv clean-demo

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) sweep.py $(DEMO_CONFIGS) --output runs/demo/summary

test: venv
	$(PY) -m pytest -q

test-slow: venv
	$(PY) -m pytest -q -m slow

clean-demo:
	rm -rf runs/demo
