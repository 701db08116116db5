"""Bad input raises the same exception type as on CPU, and a missing plugin names the package to install."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

CASES = {
    "shape_mismatch_add": lambda d: torch.ones(2, 3, device=d) + torch.ones(4, device=d),
    "mm_inner_dim": lambda d: torch.ones(2, 3, device=d) @ torch.ones(4, 5, device=d),
    "view_incompatible": lambda d: torch.ones(2, 3, device=d).t().view(6),
    "bad_dim": lambda d: torch.ones(2, 3, device=d).sum(5),
    "int_inplace_float": lambda d: torch.ones(3, dtype=torch.int64, device=d).add_(1.5),
    "bitwise_on_float": lambda d: torch.ones(3, device=d) & torch.ones(3, device=d),
    "cat_dtype_rank": lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(3, device=d)]),
    "index_out_of_range": lambda d: torch.ones(3, device=d)[5],
    "softmax_bad_dim": lambda d: torch.softmax(torch.ones(3, device=d), dim=2),
    "embedding_float_index": lambda d: torch.nn.functional.embedding(torch.ones(3, device=d), torch.ones(5, 2, device=d)),
    "layer_norm_shape": lambda d: torch.nn.functional.layer_norm(torch.ones(2, 3, device=d), (4,)),
    "expand_bad": lambda d: torch.ones(2, 3, device=d).expand(4, 4),
    "item_many": lambda d: torch.ones(3, device=d).item(),
}


def _exc_type(fn, device):
    try:
        fn(device)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_exception_type_as_cpu(name):
    cpu = _exc_type(CASES[name], "cpu")
    assert cpu is not None, "case does not fail on CPU"
    tpu = _exc_type(CASES[name], "tpu")
    assert tpu is cpu, f"cpu raised {cpu}, tpu raised {tpu}"


def test_tensors_on_different_devices():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    with pytest.raises(RuntimeError):
        torch.ones(3, 3, device="tpu") @ torch.ones(3, 3)


def test_unsupported_dtype_on_device():
    # Complex tensors can be stored, but ops on them are not lowered: they run (correctly) on the CPU fallback.
    z = torch.tensor([1 + 2j, 3 - 1j])
    torch.testing.assert_close((z.to("tpu") * 2).cpu(), z * 2)


def test_invalid_device_index():
    with pytest.raises((RuntimeError, ValueError)):
        torch.ones(2, device=f"tpu:{torch.tpu.device_count() + 3}")


def test_missing_plugin_names_the_package():
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    code = "import torch, torch_tpu\ntry:\n    torch.ones(2, device='tpu')\nexcept Exception as e:\n    print('ERR', e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert "pip install" in text, text


def test_error_does_not_poison_later_ops():
    a = torch.ones(2, 3, device="tpu")
    with pytest.raises(RuntimeError):
        a + torch.ones(4, device="tpu")
    torch.testing.assert_close((a + 1).cpu(), torch.full((2, 3), 2.0))


# ---- semantics that silently differed from CPU ----

def _both(fn):
    """The exception fn raises on CPU and on tpu (the tpu result synchronized: some checks run on the device)."""
    out = []
    for d in ("cpu", "tpu"):
        try:
            r = fn(d)
            if isinstance(r, torch.Tensor):
                r.cpu()
            out.append(None)
        except Exception as e:  # noqa: BLE001
            out.append(e)
    return out


@pytest.mark.parametrize("case", [
    "mm_mixed_dtypes", "matmul_mixed", "addmm_bias_dtype", "bmm_mixed", "overlap_add_", "overlap_copy_",
    "overlap_mul_out", "internal_overlap_add_", "int_div_zero", "int_remainder_zero", "float_index",
    "float_index_put"])
def test_raises_like_cpu(case):
    def b(d):
        return torch.arange(5.0, device=d)

    cases = {
        "mm_mixed_dtypes": lambda d: torch.mm(torch.ones(2, 2, dtype=torch.long, device=d), torch.ones(2, 2, device=d)),
        "matmul_mixed": lambda d: torch.ones(2, 2, device=d) @ torch.ones(2, 2, dtype=torch.float64, device=d),
        "addmm_bias_dtype": lambda d: torch.addmm(torch.ones(2, dtype=torch.float64, device=d),
                                                  torch.ones(2, 2, device=d), torch.ones(2, 2, device=d)),
        "bmm_mixed": lambda d: torch.bmm(torch.ones(1, 2, 2, device=d), torch.ones(1, 2, 2, dtype=torch.half, device=d)),
        "overlap_add_": lambda d: (lambda x: x[1:].add_(x[:-1]))(b(d)),
        "overlap_copy_": lambda d: (lambda x: x[1:].copy_(x[:-1]))(b(d)),
        "overlap_mul_out": lambda d: (lambda x: torch.mul(x[:-1], 2, out=x[1:]))(b(d)),
        "internal_overlap_add_": lambda d: torch.zeros(3, device=d).expand(2, 3).add_(1),
        "int_div_zero": lambda d: torch.tensor([1, 2], device=d) // torch.tensor([0, 1], device=d),
        "int_remainder_zero": lambda d: torch.tensor([1, 2], device=d) % 0,
        "float_index": lambda d: torch.ones(3, device=d)[torch.tensor([1.0], device=d)],
        "float_index_put": lambda d: torch.ones(3, device=d).index_put_((torch.tensor([1.0], device=d),),
                                                                        torch.tensor([2.0], device=d)),
    }
    cpu, tpu = _both(cases[case])
    assert cpu is not None, "does not fail on CPU"
    assert tpu is not None, "tpu computed an answer where CPU raises"
    assert type(tpu) is type(cpu), f"cpu: {cpu!r}\ntpu: {tpu!r}"
    assert str(tpu).startswith(str(cpu).splitlines()[0][:40]), f"cpu: {cpu}\ntpu: {tpu}"


def test_overlap_that_cpu_allows_still_works():
    x = torch.arange(6.0)
    t = x.to("tpu")
    x.add_(x)  # full overlap is fine
    t.add_(t)
    torch.testing.assert_close(t.cpu(), x)
    z = torch.zeros(3, device="tpu").expand(2, 3)
    z.fill_(2.0)  # fill_ accepts a self-overlapping tensor on CPU too
    torch.testing.assert_close(z.cpu(), torch.full((2, 3), 2.0))
    # sum(out=) accepts an output partially overlapping its input on CPU: no error here either
    torch.sum(t[:4].view(2, 2), 0, out=t[3:5])
    t.cpu()
