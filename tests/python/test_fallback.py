"""Ops without a lowering rule run on CPU: counted, warned once, listed, and forbidden in strict mode."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu

# An op that can never have a lowering rule: defined here, with a CPU kernel only. On tpu tensors it reaches the
# boxed CPU fallback like any ATen op without a rule.
_LIB = torch.library.Library("tpu_fallback_test", "DEF")
_LIB.define("cube(Tensor x) -> Tensor")
_LIB.impl("cube", lambda x: x * x * x, "CPU")
NO_RULE = torch.ops.tpu_fallback_test.cube


def test_fallback_counted_warned_once_and_correct(capfd):
    torch_tpu.reset_fallback_counts()
    x = torch.randn(4, 4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = NO_RULE(x.to("tpu"))
        NO_RULE(x.to("tpu"))
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), NO_RULE(x), rtol=1e-4, atol=1e-4)
    counts = torch_tpu._C._fallback_counts()
    assert counts.get("tpu_fallback_test::cube") == 2, counts
    # Warned once: as a Python warning, or on stderr where PyTorch has no Python warning handler for the call.
    warned = sum(1 for x in w if "tpu_fallback_test::cube" in str(x.message))
    warned += capfd.readouterr().err.count("tpu_fallback_test::cube runs on the CPU")
    assert warned == 1
    assert "tpu_fallback_test::cube" in str(torch_tpu.fallback_report())


def test_strict_mode_raises_naming_the_op():
    code = ("import torch, torch_tpu\n"
            "lib = torch.library.Library('tpu_fallback_test', 'DEF')\n"
            "lib.define('cube(Tensor x) -> Tensor')\n"
            "lib.impl('cube', lambda x: x * x * x, 'CPU')\n"
            "x = torch.randn(4, 4).to('tpu')\n"
            "y = x + 1\n"  # lowered ops still work
            "try:\n"
            "    torch.ops.tpu_fallback_test.cube(x)\n"
            "except NotImplementedError as e:\n"
            "    print('RAISED', 'tpu_fallback_test::cube' in str(e))\n")
    env = dict(os.environ, TORCH_TPU_FALLBACK_STRICT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "RAISED True" in out.stdout


def test_view_ops_never_fall_back():
    torch_tpu.reset_fallback_counts()
    t = torch.randn(4, 6, device="tpu")
    t.t().reshape(-1)[3:].unsqueeze(0).expand(2, -1).select(0, 1).narrow(0, 1, 4).view(2, 2).diagonal()
    t.unfold(1, 2, 2).permute(2, 0, 1).squeeze()
    assert torch_tpu._C._fallback_counts() == {}
