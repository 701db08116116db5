#!/usr/bin/env bash
# CI step (run by scripts/test.sh): proves the installable package, not only the source tree.
#
# Builds the wheel and sdist (scripts/build_wheel.sh), checks what they declare and contain, installs the wheel into
# a fresh virtual environment that reuses the installed torch (--system-site-packages; the wheel with --no-deps, so
# nothing is downloaded), and from a temporary directory outside the source tree runs a smoke test (a tpu op against
# the CPU, a compiled graph) and `python -m torch_tpu` (its self-test must PASS).
#
#   bash scripts/check_wheel.sh          # after scripts/setup.sh (the wheel reuses its CMake build)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/torch_tpu_wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
t0=$(date +%s)

bash scripts/build_wheel.sh "$WORK/dist" >/dev/null
WHEEL=$(ls "$WORK"/dist/torch_tpu-*.whl)
SDIST=$(ls "$WORK"/dist/torch_tpu-*.tar.gz)
t1=$(date +%s)
echo "check_wheel: built $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1)) and $(basename "$SDIST") in $((t1 - t0)) s"

# What the artifacts declare and hold.
# Every tracked file the C++ build reads must be in the sdist.
NEEDED=$(git ls-files CMakeLists.txt csrc tests/cpp 2>/dev/null | tr '\n' ' ' || true)
$PY - "$WHEEL" "$SDIST" "$NEEDED" <<'PYEOF'
import email, os, sys, tarfile, zipfile
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch

wheel, sdist = sys.argv[1], sys.argv[2]
torch_public = torch.__version__.split("+")[0]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = email.message_from_bytes(z.read(meta_name))
    build_info = z.read("torch_tpu/_build_info.py").decode()
    eps = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
reqs = meta.get_all("Requires-Dist") or []
base = [r for r in reqs if "extra ==" not in r]
extras = set(meta.get_all("Provides-Extra") or [])
problems = []
if f"torch=={torch_public}" not in base:
    problems.append(f"torch requirement is not torch=={torch_public}: {base}")
for want in ("numpy", "xla-cpu-pjrt==0.0.1"):
    if want not in base:
        problems.append(f"missing requirement {want}: {base}")
for extra in ("tpu", "cuda13", "cuda12", "jax", "test"):
    if extra not in extras:
        problems.append(f"missing extra [{extra}]: {sorted(extras)}")
for needle in ('jax-cuda13-pjrt', 'nvidia-cublas>', 'libtpu', 'jax==0.10.2', 'jax-cuda12-pjrt'):
    if not any(needle in r for r in reqs):
        problems.append(f"no requirement mentions {needle}")
if not any(n.startswith("torch_tpu/_C") and n.endswith(".so") for n in names):
    problems.append("no torch_tpu/_C extension in the wheel")
KREPO = ["torch_tpu/kernels_repo/build/torch-tpu/" + f for f in ("metadata.json", "__init__.py", "layers.py")]
for n in ["torch_tpu/__main__.py", "torch_tpu/testing/opinfo.py"] + KREPO:
    if n not in names:
        problems.append(f"{n} missing from the wheel")
if any(n.startswith(("tests/", "csrc/")) for n in names):
    problems.append("the wheel carries tests/ or csrc/")
if f"TORCH_VERSION = {torch_public!r}" not in build_info:
    problems.append(f"_build_info.py does not record torch {torch_public}: {build_info}")
if "torch_tpu = torch_tpu:_autoload" not in eps:
    problems.append(f"torch.backends entry point missing: {eps}")
with tarfile.open(sdist) as t:
    members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
needed = sys.argv[3].split() or ["CMakeLists.txt", "csrc/runtime/client.cpp", "csrc/lowering/registry.cpp",
                                  "csrc/python/module.cpp", "tests/cpp/CMakeLists.txt"]
for n in needed + ["setup.py", "pyproject.toml", "torch_tpu/__init__.py"] + KREPO:
    if n not in members:
        problems.append(f"{n} missing from the sdist")
if problems:
    sys.exit("check_wheel: " + "\n  ".join(["bad artifacts:"] + problems))
print(f"check_wheel: metadata ok (torch=={torch_public}, extras {sorted(extras)}), sdist has the C++ sources")
PYEOF

# A fresh environment that reuses the installed torch; only the wheel itself is installed.
$PY -m venv --system-site-packages "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check --no-deps --no-index "$WHEEL"

mkdir -p "$WORK/run"
cd "$WORK/run"  # outside the source tree: nothing there can be imported by accident
env -u PYTHONPATH TORCH_TPU_CACHE_DIR="$WORK/cache" "$VPY" - "$WORK/venv" "$SRC" <<'PYEOF'
import os, sys
venv, src = sys.argv[1], sys.argv[2]
import torch  # autoloads the installed torch_tpu through its entry point
import torch_tpu
where = os.path.realpath(torch_tpu.__file__)
assert where.startswith(os.path.realpath(venv)), f"torch_tpu imported from {where}, not from the wheel in {venv}"
assert not where.startswith(os.path.realpath(src)), where
assert hasattr(torch, "tpu") and torch.tpu.is_available(), "no tpu device"
from importlib.metadata import requires, version
assert version("torch-tpu") == torch_tpu.__version__, (version("torch-tpu"), torch_tpu.__version__)
x = torch.randn(64, 32)
w = torch.randn(32, 16)
want = torch.nn.functional.gelu(x @ w).sum(0)
got = torch.nn.functional.gelu(x.to("tpu") @ w.to("tpu")).sum(0)
torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
f = torch.compile(lambda a, b: torch.softmax(a @ b, -1), backend="tpu")
torch.testing.assert_close(f(x.to("tpu"), w.to("tpu")).cpu(), torch.softmax(x @ w, -1), rtol=1e-4, atol=1e-5)
print(f"check_wheel: smoke test ok (torch_tpu {torch_tpu.__version__} from {os.path.dirname(where)})")
PYEOF
env -u PYTHONPATH TORCH_TPU_CACHE_DIR="$WORK/cache" "$VPY" -m torch_tpu > "$WORK/diag.txt" || {
    cat "$WORK/diag.txt"
    echo "check_wheel: python -m torch_tpu failed from the installed wheel" >&2
    exit 1
}
tail -1 "$WORK/diag.txt" | grep -qx PASS
t2=$(date +%s)
echo "check_wheel: python -m torch_tpu PASS from the installed wheel; total $((t2 - t0)) s"
