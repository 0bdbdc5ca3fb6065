# The course's commands. `make lab` opens the course; `make test` runs every check.
# Both create the virtual environment .venv on first use and are quick when nothing changed.

PYTHON ?= python3
VENV ?= .venv
# torch is installed first, pinned to the CPU build, so nothing later pulls a CUDA build.
# Choose another build with e.g. `make test TORCH="torch==2.5.1"`.
TORCH ?= torch==2.13.0
PORT ?= 8888

empty :=
space := $(empty) $(empty)
BIN := $(VENV)/bin
PY := $(BIN)/python
PIP := $(PY) -m pip --disable-pip-version-check
# The stamp's name carries the torch choice: a new choice re-runs the install.
STAMP := $(VENV)/.installed-$(subst =,_,$(subst $(space),_,$(TORCH)))

.PHONY: setup lab test notebooks check clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet "$(TORCH)"
	$(PIP) install --quiet -e ".[test]"
	@rm -f $(VENV)/.installed-*
	@touch $@

# --allow-root: these machines (and many containers) run as root, where JupyterLab refuses to start otherwise.
lab: setup
	$(BIN)/jupyter lab --allow-root --port=$(PORT) --ServerApp.root_dir="$(CURDIR)" notebooks/en

# Unit, exercise, build and browser tests, then nbval over every committed notebook with one
# and with two torch threads (printed outputs must not depend on it). No sanitize file: the
# notebooks print nothing that varies between runs or machines, and nbval should catch it if one does.
test: setup
	$(PY) -m pytest tests
	COURSE_THREADS=1 $(PY) -m pytest --nbval --nbval-current-env notebooks
	COURSE_THREADS=2 $(PY) -m pytest --nbval --nbval-current-env notebooks

# Render every lesson source to its four notebooks and execute them (make notebooks ONLY=01 for one).
notebooks: setup
	$(PY) -m course_utils.build $(if $(ONLY),--only $(ONLY))

check: setup
	$(PY) -m course_utils.build --check

clean:
	rm -rf $(VENV) test-artifacts
