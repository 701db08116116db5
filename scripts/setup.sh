#!/usr/bin/env bash
# Installs what torch-tpu needs (pinned torch CPU build, the default PJRT plugin, test tools) and builds the
# C++ extension in place. Safe to run repeatedly: the CMake build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Hugging Face stack (tests/python/test_hf_*.py, test_kernels_lib.py, the demo) pinned alongside torch in the same
# resolve, so accelerate's torch>=2.0 requirement keeps torch 2.13.0 (Pillow comes with diffusers). jax/jaxlib: the
# optional extra torch-tpu[jax] (tests/python/test_jax_kernels.py, test_inductor_tpu.py); 0.10.2 is the newest for
# Python 3.11. parameterized and pytest-timeout: Transformers' own tests (tools/hf_suite.py). peft: LoRA fine-tuning
# through Trainer (tests/python/test_trainer.py).
$PY -m pip install -q --disable-pip-version-check torch==2.13.0 xla-cpu-pjrt==0.0.1 numpy pytest expecttest \
    setuptools wheel cmake ninja transformers==5.24.0 accelerate==1.15.0 diffusers==0.42.1 kernels==0.17.2 \
    jax==0.10.2 jaxlib==0.10.2 parameterized pytest-timeout peft==0.21.2
# --no-build-isolation: build against the torch installed above instead of downloading another one.
$PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
