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
