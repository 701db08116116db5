#!/usr/bin/env bash
# Runs the whole test suite: C++ tests of the runtime, builder and lowering layers (ctest), the installable package
# (scripts/check_wheel.sh: wheel + sdist built, the wheel installed in a fresh environment and smoke-tested from
# outside the tree), then the Python tests on the real CPU PJRT plugin (pytest). Installs and builds what it needs
# first.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed at the end (also when a stage fails), after pytest's own summary.
STAGES=""
t=$SECONDS
trap 'echo "test.sh stage times (s):${STAGES} (running: $((SECONDS - t)))"' EXIT
stage() { STAGES="${STAGES} $1=$((SECONDS - t))"; t=$SECONDS; }
bash scripts/setup.sh
cmake --build build -j "${MAX_JOBS:-2}"
stage setup_build
ctest --test-dir build --output-on-failure
stage ctest
bash scripts/check_wheel.sh
stage wheel
python3 -m pytest tests/python -q -ra --durations=25 "$@"
stage pytest
