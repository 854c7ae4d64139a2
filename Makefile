# The two commands of the README:
#   make demo   train, test and compare the three demo encodings on the shipped corpus (CPU, < 30 min)
#   make test   run the test suite (make test-fast: without the tests marked slow; make lint: ruff)
#   make length the length-extrapolation study: every encoding, single sentences and joined pairs, three
#               seeds, RoPE scaled at test time (2-core CPU: a day; resumable, run it again after a stop)
#   make length-headline   the length study's declared headline set at seeds 3-11 too (twelve seeds)
#   make demo-seeds   nineteen more seeds of each demo encoding (1-19), then one table over all twenty
# Both create the virtual environment (.venv) from requirements.txt when it is missing.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_CONFIGS := configs/demo/sinusoidal.yaml configs/demo/learnable.yaml configs/demo/rope.yaml
# Every config of the length study: one per encoding trained on single sentences, one per encoding on
# joined pairs (<name>_concat.yaml), rope_randomized
LENGTH_CONFIGS := $(filter-out configs/length/base.yaml,$(sort $(wildcard configs/length/*.yaml)))
# The length study's headline set, twelve seeds each: one encoding per family and sinusoidal on joined pairs
LENGTH_HEADLINE := $(foreach n,sinusoidal rope alibi learnable t5_bias sinusoidal_concat,configs/length/$(n).yaml)
# Launcher flags for the sweeps below, e.g. make length SWEEP="--launcher local --runs_per_gpu 4" (README:
# "Sweeps on several GPUs or a SLURM cluster"); empty: one run after another in one process
SWEEP ?=
# Each RoPE run also tested stretched at inference, no retraining (<run>/test_<name>/, rows of their own)
LENGTH_VARIANTS := $(foreach s,linear ntk yarn,--variant $(s)4 model.positional.scaling=$(s) model.positional.scaling_factor=4)

.PHONY: config-schema demo demo-seeds length length-headline archive results readme results-check readme-check test test-fast test-durations test-gpu lint bench venv clean-demo

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) sweep.py $(DEMO_CONFIGS) $(SWEEP) --family configs/demo/findings/headline.yaml --output runs/demo/summary

# The demo's twenty seeds (the archived study: results/demo/), as its declared family plans them
# (configs/demo/findings/headline.yaml: seeds, device, precision)
DEMO_SEEDS := $(shell seq 1 19)
demo-seeds: demo
	$(PY) sweep.py $(DEMO_CONFIGS) --seeds $(DEMO_SEEDS) $(SWEEP) --output runs/demo/seeds_more_summary
	$(PY) compare.py "runs/demo/*" --family configs/demo/findings/headline.yaml --output runs/demo/seeds_summary --overwrite

# Length extrapolation: every encoding trained on short sources (and on joined pairs), tested on
# inputs of k joined test pairs; the config's own seed, then seeds 1 and 2, then one table over all
length: venv
	$(PY) sweep.py $(LENGTH_CONFIGS) $(LENGTH_VARIANTS) $(SWEEP) --output runs/length/seed1234_summary
	$(PY) sweep.py $(LENGTH_CONFIGS) $(LENGTH_VARIANTS) --seeds 1 2 $(SWEEP) --output runs/length/seeds12_summary
	$(PY) compare.py "runs/length/*" --family configs/length/findings/headline.yaml --output runs/length/summary --overwrite

# The length study's declared headline set (configs/length/findings/headline.yaml) at seeds 3-11 as well:
# twelve seeds, as the family plans them
LENGTH_HEADLINE_SEEDS := $(shell seq 3 11)
length-headline: length
	$(PY) sweep.py $(LENGTH_HEADLINE) $(LENGTH_VARIANTS) --seeds $(LENGTH_HEADLINE_SEEDS) $(SWEEP) --output runs/length/seeds_more_summary
	$(PY) compare.py "runs/length/*" --family configs/length/findings/headline.yaml --output runs/length/summary --overwrite

# One pytest worker per core (pytest-xdist), each test module on one worker (its fixtures built once),
# in the order tests/conftest.py gives them (the modules that took longest first: tests/durations.json)
# (the variants marked sampled are the fast tier's subsets of tests that run whole here: pytest.ini)
XDIST := -n auto --dist loadfile --no-loadscope-reorder
test: venv
	$(PY) -m pytest -q $(XDIST) -m "not sampled"

# The tests that need CUDA (marked gpu; skipped without it) and those that behave differently where a GPU
# is present (gpu_aware), on a GPU machine (CI has none): tools/gpu_study.sh runs it first, with the
# machine's own python (its CUDA torch), since this target does not build the CPU virtual environment
test-gpu:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m pytest -q -m "gpu or gpu_aware" -rs

# Lint and format check (ruff.toml; .ci/run runs it before the tests): `ruff format .` fixes the format
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The seconds each test module takes, from one run of the whole suite, into tests/durations.json
# (tests/conftest.py starts the longest first, so that the two workers end together): after adding or
# lengthening a long test
test-durations: venv
	$(PY) -m pytest -q $(XDIST) -m "not sampled" --junitxml=.pytest_cache/durations.xml
	$(PY) tools/test_durations.py .pytest_cache/durations.xml

# The same without the tests marked slow (pytest.ini): the quick check while working
test-fast: venv
	$(PY) -m pytest -q $(XDIST) -m "not slow"

# Speed benchmarks against peer implementations (tables + benchmarks/results/*.json)
bench: venv
	$(PY) benchmarks/decode.py
	$(PY) benchmarks/train.py

# Keep the tested runs behind the README's tables in git (results/, no checkpoints), in the archive's
# stored forms (tools/archive.py, utils/stored_files.py): per-sentence files xz-compressed, numeric tables
# by column, each study's references and sources once by content (results/<study>/test_sets/), the
# run's provenance.json kept. compare.py reads them as they are; copied back into runs/ (with the
# study's test_sets/) they let a sweep skip what is finished. Prints what it added and any run over the
# archive's budget (tests/tools/test_archive_budget.py). Then `make results` regenerates the summaries.
ARCHIVE_FROM := $(wildcard runs/demo runs/length runs/report/length)
archive: venv
	$(PY) tools/archive.py pack $(or $(ARCHIVE_FROM),runs/demo)

# The README's results are compare.py's output on results/, verbatim (tools/readme_results.py):
#   make results        recompute every study's tables and findings from the archived runs, then the README
#   make readme         copy the committed tables and findings into the README's generated blocks
#   make results-check  fail if the README or a committed table/findings file differs from the runs now
results: venv
	$(PY) tools/readme_results.py recompute
	$(PY) tools/readme_results.py render

# configs/schema.json, overlay.schema.json, family.schema.json (for editors) from the config schema
config-schema: venv
	$(PY) tools/config_schemas.py

readme: venv
	$(PY) tools/readme_results.py render

results-check: venv
	$(PY) tools/readme_results.py check --recompute

# Every command the README shows, run for real in a scratch copy of the project with tiny configs of the
# same names; those marked (needs a GPU), (needs a SLURM cluster), (needs several nodes) parsed only
# (tools/readme_check.py; several minutes on 2 cores)
readme-check: venv
	$(PY) tools/readme_check.py

clean-demo:
	rm -rf runs/demo
