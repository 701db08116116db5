"""Ops without a lowering rule run on CPU: counted, warned once, listed, and forbidden in strict mode."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu

# An op that has no lowering rule (linear algebra decompositions stay on the fallback for now).
NO_RULE = torch.linalg.cholesky


def test_fallback_counted_warned_once_and_correct():
    torch_tpu.reset_fallback_counts()
    a = torch.randn(4, 4)
    x = a @ a.T + 4 * torch.eye(4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = NO_RULE(x.to("tpu"))
        NO_RULE(x.to("tpu"))
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), NO_RULE(x), rtol=1e-4, atol=1e-4)
    counts = torch_tpu._C._fallback_counts()
    assert any("cholesky" in k for k in counts), counts
    assert sum(v for k, v in counts.items() if "cholesky" in k) >= 2
    report = torch_tpu.fallback_report()
    assert "cholesky" in str(report)


def test_strict_mode_raises_naming_the_op():
    code = ("import torch, torch_tpu\n"
            "a = torch.randn(4, 4)\n"
            "x = (a @ a.T + 4 * torch.eye(4)).to('tpu')\n"
            "y = x + 1\n"  # lowered ops still work
            "try:\n"
            "    torch.linalg.cholesky(x)\n"
            "except NotImplementedError as e:\n"
            "    print('RAISED', 'cholesky' in str(e))\n")
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
