# The course's commands. `make lab` opens the course; `make test` runs every check.
# Both create the virtual environment .venv on first use and are quick when nothing changed.

PYTHON ?= python3
VENV ?= .venv
# torch is installed first, its CPU build from requirements/torch.lock (with hashes; on Linux from
# PyTorch's CPU index, as pip's default wheel there is the CUDA build), so nothing later pulls a CUDA
# build. LOCKED_TORCH is the pin the locks were written for. Choose another build with e.g.
# `make test TORCH="torch==2.5.1"`: installed as pip resolves it, without hashes.
LOCKED_TORCH := torch==2.13.0
TORCH ?= $(LOCKED_TORCH)
PORT ?= 8888
# Notebook checks run in parallel on this many processes (CI has 2 cores): `make test JOBS=4`.
JOBS ?= 2

empty :=
space := $(empty) $(empty)
BIN := $(VENV)/bin
PY := $(BIN)/python
PIP := $(PY) -m pip --disable-pip-version-check
# The stamps' names carry the torch choice: a new choice re-runs the install. Two of them: what a
# learner needs (`make lab`: the course and JupyterLab), and what the repository's own work needs
# on top (`setup`: the test tools, nbgrader, playwright), which the student bundle never installs.
TORCH_TAG := $(subst =,_,$(subst $(space),_,$(TORCH)))
LAB_STAMP := $(VENV)/.lab-$(TORCH_TAG)
STAMP := $(VENV)/.installed-$(TORCH_TAG)

.PHONY: setup lab triton update lock test quick test-paths test-gpu test-platforms bench bench-browser notebooks check readme release grade guide gradescope classroom50 hub-links slides handout clean

setup: $(STAMP)

# Every package but torch comes from the lock files in requirements/, at the exact versions the
# tests passed with and checked against their sha256 hashes (`make lock` writes them from
# pyproject.toml); the course itself is then installed without its dependencies, and `pip check`
# proves nothing is missing. (Another TORCH than the locked one may need `make lock TORCH=...`.)
LAB_LOCK := requirements/lab.lock
TEST_LOCK := requirements/test.lock
TORCH_LOCK := requirements/torch.lock
TRITON_LOCK := requirements/triton.lock
INSTALL_TORCH := $(if $(filter $(LOCKED_TORCH),$(TORCH)),--require-hashes --no-deps -r $(TORCH_LOCK),"$(TORCH)")

$(LAB_STAMP): pyproject.toml Makefile $(LAB_LOCK) $(TORCH_LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet $(INSTALL_TORCH)
	@$(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" || { \
		echo "$(TORCH_LOCK) has no CPU build of torch for Python $$($(PY) -c 'import platform; print(platform.python_version(), "on", platform.system(), platform.machine())')":; \
		echo "  its lines name the Pythons and machines it holds one for. Use one of them (rm -rf $(VENV), then make lab PYTHON=python3.11)"; \
		echo "  or lock one for yours: make lock (it reaches PyTorch's CPU index)."; exit 2; }
	$(PIP) install --quiet --require-hashes --no-deps -r $(LAB_LOCK)
	$(PIP) install --quiet --no-deps -e .
	$(PIP) check
	@rm -f $(VENV)/.lab-*
	@touch $@

# Everything but `make lab` works on the repository (its tests, sources, teacher's side): the
# student bundle has none of them, and says so instead of installing the test tools for nothing.
# (the student bundle has no test.lock: the recipe says what the bundle is instead)
$(STAMP): $(LAB_STAMP) $(wildcard $(TEST_LOCK))
	@test -d tests || { echo "This is the course's student bundle: \`make lab\` opens it (README.md)." \
		"The tests and the teacher's tools are in the course's repository."; exit 2; }
	$(PIP) install --quiet --require-hashes --no-deps -r $(TEST_LOCK) -r $(TRITON_LOCK)
	$(PIP) check
	@# nbgrader is a test dependency (tests/test_nbgrader.py runs its command line); installed, it
	@# turns on its teacher menus and server extensions in every JupyterLab of this environment.
	@# A learner's JupyterLab does not need them, so they are off (README: how a teacher turns them on).
	@$(BIN)/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader >/dev/null 2>&1 || true
	@for part in formgrader validate_assignment assignment_list course_list; do \
		$(BIN)/jupyter server extension disable --sys-prefix nbgrader.server_extensions.$$part >/dev/null 2>&1 || true; done
	@rm -f $(VENV)/.installed-*
	@touch $@

# ----------------------------------------------------------------------------- the lab

# The learner's language: a zh_* locale (LANG=zh_CN.UTF-8) or `make lab LANG=zh` opens the Chinese
# notebooks; anything else (en_US.UTF-8, C, unset) the English ones.
COURSE_LANG := $(if $(filter zh%,$(LANG)),zh,en)
# In Chinese, JupyterLab's own menus are Chinese too (the zh-CN language pack is a dependency). The
# choice lives in a settings folder of the course's own, used only by the Chinese launch, so the
# English launch keeps the learner's usual JupyterLab settings. Written once: a language the learner
# then picks in Settings › Language is kept.
LAB_SETTINGS_ZH := $(VENV)/lab-settings-zh
LOCALE_SETTING_ZH := $(LAB_SETTINGS_ZH)/@jupyterlab/translation-extension/plugin.jupyterlab-settings
LAB_NEEDS_zh := $(LOCALE_SETTING_ZH)
LAB_ENV_zh := JUPYTERLAB_SETTINGS_DIR="$(LAB_SETTINGS_ZH)"

$(LOCALE_SETTING_ZH): | $(LAB_STAMP)
	@mkdir -p "$(@D)"
	@echo '{ "locale": "zh_CN" }' > "$@"

# JupyterLab's own settings for this environment (overrides.json in its application settings, not
# the learner's ~/.jupyter): no "Jupyter news?" pop-up and no update check (the course runs offline).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

$(LAB_OVERRIDES): | $(LAB_STAMP)
	@mkdir -p "$(@D)"
	@echo '{ "@jupyterlab/apputils-extension:notification": { "fetchNews": "false", "checkForUpdates": false } }' > "$@"

# The learner works in copies of the notebooks in $(WORK)/ (git-ignored), so autosave never edits the
# course's own and `git pull` never conflicts: copied on the first launch, a lesson the course gains
# later copied when missing, a copy the learner has never overwritten (course_utils/learner.py). The
# checks record each exercise's verdicts in $(WORK)/progress.json, which the home shows as it is when
# JupyterLab starts. JupyterLab is rooted at $(WORK)/ (the solutions are not in its file browser), with
# a copy of images/ there and of each language's glossary (glossary.md, 术语表.md) in $(WORK)/en and zh, for the lessons'
# links; it opens the home of the learner's language and reopens the home and the last lesson only
# (a kernel each), each language with its own layout in $(WORK)/.workspaces/en or zh
# (course_utils/launch.py).
# `make lab NO_BROWSER=1` starts it without opening a browser, `IP=0.0.0.0` listens on every interface
# (a remote machine), `PORT=8890` on another port. Once JupyterLab has started, `make lab` says the one
# address to open (with the token) and, last, which lessons the course changed since they were copied;
# `make update` brings the new version in, keeping every exercise the learner changed and every cell they
# added (after the cell it followed), saying what it kept and where, the old copy in before-update/ (`ONLY=01`: one lesson).
WORK := work
IP ?= localhost
NO_BROWSER ?=
LAB_BROWSER := $(if $(filter-out 0 no false,$(NO_BROWSER)),--no-browser)

lab: $(LAB_STAMP) $(LAB_OVERRIDES) $(LAB_NEEDS_$(COURSE_LANG))
	$(LAB_ENV_$(COURSE_LANG)) $(PY) -m course_utils lab "$(WORK)" --lang $(COURSE_LANG) --port $(PORT) --ip $(IP) $(LAB_BROWSER)

# Triton, for lesson 09 alone (1 GB installed; Linux on x86-64 or aarch64 only): not in the first
# install, so a learner downloads it when reaching lesson 09, which says to run this.
triton: $(LAB_STAMP)
	@case "$$(uname -s)/$$(uname -m)" in (Linux/x86_64|Linux/aarch64) ;; (*) \
		echo "make triton: Triton exists for Linux on x86-64 and aarch64 only, not for $$(uname -s) on $$(uname -m):" \
			"open lesson 09 on Colab or Binder (the course map in README.md links it)."; exit 2;; esac
	$(PIP) install --quiet --require-hashes --no-deps -r $(TRITON_LOCK)
	$(PIP) check

update: $(LAB_STAMP)
	$(PY) -m course_utils update "$(WORK)" --lang $(COURSE_LANG) $(if $(ONLY),--only $(ONLY))

# ----------------------------------------------------------------------------- tests

# Tests and notebooks run $(JOBS) at a time (pytest-xdist). --dist loadfile keeps a file together:
# a notebook's cells share one kernel, and a test module computes its trained models once. Files are
# handed out in collection order, the longest first (tests/conftest.py, LONGEST_FIRST).
PARALLEL := -n $(JOBS) --dist loadfile --no-loadscope-reorder
# (notebooks: xdist's own order, the notebooks with the most cells first, which is longest first)
NBVAL := $(PY) -m pytest --nbval --nbval-current-env -n $(JOBS) --dist loadfile
STUDENT_NOTEBOOKS := notebooks/en notebooks/zh
# With every core busy, a torch that uses two threads shares a core with another process, and
# OpenMP threads that spin while they wait for each other then run many times slower. Measured on
# a busy 2-core machine, one lesson-03 training run: 8 s on one thread, 60-110 s on two spinning
# threads, 7-8 s on two threads that sleep while they wait (PASSIVE). Results do not change.
# So the solutions, two torch threads each, run $(JOBS) notebooks at a time too: measured on a busy
# 2-core machine with lessons 03 and 06, both notebooks' processes took 38 CPU-seconds one after
# the other and 51 side by side (of which two more pytest workers' start-up: xdist's), where threads
# that always spin (OMP_WAIT_POLICY=ACTIVE) had burnt 96 s in the two kernels alone before 49 of
# their 68 cells had run. The cores they wanted ((CPU + run-queue time) / wall time, from
# /proc/*/schedstat): 1.0 one at a time, 1.6 side by side.
# The inner loop too: two test processes of two torch threads each on CI's two cores. Measured on a busy
# 2-core machine, `make quick`'s tests of four modules (480 tests, -n 2): 49 CPU-seconds with OpenMP's
# default wait, 38 with PASSIVE.
test test-paths quick test-platforms: export OMP_WAIT_POLICY = PASSIVE
# torch picks its CPU kernels by what the CPU can do (AVX2, AVX-512); ATEN_CPU_CAPABILITY=default
# forces the portable ones. Kernel paths round and sum floats differently, so a fact learned by
# training or sampling must hold on each path, not just on the one this machine runs natively.
# Only the paths the CPU has: torch takes ATEN_CPU_CAPABILITY=avx512 on a CPU without AVX-512 at
# its word and dies of an illegal instruction. (No /proc/cpuinfo, as on macOS: `default` only.)
cpu_has = $(shell flags=" $$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "; \
	for flag in $(1); do case "$$flags" in (*" $$flag "*) ;; (*) exit 0;; esac; done; echo yes)
KERNEL_PATHS := default $(if $(call cpu_has,avx2 fma),avx2) \
	$(if $(call cpu_has,avx512f avx512bw avx512vl avx512dq),avx512)

# The test files that hold tests marked `trains`: the trains steps collect these alone (collecting the
# whole suite cost each worker 31 CPU-seconds, these files 11; tests/conftest.py refuses a test marked
# `trains` in a file that does not spell `mark.trains`, so none is missed).
TRAINS_FILES := $(shell grep -l 'mark\.trains' tests/test_*.py 2>/dev/null)

# 1. Unit, exercise, build and browser tests, on the CPU's native kernels, less those marked `trains`.
# 2. The tests marked `trains` (they train models or state facts from sampling, on many seeds) on the
#    portable kernels. Their facts meet a second kernel path in step 3, where the solutions, which
#    train and state them, run on the native kernels; `make test-paths` runs the tests themselves
#    on every path the CPU has. (Running them in step 1 as well took about 3 of make test's minutes.)
# 3. nbval over every committed notebook: the solutions on the native kernels with two torch
#    threads (the build wrote their outputs with one, so this also proves that printed outputs do
#    not depend on the number of threads), the student notebooks (what a learner runs) on the
#    portable kernels with one. The student notebooks run the solutions' code, less the solutions,
#    so one kernel path each suffices: the facts that depend on the path are proved on both by step 2.
#    One pytest for both kinds, each notebook's kernel started with its kind's settings
#    (tests/nbval_env.py): the same workers take every notebook, longest first, with no second start
#    and no core left idle while the first kind's last notebook ends.
# No sanitize file: the notebooks print nothing that varies between runs or machines, and nbval
# should catch it if one does.
test: setup
	$(PY) -m pytest $(PARALLEL) -m "not platforms and not trains" tests
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest $(PARALLEL) -m trains $(TRAINS_FILES)
	$(NBVAL) -p tests.nbval_env notebooks/solutions $(STUDENT_NOTEBOOKS)

# The inner loop, in under 3 minutes on CI's 2 cores: the build's and the public cases' checks (no
# execution), then every test that neither trains (`trains`) nor starts a browser, a kernel or the
# grader, nor fuzzes, nor repeats a costly check proved in the loop elsewhere (`slow`: e.g. lesson 09's
# generic exercise tests, Triton's interpreter), nor grades on a platform (`platforms`, `make
# test-platforms`); no nbval. `make test` runs all of it again, and the rest but the platforms'.
# (the two checks run beside the tests, not before them: the tests' first 16 s on each core are pytest
# collecting them; measured on a quiet 2-core machine, 3:46 one after the other, 3:38 side by side (3:28 with
# lesson 09's known mistakes `slow`); any of the three failing fails. `build --check` leaves the public data to `publish --check`
# (--no-public): it compared them a second time, 8 of its 29 CPU-seconds, measured on a busy 2-core machine)
quick: setup
	@$(PY) -m course_teacher.publish --check & publish=$$!; \
		$(PY) -m course_teacher.build --check --no-public & built=$$!; \
		$(PY) -m pytest $(PARALLEL) -m "not trains and not slow and not platforms" tests; tested=$$?; \
		wait $$publish; published=$$?; wait $$built; checked=$$?; \
		test $$tested -eq 0 && test $$published -eq 0 && test $$checked -eq 0

# The trains tests and the student notebooks on every kernel path this CPU has (default, avx2,
# avx512), one path after another. Not part of `make test`: there the native path and `default`
# already run, and the others would take it past its time budget.
test-paths: setup
	@set -e; for path in $(KERNEL_PATHS); do \
		echo "== ATEN_CPU_CAPABILITY=$$path"; \
		ATEN_CPU_CAPABILITY=$$path $(PY) -m pytest $(PARALLEL) -m trains $(TRAINS_FILES); \
		COURSE_THREADS=1 ATEN_CPU_CAPABILITY=$$path $(NBVAL) $(STUDENT_NOTEBOOKS); \
	done

# On a machine with a CUDA GPU: the tests marked `gpu` (tests/test_gpu.py: every public helper given
# CUDA inputs against its CPU float64 result, every exercise's reference and check on CUDA inputs),
# then the solution notebooks under nbval with the GPU visible (the lessons compute on the CPU, so
# their outputs must not change; their speed sections measure on the GPU too, outputs nbval ignores).
# Without a GPU it says so in one line and skips them (`make test` skips them there too). A torch with
# CUDA is needed: `make test-gpu TORCH="torch==2.13.0" VENV=.venv-gpu` installs pip's default build.
# A lent GPU machine with no network runs benchmarks/gpu_session.sh instead (its docstring says how).
test-gpu: setup
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then \
		set -ex; \
		$(PY) -m pytest -m gpu -rs tests; \
		COURSE_THREADS=2 $(NBVAL) notebooks/solutions; \
	else \
		echo "make test-gpu: no CUDA GPU here (torch $$($(PY) -c 'import torch; print(torch.__version__)') sees none): the gpu tests are skipped."; \
	fi

# What each platform's user gets, tested as they get it (tests/test_platforms.py, tests/test_release.py):
# every lesson's autograder, in both languages, on Gradescope and Classroom 50 run as each platform runs
# it (in a container without this repository, offline while grading: bubblewrap, as root), and the
# student bundle installed from its zip alone. `make test` runs a sample of these; this runs them all.
test-platforms: setup
	$(PY) -m pytest $(PARALLEL) -m platforms tests

# ----------------------------------------------------------------------------- authoring

# Render every lesson source to its four notebooks and execute them (make notebooks ONLY=01 for one).
notebooks: setup
	$(PY) -m course_teacher.build $(if $(ONLY),--only $(ONLY))

# Benchmarks print ratios measured side by side in one run, on one thread; never a timed test. Each
# measures on every device present (the CPU, and a CUDA GPU when torch sees one; DEVICE=cpu or cuda for
# one) and writes its figures per device to course_utils/results/<benchmark>-<device>.json, which the
# lessons read (course_utils.measured): commit the files worth keeping. (bench_widgets: the CPU only;
# bench_flash_triton: a CUDA GPU only, lesson 09's kernels compiled by Triton: on a CPU it says in one
# line that it has nothing to measure, as Triton's interpreter runs NumPy there.)
DEVICE ?= all
# How long an explorer's redraw takes as a learner sees it, in JupyterLab in Chromium: the browser
# test of every lesson with the redraws timed (test-artifacts/*-redraws.json; printed, never asserted).
bench-browser: setup
	COURSE_TIME_REDRAWS=1 $(PY) -m pytest -n 1 -s tests/test_browser.py -k test_lesson_in_jupyterlab

bench: setup
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_multihead.py --device $(DEVICE)
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_probsparse.py --device $(DEVICE)
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_widgets.py
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_decoding.py --device $(DEVICE)
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_tiled.py --device $(DEVICE)
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_flash_triton.py --device $(DEVICE)
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_gpt.py --device $(DEVICE)

# The lock files (requirements/torch.lock, lab.lock, triton.lock, test.lock and grade.lock) from
# pyproject.toml's ranges, for every platform, with hashes. Run it after changing pyproject.toml's
# dependencies (it keeps every locked version the ranges still allow), or with UPGRADE=1 to move to
# the newest versions; then `make test` on a fresh clone before committing the new locks. uv resolves
# them; TORCH_WHEELS says where torch's CPU wheels are (default: download.pytorch.org, every Linux
# wheel; a local folder works too, and torch.lock then covers only the Pythons and machines of its
# wheels); PyPI gives the hashes of torch's macOS and Windows wheels.
UV := uv==0.13.9
TORCH_WHEELS ?=
lock:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet "$(UV)"
	$(PY) requirements/lock.py --torch "$(TORCH)" $(if $(TORCH_WHEELS),--wheels "$(TORCH_WHEELS)") $(if $(UPGRADE),--upgrade)

check: setup
	$(PY) -m course_teacher.build --check

# The README's Binder section (a link per lesson and language) from the repository address in
# pyproject.toml; run it after adding a lesson or changing the address (tests/test_links.py says when).
readme: setup
	$(PY) -m course_teacher.links --readme

# ----------------------------------------------------------------------------- teaching

# The zips a teacher hands out, in dist/: the student bundle (no solutions) and the solutions; and
# the branch `student` of this repository, the student bundle's files alone, which every student
# link (Binder, Colab) opens: push it with the release (`git push origin student`).
# `check` first: a release packages the committed notebooks, so they must match their sources.
release: check
	$(PY) -m course_teacher.release --student-branch

# Grade submitted notebooks: one notebook, or a folder with a folder per student (its name is the
# student's id). Writes $(GRADES)/grades.csv, and a result.json (Classroom 50's format) and a
# feedback.md per submission; fails unless every submission reaches MIN_SCORE (points, or 75%).
# Each submission runs in a bubblewrap sandbox of its own (apt-get install bubblewrap).
# SEED: your own secret number, which draws the hidden cases (the default one is public);
# LESSON: the assignment's lesson, so that a notebook of another lesson scores 0.
# `make grade SUBMISSIONS=path/to/folder SEED=$(cat ~/.course-seed) LESSON=02 MIN_SCORE=75%` (a seed of your own,
# made once: README); more: python -m course_teacher.grade -h
SUBMISSIONS ?= submissions
GRADES ?= grades
MIN_SCORE ?= 0
SEED ?=
LESSON ?=
grade: setup
	$(PY) -m course_teacher.grade "$(SUBMISSIONS)" --out "$(GRADES)" --min-score "$(MIN_SCORE)" --jobs $(JOBS) \
		$(if $(SEED),--seed "$(SEED)") $(if $(LESSON),--lesson "$(LESSON)")

# The teacher's guide (guide/en.md, guide/zh.md): rewrite each lesson's list of the mistakes to
# expect from the exercises' registry (tests/test_guide.py says when it is out of date).
guide: setup
	$(PY) -m course_teacher.guide

# nbgitpuller links for a school's JupyterHub: HUB=https://hub.example.edu REPO=<git address of a
# repository holding the student bundle> (BRANCH=student: this repository's student branch, which
# `make release` writes). It refuses a branch that holds the solutions, as this repository's main does.
hub-links: setup
	$(PY) -m course_teacher.links --hub "$(HUB)" --repo "$(REPO)" $(if $(BRANCH),--branch "$(BRANCH)")

# An autograder per lesson and language for Gradescope (a zip each) or Classroom 50 (a folder each),
# in dist/platforms/, with the course of this checkout pinned inside as a wheel (check out the tag
# you teach with first). LESSON=03 for one lesson; SEED=... draws the hidden cases.
gradescope classroom50: setup
	$(PY) -m course_teacher.platforms $@ $(if $(SEED),--seed "$(SEED)") $(if $(LESSON),--lesson "$(LESSON)")

# Lecture slides: a reveal.js deck per lesson and language in slides/decks/{en,zh}/, from the
# executed solution notebooks (make slides ONLY=01 for one lesson): they show the solutions, for the
# lecturer. Every slide fits a 16:9 screen (1280x720) without scrolling; the lessons' prose is in the
# speaker notes (press S in a deck). Light theme; dark with ?theme=dark after a deck's address, or by
# default with `make slides THEME=dark` (written to slides/decks/dark/). `make slides SIZE=hall`: for a
# large room, code and output at 24 px or more and the rest scaled to match, on more slides (written to
# slides/decks/hall/, or hall-dark/ with THEME=dark). No build overwrites another's. The decks work
# offline: copy slides/decks/ whole to the lecture machine and open a deck in a browser. reveal.js and
# MathJax come from the npm registry (npm ci, pinned in slides/package-lock.json): the step that needs
# the network, run again only when the lock file changes.
# `make handout`: the decks, then two PDFs per deck, printed light by Chromium (/usr/bin/chromium,
# through playwright), in slides/decks/handouts/ (slides/decks/hall/handouts/ with SIZE=hall):
#   student/{en,zh}/   FOR THE STUDENTS: from the student notebooks (exercise stubs, no solutions),
#                      4 slides to an A4 page, no notes;
#   lecturer/{en,zh}/  FOR THE LECTURER ONLY: the solution decks, one slide a page, every page
#                      labelled "Lecturer's copy - contains the solutions". Never hand these out.
THEME ?= light
SIZE ?= normal
SLIDES_NPM := slides/node_modules/.package-lock.json
$(SLIDES_NPM): slides/package.json slides/package-lock.json
	npm ci --prefix slides --ignore-scripts --no-audit --no-fund
	@touch $@

SLIDES_ARGS = $(if $(ONLY),--only $(ONLY)) --theme $(THEME) --size $(SIZE)
slides: setup $(SLIDES_NPM)
	$(PY) -m course_teacher.slides $(SLIDES_ARGS)

handout: setup $(SLIDES_NPM)
	$(PY) -m course_teacher.slides $(SLIDES_ARGS) --handout

clean:
	rm -rf $(VENV) test-artifacts dist slides/decks slides/node_modules
