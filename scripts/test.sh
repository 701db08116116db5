#!/usr/bin/env bash
# Runs the whole test suite: C++ tests of the runtime, builder and lowering layers (ctest), the installable package
# (scripts/check_wheel.sh: wheel + sdist built, the wheel installed in a fresh environment and smoke-tested from
# outside the tree), then the Python tests on the real CPU PJRT plugin (pytest). Installs and builds what it needs
# first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --build build -j "${MAX_JOBS:-2}"
ctest --test-dir build --output-on-failure
bash scripts/check_wheel.sh
python3 -m pytest tests/python -q -ra "$@"
