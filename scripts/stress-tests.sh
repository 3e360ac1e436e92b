#!/usr/bin/env bash
# Repeat the tests that start, signal or wait on other processes, as `make test` runs them
# (marker `processes`, not `slow`: kills and resumes, SIGTERM during a merge, locks, cron,
# Make; not SLURM), RUNS times under load: two CPU-burning processes run beside them the whole
# time. Prints one line per run and a summary; exits 1 if any run failed. Each failing run's
# output is kept in $LOGS.
#
#   scripts/stress-tests.sh [RUNS]        # default 20
#   BUDGET=3000 scripts/stress-tests.sh   # start no run after BUDGET seconds; the summary
#                                         # says how many ran
#   MARK='processes' scripts/stress-tests.sh   # the slow tier's ones too
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
PYTHON=${PYTHON:-.venv/bin/python}
LOGS=${LOGS:-$(mktemp -d /tmp/stress-tests.XXXXXX)}
BUDGET=${BUDGET:-0}
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

echo "stress: $RUNS runs of -m '$MARK' (${#FILES[@]} files) beside 2 CPU burners" \
    "($(nproc) cores); logs in $LOGS"
start=$(date +%s)
failed=0
ran=0
for i in $(seq 1 "$RUNS"); do
    if [ "$BUDGET" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$BUDGET" ]; then
        echo "stress: the budget of $BUDGET s is spent; no further run started"
        break
    fi
    ran=$i
    t0=$(date +%s)
    if "$PYTHON" -m pytest -q -p no:cacheprovider -m "$MARK" "${FILES[@]}" >"$LOGS/run-$i.log" \
        2>&1; then
        verdict=ok
    else
        verdict=FAILED
        failed=$((failed + 1))
    fi
    summary=$(grep -E "(passed|failed|error)" "$LOGS/run-$i.log" | tail -1)
    [ "$verdict" = ok ] && rm -f "$LOGS/run-$i.log"
    printf 'run %2d/%d: %-6s %4d s  load %s %s\n' "$i" "$RUNS" "$verdict" "$(( $(date +%s) - t0 ))" \
        "$(cut -d' ' -f1 /proc/loadavg)" "$summary"
done
echo "stress: $failed of $ran runs failed in $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
