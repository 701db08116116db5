"""``python -m torch_tpu``: the diagnostics report and its self-test, as text and as JSON."""

from __future__ import annotations

import json

RUN_MAIN = """
import runpy, sys
sys.argv = ["torch_tpu"] + {args!r}
runpy.run_module("torch_tpu", run_name="__main__", alter_sys=True)
"""


def _main(run_python, args, env=None):
    return run_python(RUN_MAIN.format(args=list(args)), env=env, check=False)


def test_report_and_self_test_pass(run_python):
    proc = _main(run_python, [])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.rstrip().splitlines()[-1] == "PASS", out
    for needle in ("torch-tpu", "PJRT plugin", "stablehlo current version", "Devices (2)", "tpu:1",
                   "Executable cache", "Environment", "TORCH_TPU_NUM_DEVICES", "Self-test",
                   'torch.compile(backend="tpu") vs CPU'):
        assert needle in out, f"{needle!r} missing from:\n{out}"
    assert "[FAIL]" not in out


def test_json_report(run_python):
    proc = _main(run_python, ["--json"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    import torch

    assert r["status"] == "PASS"
    assert r["torch"]["version"] == torch.__version__
    assert r["torch_tpu"]["built_with_torch"] == torch.__version__
    p = r["plugin"]
    assert p["kind"] == "cpu" and p["path"].endswith("xla_cpu_pjrt.so")
    assert p["api_version"].startswith("0.") and p["platform_name"] == "cpu"
    assert p["stablehlo_current_version"] and p["stablehlo_minimum_version"]
    assert p["options"] == {"cpu_device_count": 2} and p["accelerator"] is False
    assert "layouts" in p["extensions"] and "profiler" not in p["extensions"]  # the CPU plugin's PJRT extensions
    assert p["device_profiler"] == "torch.profiler (Kineto)"
    assert [d["index"] for d in r["devices"]] == [0, 1]
    assert all(d["memory_total"] > 0 for d in r["devices"])
    assert r["cache"]["directory"] and r["cache"]["compile_stats"]["graphs"] >= 1
    assert r["environment"]["TORCH_TPU_NUM_DEVICES"] == "2"
    assert len(r["self_test"]) >= 5 and all(t["ok"] for t in r["self_test"])
    assert "self_test_fallbacks" not in r  # the self-test runs nothing on the CPU fallback


def test_broken_plugin_fails_clearly(run_python):
    env = {"TORCH_TPU_PJRT_PLUGIN": "/nonexistent"}
    proc = _main(run_python, [], env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == "FAIL"
    assert "/nonexistent" in proc.stdout and "pip install xla-cpu-pjrt" in proc.stdout, proc.stdout
    proc = _main(run_python, ["--json"], env)
    assert proc.returncode == 1
    r = json.loads(proc.stdout)
    assert r["status"] == "FAIL" and "pip install" in r["error"] and "/nonexistent" in r["error"]


def test_plugin_that_fails_to_start_fails_clearly(run_python, tmp_path):
    bad = tmp_path / "xla_cpu_pjrt.so"
    bad.write_bytes(b"not a shared library")
    proc = _main(run_python, ["--json", "--no-self-test"], {"TORCH_TPU_PJRT_PLUGIN": str(bad)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    assert r["status"] == "FAIL" and "pip install xla-cpu-pjrt" in r["error"], r


def test_usage_error_exit_code(run_python):
    proc = _main(run_python, ["--no-such-flag"])
    assert proc.returncode == 2
