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

# Calls PyTorch's CPU kernels reject although its meta kernels accept them, found by the soak test
# (tests/python/test_soak.py): the lowering rules decline them, so that the CPU kernel raises its own error.
_b = lambda d: torch.tensor([[True, False], [False, True]], device=d)  # noqa: E731
_i = lambda d: torch.tensor([[1, 2], [3, 4]], device=d)  # noqa: E731
_f = lambda d, *s: torch.ones(*s, device=d)  # noqa: E731
F = torch.nn.functional
CPU_REJECTS = {
    "argmax_bool": lambda d: torch.argmax(_b(d)),
    "argmin_bool_dim": lambda d: torch.argmin(_b(d), 0),
    "kthvalue_bool": lambda d: torch.kthvalue(_b(d), 1, 0),
    "median_bool": lambda d: torch.median(_b(d)),
    "nanmedian_bool_dim": lambda d: torch.nanmedian(_b(d), 0),
    "topk_bool": lambda d: torch.topk(_b(d), 1),
    "searchsorted_bool": lambda d: torch.searchsorted(_b(d), _b(d)),
    "bucketize_bool": lambda d: torch.bucketize(True, _b(d)[0]),
    "max_of_empty": lambda d: torch.max(_f(d, 0)),
    "min_of_empty": lambda d: torch.min(_f(d, 2, 0)),
    "max_over_empty_dim": lambda d: torch.max(_f(d, 0, 3), 0),
    "median_over_empty_dim": lambda d: torch.median(_f(d, 0, 3), 0),
    "kthvalue_over_empty_dim": lambda d: torch.kthvalue(_f(d, 0, 3), 1, 0),
    "cumsum_to_bool": lambda d: torch.cumsum(_i(d), 0, dtype=torch.bool),
    "addcmul_bool": lambda d: torch.addcmul(_b(d), _b(d), _b(d)),
    "clamp_bool": lambda d: torch.clamp(_b(d), False, True),
    "clamp_max_bool": lambda d: torch.clamp_max(_b(d), True),
    "nextafter_int": lambda d: torch.nextafter(_i(d), _i(d)),
    "frac_int": lambda d: torch.frac(_i(d)),
    "lerp_int": lambda d: torch.lerp(_i(d), _i(d), _i(d)),
    "logaddexp_int": lambda d: torch.logaddexp(_i(d), _i(d)),
    "hardswish_int": lambda d: F.hardswish(_i(d)),
    "sigmoid_backward_int": lambda d: torch.ops.aten.sigmoid_backward(_i(d), _i(d)),
    "heaviside_mixed_dtypes": lambda d: torch.heaviside(_i(d), _i(d).float()),
    "add_bool_alpha_float": lambda d: torch.add(_b(d), _b(d).float(), alpha=False),
    "mm_int_float": lambda d: torch.mm(_i(d), _i(d).float()),
    "mm_bool": lambda d: torch.mm(_b(d), _b(d)),
    "addmm_self_dtype": lambda d: torch.addmm(_i(d), _f(d, 2, 2), _f(d, 2, 2)),
    "bmm_bool": lambda d: torch.bmm(_b(d)[None], _b(d)[None]),
    "dot_mixed": lambda d: torch.dot(_f(d, 3), _f(d, 3).bfloat16()),
    "batch_norm_param_dtypes": lambda d: F.batch_norm(_f(d, 2, 3).bfloat16(), _f(d, 3), _f(d, 3),
                                                      _f(d, 3).bfloat16(), _f(d, 3).bfloat16(), training=True),
    "cdist_bf16": lambda d: torch.cdist(_f(d, 1, 3, 2).bfloat16(), _f(d, 1, 4, 2).bfloat16()),
    "conv_transpose_output_too_small": lambda d: F.conv_transpose2d(_f(d, 1, 4, 3, 1), _f(d, 4, 4, 2, 2), None, 1, 1),
    "index_put_dtype": lambda d: _f(d, 3).half().index_put_((torch.tensor([0, 1], device=d),), _f(d, 2)),
    "log_softmax_int": lambda d: torch.log_softmax(torch.tensor(3, device=d), 0),
    "smooth_l1_int": lambda d: F.smooth_l1_loss(_i(d), _i(d)),
    "nll_loss_int_input": lambda d: F.nll_loss(_i(d), _i(d)[0]),
    "interpolate_int": lambda d: F.interpolate(_i(d)[None, None], size=(3, 3)),
    "reflection_pad_bool": lambda d: F.pad(_b(d)[None], (1, 1), mode="reflect"),
    "uniform_from_above_to": lambda d: _f(d, 4).uniform_(3, -1),
    "normal_negative_std": lambda d: _f(d, 4).normal_(0, -1),
    "exponential_nonpositive_lambda": lambda d: _f(d, 4).exponential_(0),
    "cauchy_nonpositive_sigma": lambda d: _f(d, 4).cauchy_(0, -1),
    "log_normal_nonpositive_std": lambda d: _f(d, 4).log_normal_(0, 0),
    "geometric_p_out_of_range": lambda d: _f(d, 4).geometric_(1.5),
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


@pytest.mark.parametrize("name", sorted(CPU_REJECTS))
def test_cpu_rejected_calls_raise_the_same_type(name):
    cpu = _exc_type(CPU_REJECTS[name], "cpu")
    assert cpu is not None, "case does not fail on CPU"
    tpu = _exc_type(CPU_REJECTS[name], "tpu")
    assert tpu is not None and issubclass(tpu, cpu), f"cpu raised {cpu}, tpu raised {tpu}"


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


def test_overlap_verdict_follows_the_offsets():
    """A layout that passed the overlap check is remembered; the same call with overlapping offsets still raises."""
    t = torch.zeros(10, device="tpu")
    for _ in range(2):
        t[5:].add_(t[:5])  # disjoint halves of one storage: allowed, twice (the second time from the memo)
        torch.mul(t[:4], 2, out=t[6:])
    with pytest.raises(RuntimeError, match="unsupported operation"):
        t[1:6].add_(t[:5])  # same shapes and strides, overlapping ranges
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.mul(t[:4], 2, out=t[2:6])
    torch.testing.assert_close(t.cpu(), torch.zeros(10))
