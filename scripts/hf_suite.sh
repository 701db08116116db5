#!/usr/bin/env bash
# Transformers' own model tests on cpu and on tpu, per family, with a table of the results (docs/hf_testing.md).
# Installs and builds what it needs (scripts/setup.sh), then runs tools/hf_suite.py with the given arguments, e.g.
#   bash scripts/hf_suite.sh                                   # six families, cpu and tpu (hours on the CPU plugin)
#   bash scripts/hf_suite.sh --families bert,vit --report /tmp/table.md
#   bash scripts/hf_suite.sh --subset --check                  # the CI subset (tests/python/test_hf_suite.py)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec nice -n "${NICE:-10}" python3 tools/hf_suite.py "$@"
