"""The Hermitian eigendecomposition (`_linalg_eigh`: linalg.eigh, eigvalsh, pinv(hermitian=True)) and the SVD
(`_linalg_svd`: linalg.svd, svdvals, pinv, matrix_rank, nuclear norms, cond) computed on the device, float32 and
complex64, eager, compiled (fullgraph) and under autograd, equal to CPU's LAPACK up to the freedom the
decompositions leave (the phase of each eigen- or singular vector). Every test runs with fallbacks strict."""

import pytest
import torch


DEV = "tpu"
DTYPES = [torch.float32, torch.complex64]


pytestmark = pytest.mark.usefixtures("strict_fallback")


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def close(a, b, tol=2e-5):
    torch.testing.assert_close(a.cpu(), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_cpu(dtype, uplo):
    a = rand(3, 6, 6, dtype=dtype)  # not Hermitian: only the UPLO triangle may be read, as LAPACK does
    w, v = torch.linalg.eigh(a.to(DEV), UPLO=uplo)
    w_ref, v_ref = torch.linalg.eigh(a, UPLO=uplo)
    assert w.dtype == w_ref.dtype and v.dtype == dtype and w.device.type == DEV
    close(w, w_ref)
    close(v.abs(), v_ref.abs())  # eigenvectors are unique up to their phase
    h = torch.tril(a) if uplo == "L" else torch.triu(a)
    h = h + h.mH - torch.diag_embed(h.diagonal(dim1=-2, dim2=-1).real.to(dtype))
    vc = v.cpu()
    close(vc @ torch.diag_embed(w.cpu().to(dtype)) @ vc.mH, h, tol=5e-5)
    close(vc.mH @ vc, torch.eye(6, dtype=dtype).expand(3, 6, 6), tol=5e-5)
    close(torch.linalg.eigvalsh(a.to(DEV), UPLO=uplo), w_ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_cpu(dtype, shape, full):
    a = rand(*shape, dtype=dtype, seed=1)
    u, s, vh = torch.linalg.svd(a.to(DEV), full_matrices=full)
    u_ref, s_ref, vh_ref = torch.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (u_ref.shape, s_ref.shape, vh_ref.shape)
    assert s.dtype == s_ref.dtype and u.dtype == dtype
    close(s, s_ref)
    k = s.shape[-1]
    close(u[..., :k].abs(), u_ref[..., :k].abs())
    close(vh[..., :k, :].abs(), vh_ref[..., :k, :].abs())
    uc, vhc = u.cpu(), vh.cpu()
    close(uc[..., :k] @ torch.diag_embed(s.cpu().to(dtype)) @ vhc[..., :k, :], a, tol=5e-5)
    eye = lambda n: torch.eye(n, dtype=dtype).expand(*uc.shape[:-2], n, n)  # noqa: E731
    close(uc.mH @ uc, eye(uc.shape[-1]), tol=5e-5)  # the columns full_matrices adds are orthonormal too
    close(vhc @ vhc.mH, eye(vhc.shape[-2]), tol=5e-5)
    close(torch.linalg.svdvals(a.to(DEV)), s_ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_built_on_svd_and_eigh(dtype):
    a = rand(4, 3, dtype=dtype, seed=2)
    t = a.to(DEV)
    close(torch.linalg.pinv(t), torch.linalg.pinv(a), tol=1e-4)
    h = a.mH @ a
    close(torch.linalg.pinv(h.to(DEV), hermitian=True), torch.linalg.pinv(h, hermitian=True), tol=1e-4)
    assert torch.linalg.matrix_rank(t).item() == torch.linalg.matrix_rank(a).item() == 3
    close(torch.linalg.matrix_norm(t, ord="nuc"), torch.linalg.matrix_norm(a, ord="nuc"))
    close(torch.linalg.matrix_norm(t, ord=2), torch.linalg.matrix_norm(a, ord=2))
    close(torch.linalg.cond(t), torch.linalg.cond(a), tol=1e-4)


def test_empty_matrices_match_cpu():
    for shape in [(0, 0), (3, 0), (0, 4), (2, 0, 0)]:
        a = torch.zeros(shape)
        for full in (False, True):
            got, want = torch.linalg.svd(a.to(DEV), full_matrices=full), torch.linalg.svd(a, full_matrices=full)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                close(g, w)
    w, v = torch.linalg.eigh(torch.zeros(2, 0, 0).to(DEV))
    assert w.shape == (2, 0) and v.shape == (2, 0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_autograd_matches_cpu(dtype):
    a = rand(5, 4, dtype=dtype, seed=3)

    def svd_loss(x):
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        return s.sum() + (u.abs() ** 2 * torch.arange(4, dtype=u.real.dtype, device=x.device)).sum()

    def eigh_loss(x):
        w, v = torch.linalg.eigh(x.mH @ x)
        return (w * torch.arange(4, dtype=w.dtype, device=x.device)).sum() + v.abs().sum()

    for loss in (svd_loss, eigh_loss):
        x = a.clone().requires_grad_()
        loss(x).backward()
        y = a.to(DEV).requires_grad_()
        loss(y).backward()
        close(y.grad, x.grad, tol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_fullgraph(dtype):
    def f(x):
        s = torch.linalg.svdvals(x)
        w, v = torch.linalg.eigh(x.mH @ x)
        return s, w, v.abs()

    a = rand(2, 5, 5, dtype=dtype, seed=4)
    got = torch.compile(f, backend="tpu", fullgraph=True)(a.to(DEV))
    for g, w in zip(got, f(a)):
        close(g, w, tol=5e-5)


def test_double_precision_declines_to_the_cpu():
    # The solver's tolerance is single precision's: float64 keeps LAPACK's accuracy through the CPU fallback (a
    # strict fallback names the op).
    a = rand(4, 4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="no lowering for aten::_linalg_eigh"):
        torch.linalg.eigh(a.to(DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (5, 0)])
def test_geqrf_matches_cpu(strict_fallback, dtype, shape):
    # LAPACK's compact QR: R on and above the diagonal, the Householder vectors below it, and their scales
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
    a, tau = torch.geqrf(x)
    ta, ttau = torch.geqrf(x.to("tpu"))
    tol = 1e-5 if dtype != torch.float64 else 1e-12
    torch.testing.assert_close(ta.cpu(), a, rtol=tol, atol=tol)
    torch.testing.assert_close(ttau.cpu(), tau, rtol=tol, atol=tol)
