#!/usr/bin/env bash
# torch-tpu on an NVIDIA GPU through the CUDA PJRT plugin: build, diagnose, run the op and model tests and the
# benchmarks, and print one table. Sized to finish within 10 minutes on one H200.
#
#   bash scripts/device_check.sh --prepare   # on a machine with PyPI access, in the repository: copies what the
#                                            # GPU machine may lack (the PJRT C API header) into .device/
#   bash scripts/device_check.sh             # on the GPU machine, in the repository (works offline)
#
# Needs there: python3 with torch (2.11 to 2.15) and pytest, cmake, ninja, a C++ compiler, an NVIDIA driver, and
# the CUDA PJRT plugin with its CUDA libraries (pip install torch-tpu[cuda13], or jax-cuda13-pjrt and the nvidia-*
# wheels). The PJRT header comes from xla-cpu-pjrt if installed, else from .device/pjrt_include (--prepare).
#
# Environment: DEVICE_CHECK_PLUGIN (default "cuda"; "cpu" runs the same steps on the CPU plugin, to check this
# script without a GPU), DEVICE_CHECK_QUICK=1 (fewer tests, short benchmarks), DEVICE_CHECK_OUT (logs; default
# $OUT if set, else .device/out), MAX_JOBS (build parallelism; default: all cores), TORCH_TPU_BUILD_DIR (default
# build-device/, apart from the development build: this build leaves out the C++ tests).
# Exit status: 0 when the build, the diagnostics self-test and every test step pass; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

if [ "${1:-}" = "--prepare" ]; then
    mkdir -p .device/pjrt_include
    hdr=$($PY -c "import importlib.util,os;s=importlib.util.find_spec('xla_plugins.xla_cpu_pjrt');print(os.path.join(list(s.submodule_search_locations)[0],'include','pjrt_c_api.h'))")
    cp "$hdr" .device/pjrt_include/
    grep -qxF '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> "$(git rev-parse --git-path info/exclude)"
    echo "device_check: copied $(basename "$hdr") into .device/pjrt_include (carry .device to the GPU machine)"
    exit 0
fi

PLUGIN=${DEVICE_CHECK_PLUGIN:-cuda}
QUICK=${DEVICE_CHECK_QUICK:-0}
LOGS=${DEVICE_CHECK_OUT:-${OUT:-$ROOT/.device/out}}
mkdir -p "$LOGS"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
# Its own build directory: the build here omits the C++ tests (they target the CPU plugin).
export TORCH_TPU_BUILD_DIR=${TORCH_TPU_BUILD_DIR:-$ROOT/build-device}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export TORCH_TPU_PJRT_PLUGIN=$PLUGIN
export TORCH_TPU_NUM_DEVICES=${TORCH_TPU_NUM_DEVICES:-1}  # one GPU; tests default to 2 virtual CPU devices
export TORCH_TPU_CACHE_DIR=$LOGS/cache
ROWS=$LOGS/table.tsv
: >"$ROWS"
FAILED=0
T_START=$(date +%s)

row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$ROWS"; }
# step NAME TIMEOUT_S CRITICAL(1/0) COMMAND...: runs, logs to $LOGS/NAME.log, adds a row with the last line.
step() {
    local name=$1 limit=$2 critical=$3
    shift 3
    local t0 rc detail
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    detail=$(grep -v -E '^[[:space:]]*[][{}]?[[:space:]]*$' "$LOGS/$name.log" | tail -1 | cut -c1-150)
    [ $rc -eq 124 ] && detail="timed out after ${limit}s; $detail"
    if [ $rc -eq 0 ]; then row "$name" PASS "$(($(date +%s) - t0))" "$detail"; else
        row "$name" "FAIL($rc)" "$(($(date +%s) - t0))" "$detail"
        [ "$critical" = 1 ] && FAILED=1
    fi
    return $rc
}

# ---- 1. environment
{
    echo "== $(date -u)"; nvidia-smi -L 2>&1 || true
    $PY -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda)"
    $PY -m pip list 2>/dev/null | grep -i -E "^(torch|jax|nvidia|xla|libtpu|transformers|accelerate|pytest)" || true
} >"$LOGS/environment.log" 2>&1
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
row environment info 0 "gpu: ${GPU:-none}; $($PY -c 'import torch;print("torch",torch.__version__)' 2>&1 | tail -1)"

# ---- 2. build (offline: no isolation, no downloads; the header from xla-cpu-pjrt or .device/)
if ! $PY -c "import importlib.util,sys;sys.exit(importlib.util.find_spec('xla_plugins.xla_cpu_pjrt') is None)" 2>/dev/null; then
    if [ -f "$ROOT/.device/pjrt_include/pjrt_c_api.h" ]; then
        export TORCH_TPU_PJRT_INCLUDE_DIR=$ROOT/.device/pjrt_include
    else
        row build FAIL 0 "no pjrt_c_api.h: install xla-cpu-pjrt, or run 'bash scripts/device_check.sh --prepare' where PyPI is reachable and carry .device"
        FAILED=1
    fi
fi
if [ $FAILED = 0 ]; then
    TORCH_TPU_BUILD_TESTS=OFF TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
        step build 420 1 $PY setup.py build_ext --inplace
fi

if [ $FAILED = 0 ]; then
    # ---- 3. diagnostics and self-test on the plugin
    step diagnostics 180 1 $PY -m torch_tpu --json
    $PY - "$LOGS/diagnostics.log" "$PLUGIN" >>"$ROWS" 2>>"$LOGS/diagnostics.log" <<'PYEOF' || FAILED=1
import json, sys
text = open(sys.argv[1]).read()
try:
    r = json.loads(text[text.index("{"):])
except ValueError:
    print("plugin\tFAIL\t0\tno JSON report (see diagnostics.log)")
    sys.exit(1)
p = r.get("plugin", {})
want_kind = {"cuda": "cuda", "cpu": "cpu"}.get(sys.argv[2], p.get("kind"))
ok = r.get("status") == "PASS" and p.get("kind") == want_kind and r.get("devices")
dev = r.get("devices") or [{}]
mem = dev[0].get("memory_total")
print(f"plugin\t{'PASS' if ok else 'FAIL'}\t0\t{p.get('kind')} {p.get('platform_name')} {p.get('platform_version')} "
      f"API {p.get('api_version')} StableHLO {p.get('stablehlo_current_version')}; {len(r.get('devices') or [])} "
      f"device(s) {dev[0].get('name')} {mem and round(mem / 2**30, 1)} GiB; preloaded {len(p.get('preloaded') or [])}"
      f" libs, failed {len(p.get('preload_failed') or [])}; {r.get('error') or ''}")
for t in r.get("self_test") or []:
    print(f"self-test: {t['name'][:48]}\t{'PASS' if t['ok'] else 'FAIL'}\t{t['seconds']:.1f}\t{t['error'] or ''}")
sys.exit(0 if ok else 1)
PYEOF

    # ---- 4. op and model tests on the plugin: one row per file with its counts. Each file has a time budget
    # (XLA compiles every new op signature once); a file cut short by its budget reports what ran (PARTIAL).
    if [ "$QUICK" = 1 ]; then
        TESTS="test_ops_basic.py:60 test_sampling.py:60"
    else
        TESTS="test_ops_basic.py:100 test_sampling.py:50 test_models.py:45 test_training.py:30 test_compile.py:45"
    fi
    for spec in $TESTS; do
        f=${spec%%:*}
        limit=${spec##*:}
        t0=$(date +%s)
        timeout --kill-after=10 "$limit" $PY -m pytest "tests/python/$f" -v -p no:cacheprovider -o addopts="" \
            >"$LOGS/test_$f.log" 2>&1
        rc=$?
        passed=$(grep -c -E ' PASSED' "$LOGS/test_$f.log")
        failed=$(grep -c -E ' (FAILED|ERROR)' "$LOGS/test_$f.log")
        first=$(grep -m1 -E '^(FAILED|ERROR) ' "$LOGS/test_$f.log" | cut -c1-110)
        summary="$passed passed, $failed failed${first:+; first: $first}"
        if [ $rc -eq 0 ]; then result=PASS
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            summary="cut at ${limit}s: $summary"
            if [ "$failed" = 0 ]; then result=PARTIAL; else result=FAIL; FAILED=1; fi
        else result="FAIL($rc)"; FAILED=1; fi
        row "tests/$f" "$result" "$(($(date +%s) - t0))" "$summary"
    done

    # ---- 5. benchmarks (tpu = the GPU through PJRT, against torch's CPU in the same process)
    if [ "$QUICK" = 1 ]; then
        step bench_eager_op_latency 60 0 $PY benchmarks/eager_op_latency.py --n 2000
        step bench_hf_generate 90 0 $PY benchmarks/hf_generate.py --new-tokens 8 --repeats 1 --markdown
    else
        step bench_eager_op_latency 60 0 $PY benchmarks/eager_op_latency.py --n 5000
        step bench_compile_decoder 120 0 $PY benchmarks/compile_decoder.py --skip-inductor --only decode,prefill \
            --iters 5
        step bench_hf_generate 120 0 $PY benchmarks/hf_generate.py --new-tokens 16 --repeats 1 --markdown
    fi
fi

# ---- the table (the benchmarks' own Markdown tables become rows of it)
T_TOTAL=$(($(date +%s) - T_START))
$PY - "$ROWS" "$LOGS" "$PLUGIN" "$QUICK" "$T_TOTAL" "$FAILED" <<'PYEOF' | tee "$LOGS/summary.txt"
import glob, os, sys
rows_file, logs, plugin, quick, total, failed = sys.argv[1:7]
rows = [l.rstrip("\n").split("\t") for l in open(rows_file) if l.strip()]
rows = [r[:3] + ["JSON report in diagnostics.log; plugin and self-test rows below"] if r[0] == "diagnostics" else r
        for r in rows]
for log in sorted(glob.glob(os.path.join(logs, "bench_*.log"))):
    name = os.path.basename(log)[:-4]
    lines = [l.strip() for l in open(log, errors="replace")]
    head = []
    for i, l in enumerate(lines):
        if not (l.startswith("| ") and l.endswith("|")):
            continue
        cells = [c.strip() for c in l.strip("|").split("|")]
        if i + 1 < len(lines) and lines[i + 1].startswith("|-"):
            head = cells
            continue
        named = [f"{h} {v}" if h else v for h, v in zip(head[1:] + [""] * len(cells), cells[1:])]
        rows.append([f"  {name[6:]}: {cells[0]}", "figure", "", "; ".join(named)])
print()
print(f"torch-tpu device check: plugin={plugin} quick={quick} total {total}s (logs in {logs})")
print(f"| {'step':<48} | {'result':<8} | {'s':>5} | detail |")
print(f"|{'-' * 50}|{'-' * 10}|{'-' * 7}|--------|")
for r in rows:
    r = (r + ["", "", "", ""])[:4]
    print(f"| {r[0][:48]:<48} | {r[1]:<8} | {r[2]:>5} | {r[3][:160]} |")
print()
print("DEVICE CHECK: " + ("PASS" if failed == "0" else "FAIL"))
PYEOF
exit $FAILED
