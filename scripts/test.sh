#!/usr/bin/env bash
# Runs the whole test suite: the installable package (scripts/check_wheel.sh: wheel + sdist built, the wheel
# installed in a fresh environment and smoke-tested from outside the tree), then the C++ tests of the runtime,
# builder and lowering layers (ctest) beside the Python tests on the real CPU PJRT plugin (pytest). Installs and
# builds what it needs first.
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
bash scripts/check_wheel.sh
stage wheel
# The C++ tests run beside pytest: lowering_test's XLA compiles keep one core busy for a few minutes, and the pytest
# process keeps about two thirds of one busy (the first test files hold no timing assertions). Both must pass.
ctest --test-dir build --output-on-failure > build/ctest.log 2>&1 &
CTEST_PID=$!
set +e
python3 -m pytest tests/python -q -ra --durations=25 "$@"
PYTEST_RC=$?
wait "$CTEST_PID"
CTEST_RC=$?
set -e
echo "ctest (exit ${CTEST_RC}):"
tail -n 40 build/ctest.log
stage ctest_and_pytest
[ "$PYTEST_RC" -eq 0 ] && [ "$CTEST_RC" -eq 0 ]
