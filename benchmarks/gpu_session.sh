#!/usr/bin/env bash
# One session on a lent GPU machine (an H100 or H200 with python3.12, a CUDA torch, Triton, numpy,
# matplotlib and pytest, no network): the course's GPU tests; lesson 09 on the GPU (its four notebooks
# under nbval, its kernels compiled, then bench_flash_triton.py: float16 and bfloat16, d = 64 and 128,
# L = 1,024 to 16,384, causal and not); the solution notebooks of lessons 05 to 08 under nbval with the
# GPU visible; then `make bench`'s other benchmarks on the GPU, each within a time budget, the whole in
# under 9 minutes (one device command may run 10); a compact summary at the end. LESSON09=0 leaves
# lesson 09's two steps out (a session for the other lessons); LESSON09=only runs the GPU tests and
# lesson 09's steps alone.
#
# Prepare, once, on a machine with the network (the device README's recipe): the wheels the course's
# import chain and the tests need that the GPU machine lacks, in .whl/ at the repository's root, which
# git ignores (`echo /.whl/ >> .git/info/exclude`, or the .whl/.gitignore that holds `*`): ipywidgets,
# nbformat, IPython, traitlets, comm, jsonschema and their dependencies; ipykernel, jupyter_client,
# nbclient, nbval, pyzmq, tornado and debugpy for the notebooks; mplfonts with its one font the course
# draws with (NotoSansCJKsc-Regular.otf; the other fonts left out of the wheel: 29 MB in all). Then,
# on the device, from the repository's root, with `.whl` carried:
#
#     bash benchmarks/gpu_session.sh
#
# What comes back, in $OUT (at most 8 files): session.log (everything printed), results/<bench>-cuda.json
# for the five benchmarks (course_utils.measured's format). Commit the JSON files to course_utils/results/
# and re-render lessons 04, 05, 07, 08 and 09: they show the GPU's figures beside their own.
#
# Order: what checks the course on a GPU first (the tests, the notebooks), the benchmarks, whose
# figures are committed already, with what is left. The notebooks run without this script's
# MPLBACKEND=Agg: their kernel must draw inline as it does anywhere else (with Agg, plt.show()
# displays nothing, and nbval reported every figure cell of 05, 07 and 08 as "Missing output fields
# text/plain" on the first H200 run: a failure of the session, not of the lessons).
#
# Steps and their budgets in seconds (timeout each; a step that runs out is reported, the rest go on;
# none runs past the session's TOTAL, 540 unless set):
#   wheels 40 · GPU tests 100 · lesson 09's four notebooks under nbval, 150 (their checks and timing
#   cells on the GPU, the kernels compiled) · bench_flash_triton 200 · the solution notebooks of lessons
#   05 to 08 (English) under nbval with the GPU visible, 200 (their speed sections measure on it too;
#   nbval ignores those outputs) · bench_multihead 40 · bench_probsparse 70 · bench_decoding 50 ·
#   bench_tiled 60. With lesson 09's steps the total passes 540 s: the last steps are reported as not
#   run (LESSON09=0 for a session of the others).
#
# A dry run of the logic here, without a GPU (the tests on the CPU, the benchmarks --quick on the CPU,
# no wheels, no notebooks; NOTEBOOKS=1 runs them on the CPU too):
#     OUT=/tmp/gpu-out PYTHON=.venv/bin/python DEVICE=cpu QUICK=1 WHEELS=none NOTEBOOKS=0 bash benchmarks/gpu_session.sh
# tests/test_gpu_session.py runs it with a stand-in for python that records each step's command.

set -u
cd "$(dirname "$0")/.."
OUT=${OUT:?"OUT: the folder whose files come back (set on the lent machine)"}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
WHEELS=${WHEELS:-.whl}
NOTEBOOKS=${NOTEBOOKS:-1}
LESSON09=${LESSON09:-1}
TOTAL=${TOTAL:-540}
mkdir -p "$OUT/results"
LOG="$OUT/session.log"
START=$(date +%s)
SUMMARY=()
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MPLBACKEND=Agg

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( TOTAL - $(elapsed) )); }

# step NAME BUDGET COMMAND...: run COMMAND within BUDGET seconds (never past the session's total),
# its output to the log and the screen; record its status and time for the summary.
step() {
    local name=$1 budget=$2
    shift 2
    local room
    room=$(left)
    if (( room < 10 )); then
        SUMMARY+=("$(printf '%-18s %s' "$name" "not run: the session's $TOTAL s are spent")")
        return
    fi
    (( budget > room )) && budget=$room
    echo "===== $name (budget ${budget} s, $(elapsed) s into the session)"
    local began=$SECONDS status
    timeout -k 5 "$budget" "$@" 2>&1
    status=$?
    local took=$(( SECONDS - began ))
    local verdict="ok"
    (( status == 124 || status == 137 )) && verdict="ran out of its ${budget} s"
    (( status != 0 && status != 124 && status != 137 )) && verdict="failed (exit $status)"
    SUMMARY+=("$(printf '%-18s %-28s %4d s' "$name" "$verdict" "$took")")
}

main() {
    echo "gpu_session: $(date -u +%FT%TZ), device $DEVICE, quick $QUICK, budget $TOTAL s"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

    if [[ "$WHEELS" != none ]]; then
        if compgen -G "$WHEELS/*.whl" >/dev/null; then
            step wheels 40 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target /tmp/site "$WHEELS"/*.whl
            export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
        else
            echo "no wheels in $WHEELS/: the course's imports may fail (see this script's first lines)"
        fi
    fi
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

    "$PYTHON" - "$DEVICE" <<'EOF' || { echo "gpu_session: stopped: torch sees no CUDA device"; return 1; }
import sys, torch
device = sys.argv[1]
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available: {torch.cuda.is_available()}"
      + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
sys.exit(0 if device != "cuda" or torch.cuda.is_available() else 1)
EOF

    local tests_env=()
    [[ "$DEVICE" != cuda ]] && tests_env=(env COURSE_GPU_TESTS_ON="$DEVICE")
    step "gpu tests" 100 "${tests_env[@]}" "$PYTHON" -m pytest -p no:cacheprovider -m gpu -q -rfEs tests/test_gpu.py

    local quick=()
    (( QUICK )) && quick=(--quick)
    if [[ "$LESSON09" != 0 ]]; then
        if (( NOTEBOOKS )); then
            # both languages, students' and solutions': the checks and the timing cells on the GPU
            local lesson09=(notebooks/en/09_*.ipynb notebooks/zh/09_*.ipynb notebooks/solutions/en/09_*.ipynb
                            notebooks/solutions/zh/09_*.ipynb)
            step "notebooks 09" 150 env -u MPLBACKEND COURSE_THREADS=1 "$PYTHON" -m pytest -p no:cacheprovider \
                --nbval --nbval-current-env -q -n "${#lesson09[@]}" --dist loadfile "${lesson09[@]}"
        fi
        step "bench_flash_triton" 200 "$PYTHON" benchmarks/bench_flash_triton.py --device "$DEVICE" \
            --out "$OUT/results" --dtypes float16 bfloat16 "${quick[@]}"
    fi

    if (( NOTEBOOKS )) && [[ "$LESSON09" != only ]]; then
        # one notebook a worker; the kernel draws inline (no MPLBACKEND: see the top of this file)
        local notebooks=(notebooks/solutions/en/0[5-8]_*.ipynb)
        step "notebooks 05-08" 200 env -u MPLBACKEND COURSE_THREADS=1 "$PYTHON" -m pytest -p no:cacheprovider \
            --nbval --nbval-current-env -q -n "${#notebooks[@]}" --dist loadfile "${notebooks[@]}"
    fi

    local budget benches=(multihead:40 probsparse:70 decoding:50 tiled:60)
    [[ "$LESSON09" == only ]] && benches=()
    for bench in "${benches[@]}"; do
        budget=${bench#*:}
        bench=${bench%%:*}
        step "bench_$bench" "$budget" "$PYTHON" "benchmarks/bench_$bench.py" --device "$DEVICE" --out "$OUT/results" "${quick[@]}"
    done

    echo
    echo "===== summary ($(elapsed) s)"
    printf '%s\n' "${SUMMARY[@]}"
    "$PYTHON" benchmarks/gpu_summary.py "$OUT/results" "$DEVICE"
}

main 2>&1 | tee "$LOG"
