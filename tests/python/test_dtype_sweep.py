"""What the OpInfo sweep over the dtypes outside its default set found (`tools/op_coverage.py --dtypes
float64,float16,int32,int16,int8,uint8,complex128` and `--reference`), each against CPU on the device, no fallback;
and the sweep harness's own judgements it relies on."""
import pytest
import torch
import torch.nn.functional as F

from torch_tpu.testing import opinfo as H

pytestmark = pytest.mark.usefixtures("strict_fallback")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logsumexp_of_a_complex_scalar_wraps_its_phase(dtype):
    # CPU computes log(exp(z - m)) + m also for a 0-d input: the imaginary part comes back in (-pi, pi]
    for z in (-4.8 - 7.58j, 1028.98 + 1401.9j, 2 + 3j, -1 + 0.5j):
        x = torch.tensor(z, dtype=dtype)
        for dim in ((), (0,), 0):
            expected = torch.logsumexp(x, dim)
            actual = torch.logsumexp(x.to("tpu"), dim).cpu()
            torch.testing.assert_close(actual, expected)
    x = torch.tensor([[-4.8 - 7.58j]], dtype=dtype)  # a one-element reduction
    torch.testing.assert_close(torch.logsumexp(x.to("tpu"), 1).cpu(), torch.logsumexp(x, 1))


def test_logsumexp_of_a_real_scalar_is_itself():
    x = torch.tensor(3.25, dtype=torch.float64)
    assert torch.logsumexp(x.to("tpu"), 0).item() == 3.25


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_addr_half_rounds_alpha_and_beta_as_cpu(dtype):
    # CPU's kernel takes alpha and beta in the result's dtype and rounds after each operation: bit-equal
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        m = (torch.randn(5, 10, generator=g) * 5).to(dtype)
        v1 = (torch.randn(5, generator=g) * 3).to(dtype)
        v2 = (torch.randn(10, generator=g) * 3).to(dtype)
        expected = torch.addr(m, v1, v2, beta=0.6, alpha=0.2)
        actual = torch.addr(m.to("tpu"), v1.to("tpu"), v2.to("tpu"), beta=0.6, alpha=0.2).cpu()
        assert torch.equal(actual, expected)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_interpolation_of_float64_weighs_in_double(mode):
    # the windows' centres were computed in float: results 2e-5 off CPU's for float64
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 37, 29, dtype=torch.float64, generator=g)
    for size in ((11, 7), (20, 13), (37, 5)):
        expected = F.interpolate(x, size=size, mode=mode, antialias=True)
        actual = F.interpolate(x.to("tpu"), size=size, mode=mode, antialias=True).cpu()
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)
    xs = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    F.interpolate(xs, scale_factor=0.3, mode=mode, antialias=True).sum().backward()
    F.interpolate(xt, scale_factor=0.3, mode=mode, antialias=True).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xs.grad, rtol=1e-12, atol=1e-12)


def test_sweep_pools_independent_float64_draws_of_inplace_random_ops():
    # the harness kept views of CPU's float64 result of an in-place random op, so every pooled draw was the last
    # one and float64 uniform_/exponential_/... looked differently distributed on tpu
    for name in ("uniform", "exponential"):
        results = H.run_op(H.find_ops([name])[0], dtypes=[torch.float64], max_samples=2, backward=False,
                           error_inputs=False)
        assert results and all(r.outcome == H.PASS for r in results), results


def test_sweep_passes_half_results_closer_to_float64_than_cpus():
    # grid sampling's float16 gradients: CPU's half kernel rounds each tap, the device rounds once; the sweep judges
    # them against a float64 computation (no farther from it than CPU's result)
    results = H.run_op(H.find_ops(["grid_sampler_2d"])[0], dtypes=[torch.float16], max_samples=1,
                       error_inputs=False)
    assert [r.outcome for r in results] == [H.PASS, H.PASS], results
    # and a result farther from float64 than CPU's still fails
    cpu = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    ref64 = torch.tensor([1.0, 2.0, 3.02], dtype=torch.float64)
    judge = H._with_float32_reference(lambda out: H._compare(out, cpu, torch.float16), lambda: cpu,
                                      torch.float16, cpu, lambda: ref64)
    assert judge(cpu.to("tpu")) is None
    # 0.039 from CPU's (beyond float16's tolerance), but closer to the float64 result than CPU's
    assert judge(torch.tensor([1.0, 2.0, 3.0390625], dtype=torch.float16, device="tpu")) is None
    assert judge(torch.tensor([1.0, 2.0, 3.0625], dtype=torch.float16, device="tpu")) is not None
    assert judge(torch.tensor([1.0, float("nan"), 3.0], dtype=torch.float16, device="tpu")) is not None


_INF, _NAN = float("inf"), float("nan")


def _same(actual, expected):
    return torch.equal(actual.isnan(), expected.isnan()) and torch.equal(actual.nan_to_num(0.0), expected.nan_to_num(0.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_hypot_as_c(dtype):
    # x * x overflowed (hypot(3e20, 4e20) was inf in float32), and an infinite part beside a NaN gave NaN
    a = torch.tensor([_INF, _INF, -_INF, _NAN, _NAN, 1.0, 3e20, 0.0, -3.0, 1e-30], dtype=dtype)
    b = torch.tensor([_NAN, 1.0, _NAN, _INF, -_INF, _NAN, 4e20, 0.0, 4.0, 1e-30], dtype=dtype)
    expected = torch.hypot(a, b)
    actual = torch.hypot(a.to("tpu"), b.to("tpu")).cpu()
    assert _same(actual, expected), (actual, expected)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_modulus_of_infinite_and_nan_parts(dtype):
    # |1 + NaN i| was sqrt(2) (XLA's CPU backend scales by a NaN-ignoring maximum), |NaN + inf i| NaN
    z = torch.complex(torch.tensor([1.0, _NAN, _INF, _NAN, -_INF, 3e20, 0.0]),
                      torch.tensor([_NAN, 1.0, _NAN, _INF, 2.0, 4e20, -0.0])).to(dtype)
    assert _same(z.to("tpu").abs().cpu(), z.abs())
    # a NaN part no longer disappears from a norm
    assert torch.linalg.vector_norm(z[:1].to("tpu")).isnan().item()


def test_heaviside_of_nan_is_zero_as_cpu():
    x = torch.tensor([_NAN, -1.0, 0.0, 2.0, _INF, -_INF, 0.0])
    v = torch.tensor([5.0, 5.0, 0.5, 5.0, 5.0, 5.0, _NAN])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        expected = torch.heaviside(x.to(dtype), v.to(dtype))
        assert _same(torch.heaviside(x.to(dtype).to("tpu"), v.to(dtype).to("tpu")).cpu(), expected)


def test_sweep_skips_samples_without_a_tensor():
    # add(2.0, 3.0) makes a CPU tensor whatever the device: the sweep skips it instead of failing it
    results = H.run_op(H.find_ops(["add"])[0], dtypes=[torch.float32], max_samples=None, backward=False,
                       error_inputs=False, reference=True)
    skipped = [r for r in results if r.outcome == H.SKIP and r.detail == "no tensor or device argument"]
    assert skipped and not [r for r in results if "expected tpu" in r.detail]


def test_digamma_and_polygamma_at_signed_zeros():
    # CPU: copysign(inf, -x) at +-0 (digamma(-0.0) was -inf; polygamma(0, 0) and integer zeros were NaN)
    x = torch.tensor([0.0, -0.0, -1.0, -2.5, 1.0, _INF, -_INF, _NAN])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        xd = x.to(dtype)
        torch.testing.assert_close(torch.digamma(xd.to("tpu")).cpu(), torch.digamma(xd), equal_nan=True)
        torch.testing.assert_close(torch.polygamma(0, xd.to("tpu")).cpu(), torch.polygamma(0, xd), equal_nan=True)
    for t in (torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([False, True])):
        torch.testing.assert_close(torch.polygamma(0, t.to("tpu")).cpu(), torch.polygamma(0, t))
        torch.testing.assert_close(torch.digamma(t.to("tpu")).cpu(), torch.digamma(t))
