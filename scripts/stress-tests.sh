#!/usr/bin/env bash
# Repeat the tests that start, signal or wait on other processes, as `make test` runs them
# (marker `processes`, not `slow`: kills and resumes, SIGTERM during a merge, locks, cron,
# Make; not SLURM), RUNS times under load: two CPU-burning processes run beside them the whole
# time, and the runs go SIDE_BY_SIDE at a time (default 2), so that each run also has the
# other's processes, kills and locks beside its own (more contention than `make test`, where
# they run one at a time beside the other pytest worker). Prints one line per run and a
# summary; exits 1 if any run failed. Each failing run's output is kept in $LOGS.
#
#   scripts/stress-tests.sh [RUNS]        # default 20
#   SIDE_BY_SIDE=1 scripts/stress-tests.sh     # one run at a time
#   BUDGET=3000 scripts/stress-tests.sh   # start no run after BUDGET seconds; the summary
#                                         # says how many ran
#   MARK='processes' scripts/stress-tests.sh   # the slow tier's ones too
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
PYTHON=${PYTHON:-.venv/bin/python}
LOGS=${LOGS:-$(mktemp -d /tmp/stress-tests.XXXXXX)}
BUDGET=${BUDGET:-0}
SIDE_BY_SIDE=${SIDE_BY_SIDE:-2}
MARK=${MARK:-processes and not slow}
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    # each run starts some forty Python processes: let them share their compiled modules
    # (in $LOGS) instead of compiling richlazy again in each one
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX="$LOGS/pycache"
fi

# the files that hold such tests, found once: each run then collects only those
mapfile -t FILES < <("$PYTHON" -m pytest -q -p no:cacheprovider --collect-only -m "$MARK" \
    2>/dev/null | grep '::' | cut -d: -f1 | sort -u)
if [ "${#FILES[@]}" -eq 0 ]; then
    echo "stress: no test is marked '$MARK'" >&2
    exit 2
fi

burn() { python3 -c 'while True: pass' & }
burn; B1=$!
burn; B2=$!
trap 'kill $B1 $B2 2>/dev/null; rm -rf "$LOGS/pycache"' EXIT

echo "stress: $RUNS runs of -m '$MARK' (${#FILES[@]} files), $SIDE_BY_SIDE at a time," \
    "beside 2 CPU burners ($(nproc) cores); logs in $LOGS"

one_run() {  # run $1: its pytest, then its line (the lines of runs side by side may interleave)
    local i=$1 t0 verdict summary
    t0=$(date +%s)
    if "$PYTHON" -m pytest -q -p no:cacheprovider -m "$MARK" "${FILES[@]}" >"$LOGS/run-$i.log" \
        2>&1; then
        verdict=ok
    else
        verdict=FAILED
        touch "$LOGS/failed-$i"
    fi
    summary=$(grep -E "(passed|failed|error)" "$LOGS/run-$i.log" | tail -1)
    [ "$verdict" = ok ] && rm -f "$LOGS/run-$i.log"
    printf 'run %2d/%d: %-6s %4d s  load %s %s\n' "$i" "$RUNS" "$verdict" \
        "$(( $(date +%s) - t0 ))" "$(cut -d' ' -f1 /proc/loadavg)" "$summary"
}

start=$(date +%s)
ran=0
i=0
while [ "$i" -lt "$RUNS" ]; do
    if [ "$BUDGET" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$BUDGET" ]; then
        echo "stress: the budget of $BUDGET s is spent; no further run started"
        break
    fi
    pids=()
    for _ in $(seq 1 "$SIDE_BY_SIDE"); do
        [ "$i" -lt "$RUNS" ] || break
        i=$((i + 1))
        one_run "$i" &
        pids+=($!)
    done
    wait "${pids[@]}"
    ran=$i
done
failed=$(find "$LOGS" -maxdepth 1 -name 'failed-*' | wc -l)
echo "stress: $failed of $ran runs failed in $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
