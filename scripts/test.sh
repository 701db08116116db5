#!/usr/bin/env bash
# Runs the whole test suite: C++ tests of the runtime, builder and lowering layers (ctest), then the Python
# tests on the real CPU PJRT plugin (pytest). Installs and builds what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --build build -j "${MAX_JOBS:-2}"
ctest --test-dir build --output-on-failure
python3 -m pytest tests/python -q -ra "$@"
