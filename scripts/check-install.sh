#!/usr/bin/env bash
# A non-editable install (`pip install .` into a fresh virtual environment, core dependencies
# only: no torch, no dask) runs the README tour's first commands, from a folder outside the
# checkout, so that the installed package is what runs, not the source tree.
#
#   scripts/check-install.sh            # a temporary venv and folder, removed at the end
#   KEEP=1 scripts/check-install.sh     # keep them (the paths are printed)
#
# The job files are read from the checkout (`-c REPO/jobs/...`): they are not part of the
# installed package. Exits non-zero at the first command that fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d -t richlazy-install.XXXXXX)"
if [[ -z "${KEEP:-}" ]]; then
    trap 'rm -rf "$WORK"' EXIT
fi
echo "venv and tour folder: $WORK"

"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet "$REPO"
BIN="$WORK/venv/bin"

cd "$WORK"
mkdir -p tour/results && cd tour  # results/ as `make demo` leaves it
run() {
    echo "\$ $*"
    "$@"
}
# the installed package, not the checkout
run "$BIN/python" -c "import richlazy_cli, sys; p = richlazy_cli.__file__; \
print(p); sys.exit(p.startswith('$REPO'))"
run "$BIN/richlazy" --version
run "$BIN/richlazy" models > models.txt && echo "($(wc -l < models.txt) lines)"
run "$BIN/richlazy" solve single-neuron -p delta=-1 -p beta0=1,0.5 -o results/sn.h5
run "$BIN/richlazy" store show results/sn.h5
run "$BIN/richlazy" sweep solve single-neuron -g 'delta=linspace(-2,2,9)' -p beta0=1,0.5 \
    -o results/sn-delta.h5 -q
run "$BIN/richlazy" report results/sn-delta.h5 -o reports/sn-delta -q
run "$BIN/richlazy" sweep -c "$REPO/jobs/fig1b-small.toml" -o results/fig1b-small.h5 --dry-run
run "$BIN/richlazy" sweep -c "$REPO/jobs/fig1a.toml" -o results/fig1a.h5 -p steps=5000 -q
run "$BIN/richlazy" report results/fig1a.h5 -o reports/fig1a --kind neurons -q
run "$BIN/richlazy" store verify results/fig1a.h5
run "$BIN/richlazy" store ls
echo "the tour's first commands ran from a non-editable install"
