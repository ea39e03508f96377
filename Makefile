# Durable execution for AI agents -- one-command set-up.
#   make demo   set up .venv and run the course's main job (the crash matrices)
#   make test   set up .venv and run the whole test suite (after make lint: ruff's error checks)
#   make lab    open JupyterLab on course/
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NBVAL_SANITIZE := tests/nbval-sanitize.cfg
NBGRADER_SERVER_EXTENSIONS := $(addprefix nbgrader.server_extensions.,formgrader validate_assignment assignment_list course_list)
LAB_ANNOUNCEMENTS := @jupyterlab/apputils-extension:announcements
UV_VERSION := 0.13.9
# The Restate server (the Restate lesson): a binary in an npm package, installed under the venv.
# Its version: the one pin, in a file the library (crashlab.engines.registry) and the installers read.
RESTATE_VERSION := $(shell cat shared/crashlab/engines/restate/SERVER_VERSION)
RESTATE_STAMP   := $(VENV)/restate/.installed-$(RESTATE_VERSION)
# Offline, npm's default retries take 70 s before it gives up; these, under 10 s. Its errors still show (stderr).
NPM_RETRIES     := --fetch-retries=2 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=5000
# JupyterLab refuses to start as root unless told; a container is usually root.
LAB_AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: setup demo test lint unit notebooks-check lab build execute grade clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	@# uv installs the pinned set in seconds where pip takes a minute or more; pip alone if uv cannot be had.
	@# --compile-bytecode: graded code runs as a user who cannot write __pycache__, and would compile its imports each time.
	( $(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) \
	  && $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e '.[test,lab]' ) \
	|| $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test,lab]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" > /dev/null
	@# The Lab learners open is for learning: no nbgrader instructor menus (grading is `crashlab grade`), no news popup.
	( $(BIN)/jupyter server extension disable --sys-prefix $(NBGRADER_SERVER_EXTENSIONS) \
	  && $(BIN)/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader $(LAB_ANNOUNCEMENTS) \
	  && $(BIN)/jupyter labextension lock --level=sys_prefix @jupyter/nbgrader $(LAB_ANNOUNCEMENTS) ) \
	  > $(VENV)/lab-setup.log 2>&1 || (cat $(VENV)/lab-setup.log; exit 1)
	@# Graded as root, student code runs as an unprivileged user, who must be able to run this Python.
	@if [ "$$(id -u)" = 0 ]; then d=$$(dirname "$$(readlink -f $(BIN)/python)"); while [ "$$d" != / ]; do chmod o+x "$$d"; d=$$(dirname "$$d"); done; fi
	touch $(STAMP)

# --ignore-scripts: the binary comes in a platform package (an optional dependency) and needs no install script;
# the only one in the tree is a telemetry ping. Without npm, crashlab.engines.restate.fetch downloads the same
# platform package from the npm registry and checks its hash (Node.js is not needed to run the server).
$(RESTATE_STAMP): | $(STAMP)
	@if command -v npm > /dev/null 2>&1; then \
	  npm install --loglevel=error --no-audit --no-fund --ignore-scripts $(NPM_RETRIES) --prefix $(VENV)/restate \
	    @restatedev/restate-server@$(RESTATE_VERSION) > /dev/null && touch $@ \
	  || echo "warning: npm could not install @restatedev/restate-server@$(RESTATE_VERSION) (see above); the Restate tests skip until it is"; \
	else \
	  $(BIN)/python -m crashlab.engines.restate.fetch $(VENV)/restate > /dev/null && touch $@ \
	  || echo "warning: without npm, the Restate server could not be downloaded either (see above); the Restate tests skip until it is"; \
	fi

setup: $(STAMP) $(RESTATE_STAMP)

demo: setup
	$(BIN)/crashlab demo

# The unit tests and grader proofs (with Run All on every unanswered student notebook:
# tests/grading/test_student_notebooks.py) and nbval over the masters (full output comparison), in one pool
# (tests/conftest.py keeps each notebook's cells on one worker). Four workers on two cores: much of the
# suite waits on agent processes, servers, durable waits and frozen worlds, and with three the two cores were
# idle an eighth of the run (a fresh clone: 16 min 0 s of tests with three, 12 min 58 s with four; the README
# gives the latest times). The suite passes on a machine loaded to 20: no test judges a time. The lint runs beside
# the tests, not before them: it keeps one core busy for half a minute, while the tests' pool fills both; its
# output comes after the tests', and either failing fails `make test`.
test: setup
	@$(MAKE) --no-print-directory lint > .venv/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest solutions tests -q -n 4 --nbval --nbval-sanitize-with $(NBVAL_SANITIZE) --durations=25; \
	tests=$$?; wait $$lint; linted=$$?; cat .venv/lint.log; \
	if [ $$linted -ne 0 ]; then echo "error: make lint failed (its output is above)" >&2; fi; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

# ruff's checks for errors (pyproject.toml, [tool.ruff]): undefined or unused names, syntax, statement slips -- in
# the library, the tests and the masters' code (their cells and the files they write: tests/lint_masters.py);
# import-linter's contracts (pyproject.toml, [tool.importlinter]): the library's layers, kept; and mypy
# ([tool.mypy]): the library's types, checked.
lint: setup
	$(BIN)/ruff check shared tests
	$(BIN)/python -m pytest tests/lint_masters.py -q -n 0
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

lab: setup
	$(BIN)/jupyter lab --notebook-dir=course --ServerApp.ip=127.0.0.1 $(LAB_AS_ROOT)

# Authors: regenerate course/ from solutions/, or re-run a master and save its outputs first. A student notebook
# changed since the build wrote it (a learner's work) is left alone and named; FORCE=1 replaces it too.
build: setup
	$(BIN)/crashlab build $(if $(FORCE),--force)

execute: setup
	$(BIN)/crashlab execute solutions/*.ipynb
	$(BIN)/crashlab build $(if $(FORCE),--force)

# make grade NB=course/01_naive_event_log.ipynb
grade: setup
	$(BIN)/crashlab grade $(NB) --json results.json

clean:
	rm -rf $(VENV) .crashlab solutions/.crashlab course/.crashlab
