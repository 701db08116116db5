"""The package pins the torch it was built against, and says so clearly when another torch is installed.

The wheel itself (build, metadata, install into a fresh environment, smoke test from outside the tree) is checked
by scripts/check_wheel.sh, which scripts/test.sh runs.
"""

from __future__ import annotations

import sys
import tomllib

import torch

from conftest import REPO_ROOT

FAKE_BUILD = """
import sys, types
m = types.ModuleType("torch_tpu._build_info")
m.TORCH_VERSION = "1.0.0"
sys.modules["torch_tpu._build_info"] = m
"""


def test_build_info_records_this_torch():
    from torch_tpu import _build_info

    assert _build_info.TORCH_VERSION == torch.__version__.split("+")[0]
    assert _build_info.TORCH_FULL_VERSION == torch.__version__


def test_torch_mismatch_is_a_clear_import_error(run_python):
    proc = run_python(
        FAKE_BUILD
        + """
try:
    import torch_tpu
except ImportError as e:
    print("IMPORT-ERROR:", e)
""",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    line = next(l for l in proc.stdout.splitlines() if l.startswith("IMPORT-ERROR:"))
    running = torch.__version__.split("+")[0]
    assert f"built against torch 1.0.0, but torch {running} is installed" in line, line
    assert "pip install torch==1.0.0" in line and "--no-build-isolation" in line, line
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in line


def test_torch_mismatch_through_autoload_names_the_fix(run_python):
    proc = run_python(FAKE_BUILD + "import torch\n", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, check=False)
    if "torch_tpu" not in proc.stderr:  # no torch_tpu entry point in this environment: nothing autoloads
        return
    assert proc.returncode != 0
    assert "built against torch 1.0.0" in proc.stderr and "pip install torch==1.0.0" in proc.stderr


def test_mismatch_check_can_be_skipped(run_python):
    run_python(FAKE_BUILD + "import torch_tpu\n", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                                                       "TORCH_TPU_SKIP_TORCH_CHECK": "1"})


def test_pyproject_declares_extras_and_dynamic_requirements():
    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert "dependencies" in meta["dynamic"] and "dependencies" not in meta
    extras = meta["optional-dependencies"]
    assert any(r.startswith("libtpu") for r in extras["tpu"])
    assert any(r.startswith("jax-cuda13-pjrt") for r in extras["cuda13"])
    assert any(r.startswith("nvidia-cublas>") for r in extras["cuda13"])
    assert any(r.startswith("nvidia-cudnn-cu13") for r in extras["cuda13"])
    assert any(r.startswith("jax-cuda12-pjrt") for r in extras["cuda12"])
    assert any(r.startswith("nvidia-cublas-cu12") for r in extras["cuda12"])
    assert extras["jax"] == ["jax==0.10.2", "jaxlib==0.10.2"]
    # Every CUDA library the plugin loader looks for comes with the extra.
    from torch_tpu import _plugin

    for major in ("13", "12"):
        names = {r.split(">")[0].split("=")[0].split("<")[0] for r in extras[f"cuda{major}"]}
        for _, _, wheel in _plugin._CUDA_LIBRARIES[major]:
            assert wheel in names, (major, wheel)
