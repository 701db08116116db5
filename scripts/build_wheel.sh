#!/usr/bin/env bash
# Builds the torch-tpu wheel and sdist into dist/ (or $1), against the installed torch.
#
#   bash scripts/build_wheel.sh [OUT_DIR]
#
# The wheel requires exactly the torch it is built against (torch==X.Y.Z, set by setup.py) plus numpy and the CPU
# PJRT plugin; extras add the others: torch-tpu[tpu], torch-tpu[cuda13], torch-tpu[cuda12], torch-tpu[jax].
# No build isolation: the build uses the installed torch, cmake and ninja (an isolated build would download
# another torch). The C++ build reuses the CMake build directory (build/, or $TORCH_TPU_BUILD_DIR) and ccache,
# so after an editable build (scripts/setup.sh) the wheel costs a configure and a copy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
export TORCH_DEVICE_BACKEND_AUTOLOAD=0  # an installed torch_tpu must not load while building a new one
rm -f "$OUT"/torch_tpu-*.whl "$OUT"/torch_tpu-*.tar.gz
$PY -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$OUT" .
# The sdist through setuptools' PEP 517 backend, in process (no isolation, nothing to download).
$PY -c "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))" "$OUT" \
    >"$OUT/.sdist.log" 2>&1 || { cat "$OUT/.sdist.log"; exit 1; }
rm -f "$OUT/.sdist.log"
ls -l "$OUT"/torch_tpu-*
