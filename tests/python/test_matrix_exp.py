"""torch.linalg.matrix_exp on tpu (scaling and squaring with a Taylor polynomial) against PyTorch's CPU kernel,
forward and backward, real and complex, batched, with norms from 0 to well past 1 (several squarings)."""

import pytest
import torch

import torch_tpu

TOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.complex64: 2e-5, torch.complex128: 1e-12}


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("shape,scale", [((3, 3), 1.0), ((2, 4, 4), 5.0), ((5, 5), 0.01), ((1, 1), 3.0),
                                         ((3, 2, 2), 20.0), ((6, 6), 0.0), ((2, 0, 0), 1.0)])
def test_matrix_exp_matches_cpu(strict_fallback, dtype, shape, scale):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(shape, dtype=dtype, generator=g) * scale
    tol = TOL[dtype]
    ac, at = a.clone().requires_grad_(), a.to("tpu").requires_grad_()
    expected, got = torch.linalg.matrix_exp(ac), torch.linalg.matrix_exp(at)
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=tol, atol=tol * expected.abs().max().item() if a.numel() else 0)
    if a.numel():
        go = torch.randn(shape, dtype=dtype, generator=g)
        expected.backward(go)
        got.backward(go.to("tpu"))
        torch.testing.assert_close(at.grad.cpu(), ac.grad, rtol=tol, atol=tol * ac.grad.abs().max().item())


def test_matrix_exp_rotation_and_nan(strict_fallback):
    # exp of a skew-symmetric generator is the rotation by its angle; a NaN gives NaN as on CPU
    theta = 2.5
    a = torch.tensor([[0.0, -theta], [theta, 0.0]], dtype=torch.float64, device="tpu")
    r = torch.tensor([[torch.cos(torch.tensor(theta)), -torch.sin(torch.tensor(theta))],
                      [torch.sin(torch.tensor(theta)), torch.cos(torch.tensor(theta))]], dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.matrix_exp(a).cpu(), r)
    n = torch.tensor([[float("nan"), 0.0], [0.0, 1.0]])
    assert torch.linalg.matrix_exp(n.to("tpu")).cpu().isnan().all() == torch.linalg.matrix_exp(n).isnan().all()
