# GraCE: the two commands a user needs are `make smoke` (set up if needed, then the smoke test)
# and `make test`. See README.md.
SHELL := /bin/bash
PY = $$(bash scripts/python.sh)

.PHONY: setup smoke test doctor experiments figures clean

setup:
	bash scripts/setup.sh

smoke:
	@bash scripts/check_gpu.sh
	@[ -s .grace-python ] || bash scripts/setup.sh
	bash scripts/smoke_test.sh

test: setup
	$(PY) -m pytest -q tests

doctor:
	$(PY) -m grace doctor

experiments:
	bash scripts/run_single_gpu_experiments.sh

figures:
	bash scripts/generate_single_gpu_figures.sh

clean:
	rm -rf .grace-python .pytest_cache
