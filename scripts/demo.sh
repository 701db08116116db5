#!/usr/bin/env bash
# Installs and builds torch-tpu, then runs the demo on the default (CPU) PJRT plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 examples/demo.py
