#!/bin/bash
# Submit a sharded richlazy sweep and its merge: N=16 JOB=jobs/x.toml OUT=results/x ./submit.sh
set -euo pipefail
: "${N:?number of shards}" "${JOB:?job file}" "${OUT:?output stem}"
here=$(dirname "$0")
mkdir -p logs "$(dirname "$OUT")"
arr=$(sbatch --parsable --array=1-"$N" --export=ALL,JOB="$JOB",OUT="$OUT" "$here/sweep-array.sbatch")
sbatch --dependency=afterok:"$arr" --export=ALL,OUT="$OUT",MERGE=1 "$here/sweep-array.sbatch"
echo "array job $arr submitted; the merge writes $OUT.h5"
