#!/usr/bin/env bash
# Run PyTorch's own test/test_dataloader.py (torch 2.13.0) against a dataset_kit checkout.
#
#   bash compat/torch/run_torch_suite.sh [CHECKOUT] [-- extra pytest args]
#
# Modes (TORCH_SUITE_MODES, default "pytorch dk"): "pytorch" runs the file on PyTorch's
# own DataLoader (the baseline); "dk" swaps in dataset_kit.torch's DataLoader,
# get_worker_info, default_collate and default_convert in every process of the run
# (sitecustomize.py, beside this script). The tests out of scope are deselected in both
# modes; README.md lists each with its reason, and conftest.py reads them from there.
#
# The test file is PyTorch's, kept outside this repository (README.md says why and where
# from): TORCH_SUITE_TEST_FILE, default $TORCH_SUITE_HOME/test_dataloader.py, else
# ../shared/compat/vendor/torch/test_dataloader.py beside the checkout; its sha256
# must equal the one in test_dataloader.sha256. TORCH_SUITE_BASE is the Python that has
# torch (default CHECKOUT/.venv/bin/python); the run uses a virtual environment at
# $TORCH_SUITE_HOME/venv (default ~/.cache/dataset_kit_torch_suite) that sees the base's
# packages and adds the two the test file imports (expecttest, psutil).
# Each mode's run is stopped after TORCH_SUITE_TIMEOUT seconds (default 1800).
# TORCH_SUITE_TAIL: how many of pytest's last lines to print per mode (default 1; add
# "-- -rfE" to the arguments and raise it to see failures).
# Prints a last line:
#   torch suite: pytorch P passed, F failed, E errors, S skipped; dataset_kit P passed, ...
set -u
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "${1:-.}" && pwd); shift || true
[ "${1:-}" = "--" ] && shift
home=${TORCH_SUITE_HOME:-$HOME/.cache/dataset_kit_torch_suite}
base=${TORCH_SUITE_BASE:-$checkout/.venv/bin/python}
# Without TORCH_SUITE_TEST_FILE: this machine's copy, else the steering repository's
# vendored copy beside the checkout (where CI finds the peers' test files).
file=${TORCH_SUITE_TEST_FILE:-$home/test_dataloader.py}
if [ -z "${TORCH_SUITE_TEST_FILE:-}" ] && [ ! -f "$file" ] &&
   [ -f "$checkout/../shared/compat/vendor/torch/test_dataloader.py" ]; then
  file=$checkout/../shared/compat/vendor/torch/test_dataloader.py
fi
modes=${TORCH_SUITE_MODES:-pytorch dk}
venv=$home/venv

fail() { echo "$1"; echo "torch suite: not run ($1)"; exit 2; }
[ -x "$base" ] || fail "no Python with torch at $base (set TORCH_SUITE_BASE)"
[ -f "$file" ] || fail "no test_dataloader.py at $file (see $here/README.md)"
want=$(awk '{print $1}' "$here/test_dataloader.sha256")
have=$(sha256sum "$file" | awk '{print $1}')
[ "$have" = "$want" ] || fail "$file has sha256 $have, not PyTorch 2.13's $want"

if [ ! -x "$venv/bin/python" ]; then
  "$base" -m venv "$venv" || fail "could not create $venv"
fi
# The venv sees the base's packages (torch, pytest, numpy) after its own.
"$venv/bin/python" -c 'import sys, sysconfig; print(sysconfig.get_paths()["purelib"])' >/dev/null
purelib=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' |
  { read -r own; echo "$purelib" > "$own/zz_torch_base.pth"; }
if ! "$venv/bin/python" -c 'import expecttest, psutil' 2>/dev/null; then
  "$venv/bin/pip" -q install expecttest psutil >/dev/null 2>&1 || fail "could not install expecttest and psutil into $venv"
fi
"$venv/bin/python" -c 'import torch, pytest' 2>/dev/null || fail "$venv does not see torch and pytest from $base"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The file imports itself by its own name (for spawned workers), so it keeps it.
cp "$file" "$work/test_dataloader.py"
cp "$here/conftest.py" "$work/conftest.py"
cd "$work"
summary=""
status=0
for mode in $modes; do
  case $mode in
    pytorch) swap=0; label=pytorch ;;
    dk) swap=1; label=dataset_kit ;;
    *) echo "unknown mode $mode (pytorch or dk)"; exit 2 ;;
  esac
  # timeout signals its whole process group, so workers left by a hung test go too.
  out=$(TORCH_SUITE_SWAP=$swap TORCH_SUITE_README="$here/README.md" \
        PYTHONPATH="$here:$checkout${PYTHONPATH:+:$PYTHONPATH}" \
        timeout -k 30 "${TORCH_SUITE_TIMEOUT:-1800}" \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider test_dataloader.py "$@" 2>&1)
  rc=$?
  # The scope line (conftest.py), then pytest's last lines (its summary line at least).
  { echo "$out" | grep '^torch suite scope'; echo "$out" | tail -n "${TORCH_SUITE_TAIL:-1}"; } |
    sed "s/^/[$label] /"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "[$label] stopped after ${TORCH_SUITE_TIMEOUT:-1800} s"
  last=$(echo "$out" | tail -1)
  count() { echo "$last" | grep -o "[0-9]* $1" | grep -o '[0-9]*' | head -1; }
  p=$(count passed); f=$(count failed); e=$(count error); s=$(count skipped)
  [ $rc -eq 0 ] || status=1
  summary="$summary${summary:+; }$label ${p:-0} passed, ${f:-0} failed, ${e:-0} errors, ${s:-0} skipped"
done
echo "torch suite: $summary"
exit $status
