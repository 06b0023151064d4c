# Fresh-machine entry points: `make run` starts Switchboard, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test install bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/switchboard run

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) bench/spawn_latency.py
	$(PY) bench/fleet_rss.py
	$(PY) bench/escalation_roundtrip.py
	$(PY) bench/killswitch_latency.py

clean:
	rm -rf $(VENV) build *.egg-info
