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
    warned += capfd.readouterr().err.count("no lowering for tpu_fallback_test::cube: it runs on the CPU")
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
            "    print('RAISED', 'no lowering for tpu_fallback_test::cube' in str(e))\n")
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


# ---- host round trips nobody asked for: counted in fallback_report() (host_transfers), forbidden in strict mode ----

def _transfers():
    return torch_tpu.host_transfer_counts()


def test_complex_copies_run_on_the_device():
    z = torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j, 4j])
    t = z.to("tpu")
    torch_tpu.reset_fallback_counts()
    # whole-storage clone and copy share the (immutable) buffer
    torch.testing.assert_close(t.clone().cpu(), z)
    u = torch.empty_like(t)
    u.copy_(t)
    torch.testing.assert_close(u.cpu(), z)
    # conjugate views, partial copies and partial writes are device programs: no host round trip
    torch.testing.assert_close(t.conj().clone().cpu(), z.conj())
    torch.testing.assert_close(t.conj().resolve_conj().cpu(), z.conj())
    u[1:3].copy_(t[:2])
    t2 = t.clone()
    t2[:1] = torch.tensor([7 + 7j])
    want = z.clone()
    want[1:3] = z[:2]
    torch.testing.assert_close(u.cpu(), want)
    assert t2.cpu()[0] == 7 + 7j
    t3 = t.clone()
    t3.resize_(8)
    torch.testing.assert_close(t3[:4].cpu(), z)
    assert _transfers() == {}
    assert torch_tpu._C._fallback_counts() == {}


def test_resize_growth_runs_on_the_device():
    torch_tpu.reset_fallback_counts()
    x = torch.arange(6.0, device="tpu")
    x.resize_(4, 5)
    torch.testing.assert_close(x.view(-1)[:6].cpu(), torch.arange(6.0))
    y = torch.arange(6.0, device="tpu")
    y.untyped_storage().resize_(4 * 3)
    torch.testing.assert_close(y[:3].cpu(), torch.arange(3.0))
    assert _transfers() == {}
    assert torch_tpu._C._fallback_counts() == {}


def test_strict_mode_runs_complex_copies(run_python):
    run_python(
        """
        import torch, torch_tpu
        t = torch.tensor([1 + 2j, 3 - 1j]).to("tpu")
        t.clone().cpu()
        for name, fn in [("conj clone", lambda: t.conj().clone()),
                         ("resolve_conj", lambda: t.conj().resolve_conj()),
                         ("partial copy_", lambda: t[:1].copy_(t[1:])),
                         ("partial write", lambda: t.__setitem__(slice(0, 1), torch.tensor([5j]))),
                         ("complex resize_", lambda: t.clone().resize_(8))]:
            fn()  # device programs: strict mode has nothing to forbid
        assert t.cpu().tolist() == [5j, 3 - 1j], t.cpu()
        assert torch_tpu.host_transfer_counts() == {}
        print("OK")
        """,
        env={"TORCH_TPU_FALLBACK_STRICT": "1"},
    )
