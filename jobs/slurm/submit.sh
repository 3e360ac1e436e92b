#!/usr/bin/env bash
# Submit a sharded richlazy sweep as a SLURM array and its merge as a dependent job:
#
#   N=16 JOB=jobs/fig1b.toml OUT=results/fig1b jobs/slurm/submit.sh [SBATCH OPTION...]
#
# N shards (array tasks 1-N) each write $OUT.shardK.h5; the merge job (afterok: once every task
# succeeded, requeues included) writes $OUT.h5. Options after the script name go to the array's
# sbatch only (e.g. --time=12:00:00 --cpus-per-task=16 --partition=long); STEP=2 submits
# --array=1-(2N-1):2 instead (same N shards). Logs go to logs/ beside this repository's root
# (created here; SLURM itself writes no log into a missing folder). The richlazy used is
# $RICHLAZY, else this repository's .venv/bin/richlazy, else the one on PATH. Prints
# "array JOBID, merge JOBID".
set -eu
: "${N:?number of shards}" "${JOB:?job file}" "${OUT:?output stem}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${RICHLAZY:-}" ]; then
    if [ -x "$root/.venv/bin/richlazy" ]; then
        RICHLAZY=$root/.venv/bin/richlazy
    else
        RICHLAZY=$(command -v richlazy) || { echo "richlazy not found: make install, or set RICHLAZY" >&2; exit 2; }
    fi
fi
[ -f "$JOB" ] || { echo "job file $JOB does not exist" >&2; exit 2; }
step=${STEP:-1}
logs=${LOGS:-$root/logs}
mkdir -p "$logs" "$(dirname "$OUT")"
abs() { case $1 in /*) echo "$1";; *) echo "$PWD/$1";; esac; }
JOB=$(abs "$JOB")
OUT=$(abs "$OUT")
vars="ALL,RICHLAZY=$RICHLAZY,JOB=$JOB,OUT=$OUT,N=$N"
arr=$(sbatch --parsable --array="1-$(( (N - 1) * step + 1 )):$step" --export="$vars" \
      --output="$logs/%x-%A_%a.out" "$@" "$here/sweep-array.sbatch")
arr=${arr%%;*}
merge=$(sbatch --parsable --dependency="afterok:$arr" --kill-on-invalid-dep=yes \
        --export="$vars" --output="$logs/%x-%j.out" "$here/merge.sbatch")
merge=${merge%%;*}
echo "array $arr, merge $merge"
echo "the merge writes $OUT.h5; logs in $logs" >&2
