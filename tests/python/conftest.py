"""Shared fixtures for torch_tpu's Python tests.

Nothing skips or is marked expected-to-fail: a missing extension, plugin or test dependency (transformers,
diffusers, accelerate, kernels, jax: scripts/setup.sh installs them) makes the tests fail with the reason.
The hooks below enforce it: a skipped or xfailed test, or a skipped module, is reported as a failure. The one
exception is a test that states a behaviour of another plugin kind than the one running (``plugin_specific``,
e.g. "the CPU plugin rejects non-interpret Pallas kernels" on a TPU VM); on the CPU plugin, which CI runs, that
exception never applies: every test runs.

* ``tpu_memory_check`` (fixture; also applied to every test marked ``@pytest.mark.tpu_memory_check``):
  asserts ``torch.tpu.memory_allocated()`` is back to its starting value after the test (after
  ``gc.collect()``, ``torch.tpu.synchronize()`` and ``torch.tpu.empty_cache()``), i.e. the test leaked no
  device memory.
* ``TORCH_TPU_NUM_DEVICES`` defaults to 2 for the session (two virtual devices on the CPU plugin).
* ``fresh_dynamo``: fresh dynamo state and a private compile cache directory, so a test's compile counts are its
  own (``test_compile*.py`` apply it to every test); the counters of ``torch_tpu.compile_stats()`` start at zero.
* ``strict_fallback``: fallbacks strict for the test (an op without a lowering raises instead of running on the
  CPU); a module applies it to every test with ``pytestmark = pytest.mark.usefixtures("strict_fallback")``.
* ``eager_mode``: runs a test once in strict and once in fused eager mode, restoring the mode after it.
* ``run_python``: runs a snippet in a fresh interpreter (for environment-dependent behaviour such as
  ``TORCH_TPU_NUM_DEVICES`` or plugin selection) with this checkout importable.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional

import pytest

REPO_ROOT = Path(os.path.abspath(__file__)).parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Two virtual devices on the CPU plugin so multi-device behaviour is tested in-process (set before torch is
# imported: torch autoloads torch_tpu, which reads it). An explicit TORCH_TPU_NUM_DEVICES wins.
os.environ.setdefault("TORCH_TPU_NUM_DEVICES", "2")

import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401  (fails the session loudly if the extension is missing)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tpu_memory_check: assert torch.tpu.memory_allocated() returns to its starting value"
    )
    config.addinivalue_line(
        "markers", "slow: a test of 20 s or more on the 2-core VM (CI runs it; `-m 'not slow'` for a quick pass)"
    )


# The reason prefix of the only skips allowed (see the docstring), and only off the CPU plugin.
PLUGIN_SPECIFIC = "plugin-specific: "
_CPU_PLUGIN = torch_tpu.plugin_info().get("platform_name") == "cpu"


def plugin_specific(applies: bool, why: str):
    """A skipif marker for a test that states the behaviour of another plugin kind; it never skips on the CPU
    plugin (the hooks below turn such a skip into a failure there)."""
    return pytest.mark.skipif(not applies, reason=PLUGIN_SPECIFIC + why)


def _no_skip(rep, what: str) -> None:
    if rep.skipped:
        reason = getattr(rep, "wasxfail", None) or (rep.longrepr[2] if isinstance(rep.longrepr, tuple) else rep.longrepr)
        if not _CPU_PLUGIN and not getattr(rep, "wasxfail", None) and \
                str(reason).startswith(("Skipped: " + PLUGIN_SPECIFIC, PLUGIN_SPECIFIC)):
            return
        rep.outcome = "failed"
        rep.longrepr = f"{what} was skipped or marked xfail ({reason}); the test suite never skips"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _no_skip(outcome.get_result(), item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _no_skip(outcome.get_result(), collector.nodeid)


def pytest_report_header(config: pytest.Config) -> str:
    try:
        info = torch_tpu.plugin_info()
        return (
            f"torch_tpu: plugin={info.get('path')} kind={info.get('kind')} "
            f"platform={info.get('platform_name')} {info.get('platform_version', '')} "
            f"devices={torch.tpu.device_count()}"
        )
    except Exception as e:  # report, do not hide: the tests themselves will fail
        return f"torch_tpu: plugin unavailable: {e}"


@pytest.fixture(autouse=True)
def _apply_tpu_memory_check_marker(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("tpu_memory_check") is not None:
        request.getfixturevalue("tpu_memory_check")
    yield


def _settled_allocated() -> int:
    gc.collect()
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    return torch.tpu.memory_allocated()


@pytest.fixture
def strict_fallback():
    """Fallbacks strict for the test, restored after it."""
    prev = torch_tpu.fallback_strict()
    torch_tpu.set_fallback_strict(True)
    yield
    torch_tpu.set_fallback_strict(prev)


@pytest.fixture
def tpu_memory_check():
    """Fail the test if it leaves device memory allocated."""
    before = _settled_allocated()
    yield
    after = _settled_allocated()
    assert after == before, f"tpu memory leaked: memory_allocated {before} -> {after} bytes"


def _subprocess_env(extra: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


@pytest.fixture
def run_python():
    """``run_python(code, env={...}, check=True) -> CompletedProcess`` in a fresh interpreter.

    ``env`` values of None remove the variable. With ``check=True`` a non-zero exit fails the test and
    shows the child's output.
    """

    def run(code: str, env: Optional[Dict[str, Optional[str]]] = None, check: bool = True, timeout: int = 300):
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=_subprocess_env(env),
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            pytest.fail(
                f"subprocess exited {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
            )
        return proc

    return run


@pytest.fixture
def fresh_dynamo(tmp_path):
    """Fresh dynamo state and a private disk cache: compile counts are this test's own."""
    import torch._dynamo

    torch._dynamo.reset()
    torch_tpu._dynamo_backend.reset_compile_stats()
    old = torch_tpu._dynamo_backend.cache_dir()
    torch_tpu._dynamo_backend.set_cache_dir(str(tmp_path / "cache"))
    yield
    torch_tpu._dynamo_backend.set_cache_dir(old)
    torch._dynamo.reset()


# Runs a test in strict and in fused eager mode (the mode restored after it).
@pytest.fixture(params=["strict", "fused"])
def eager_mode(request):
    prev = torch_tpu.eager_mode()
    torch_tpu.set_eager_mode(request.param)
    yield request.param
    torch_tpu.set_eager_mode(prev)
