#!/usr/bin/env bash
# Installs what torch-tpu needs (pinned torch CPU build, the default PJRT plugin, test tools) and builds the
# C++ extension in place. Safe to run repeatedly: the CMake build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check torch==2.13.0 xla-cpu-pjrt==0.0.1 numpy pytest expecttest \
    setuptools wheel cmake ninja
# --no-build-isolation: build against the torch installed above instead of downloading another one.
$PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
