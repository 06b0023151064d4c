# Fresh-machine entry points: `make run` starts Switchboard, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run demo test install install-test sandbox bench bench-smoke lint clean image-test

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The runtime install carries no test tools. Both take the versions the image is built with
# (deploy/constraints.txt: the claude-agent-sdk above all, whose wheel carries the CLI), so what
# `make run` runs and `make test` tests is what the image ships.
PINS := deploy/constraints.txt
$(RUN_STAMP): pyproject.toml $(PINS) | $(VENV)/bin/python
	$(PY) -m pip install -q -c $(PINS) -e .
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml $(PINS) | $(VENV)/bin/python
	$(PY) -m pip install -q -c $(PINS) -e ".[test]"
	touch $(TEST_STAMP) $(RUN_STAMP)

install: $(RUN_STAMP)

install-test: $(TEST_STAMP)

# Agents run in a bubblewrap sandbox: install it when it is missing and we may (root, apt),
# saying so first. apt waits APT_LOCK_WAIT_S for a lock another apt holds, then gives up with
# a message; `make run` starts anyway (agents are refused until bwrap is there).
APT_LOCK_WAIT_S ?= 60
APT := apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_WAIT_S)
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "bubblewrap (bwrap) is missing: installing the system package 'bubblewrap' with" \
	         "apt-get (the agents' sandbox)..."; \
	    if out=$$( { $(APT) update -qq && DEBIAN_FRONTEND=noninteractive \
	                 $(APT) install -y -qq bubblewrap; } 2>&1 ); then \
	      echo "bubblewrap installed."; \
	    elif printf '%s' "$$out" | grep -qi 'lock'; then \
	      echo "apt is busy: another apt-get, dpkg or unattended-upgrades held its lock for" \
	           "$(APT_LOCK_WAIT_S)s. Wait for it to finish and run make again, or install it" \
	           "yourself (apt-get install bubblewrap). Going on without it: agents are refused" \
	           "until it is installed."; \
	    else \
	      printf '%s\n' "$$out" | tail -n 5; \
	      echo "Installing bubblewrap failed (above). Install it yourself (apt-get install" \
	           "bubblewrap); agents are refused until it is installed."; \
	    fi; \
	  else \
	    echo "bubblewrap (bwrap) is not installed: agents will be refused until it is" \
	         "(Debian/Ubuntu: sudo apt-get install bubblewrap; see switchboard doctor)"; \
	  fi; }

run: $(RUN_STAMP) sandbox
	$(VENV)/bin/switchboard run

# The whole flow in a minute with no key: the real CLI on a scripted local model.
demo: $(RUN_STAMP)
	$(VENV)/bin/switchboard demo

# Most tests wait on processes and sockets, not the CPU: four workers on two cores, one module
# per worker at a time (--dist loadscope), in collection order, so the twenty-agent fleets of
# tests/security/test_containment.py run one after the other, first (tests/conftest.py).
TEST_WORKERS ?= 4

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): without
# it every worker and every supervisor the tests start compiles (and pytest rewrites) every
# module again.
# `make test TEST_ARGS="tests/unit"` runs a part of the suite the same way.
test: $(TEST_STAMP) sandbox
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadscope \
	    --no-loadscope-reorder $(TEST_ARGS)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check bot commands supervisor store tests bench deploy
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

# Builds the Docker image (on a locally made Debian base) and runs tests/image against it.
image-test: $(TEST_STAMP)
	PY=$(PY) deploy/ci/image-test

# Every bench/*.py, one table, bench/RESULTS.md; exits 1 when a goal is missed (docs/benchmarks.md).
# `make bench ONLY="killswitch_latency spawn_latency"` runs a few.
bench: $(TEST_STAMP)
	$(PY) bench/_suite.py $(ONLY)

# Every bench at small sizes: each must run and print its rows; no timing verdicts.
bench-smoke: $(TEST_STAMP)
	$(PY) bench/_suite.py --smoke

clean:
	rm -rf $(VENV) build *.egg-info
