"""Sparse COO tensors on tpu, against the same calls on CPU: construction, coalesce, conversion to and from dense,
sparse @ dense (mm, addmm, torch.sparse.mm, with autograd into the dense operand), add, mul, div, neg and sums
(eager/sparse.cpp); CSR and CSC tensors through the same conversions (eager/sparse_compressed.cpp). Block layouts
raise a clear NotImplementedError.
"""

from __future__ import annotations

import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="Sparse invariant checks")

I = [[0, 1, 1, 0], [2, 0, 2, 2]]  # uncoalesced: (0, 2) twice
V = [3.0, 4.0, 5.0, 1.0]


def _coo(dev, dtype=torch.float32):
    return torch.sparse_coo_tensor(torch.tensor(I, device=dev), torch.tensor(V, dtype=dtype, device=dev), (2, 3))


CASES = {
    "layout": lambda d: _coo(d).layout,
    "to_dense": lambda d: _coo(d).to_dense(),
    "to_dense_int": lambda d: _coo(d, torch.int64).to_dense(),
    "coalesce_indices": lambda d: _coo(d).coalesce().indices(),
    "coalesce_values": lambda d: _coo(d).coalesce().values(),
    "is_coalesced": lambda d: (_coo(d).is_coalesced(), _coo(d).coalesce().is_coalesced()),
    "nnz_dims": lambda d: (_coo(d)._nnz(), _coo(d).sparse_dim(), _coo(d).dense_dim(), _coo(d).coalesce()._nnz()),
    "sparse_mm": lambda d: torch.sparse.mm(_coo(d), torch.arange(6.0, device=d).reshape(3, 2)),
    "matmul": lambda d: _coo(d) @ torch.arange(6.0, device=d).reshape(3, 2),
    "mm": lambda d: torch.mm(_coo(d), torch.arange(6.0, device=d).reshape(3, 2)),
    "addmm": lambda d: torch.addmm(torch.ones(2, 2, device=d), _coo(d), torch.arange(6.0, device=d).reshape(3, 2),
                                   beta=0.5, alpha=2),
    "add_sparse_sparse": lambda d: (_coo(d) + _coo(d) * 2).to_dense(),
    "add_dense_sparse": lambda d: torch.ones(2, 3, device=d) + _coo(d),
    "add_inplace_dense": lambda d: torch.ones(2, 3, device=d).add_(_coo(d), alpha=3),
    "mul_scalar": lambda d: (_coo(d) * 2).to_dense(),
    "mul_dense": lambda d: (_coo(d) * torch.full((2, 3), 2.0, device=d)).to_dense(),
    "mul_sparse": lambda d: (_coo(d) * _coo(d)).to_dense(),
    "div_scalar": lambda d: (_coo(d) / 4).to_dense(),
    "neg": lambda d: (-_coo(d)).to_dense(),
    "sum": lambda d: torch.sparse.sum(_coo(d)),
    "sum_dim1": lambda d: torch.sparse.sum(_coo(d), dim=1).to_dense(),
    "sum_dim0": lambda d: torch.sparse.sum(_coo(d), dim=0).to_dense(),
    "sum_all_dims": lambda d: torch.sparse.sum(_coo(d), dim=(0, 1)),
    "dense_to_sparse_indices": lambda d: torch.tensor([[0.0, 2, 0], [1, 0, 0]], device=d).to_sparse().indices(),
    "dense_to_sparse_values": lambda d: torch.tensor([[0.0, 2, 0], [1, 0, 0]], device=d).to_sparse().values(),
    "dense_to_sparse_dim1": lambda d: torch.tensor([[0.0, 2], [0, 0], [1, 0]], device=d).to_sparse(1).values(),
    "hybrid_coalesce": lambda d: torch.sparse_coo_tensor(torch.tensor(I, device=d), torch.ones(4, 2, device=d),
                                                         (2, 3, 2)).coalesce().to_dense(),
    "empty": lambda d: torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long, device=d),
                                               torch.zeros(0, device=d), (2, 3)).coalesce().to_dense(),
    "empty_mm": lambda d: torch.sparse.mm(torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long, device=d),
                                                                  torch.zeros(0, device=d), (2, 3)),
                                          torch.ones(3, 2, device=d)),
    "zeros_layout": lambda d: torch.zeros(2, 3, layout=torch.sparse_coo, device=d).to_dense(),
    "transpose": lambda d: _coo(d).t().coalesce().to_dense(),
    "clone": lambda d: _coo(d).clone().to_dense(),
    "mul_broadcast_row": lambda d: (_coo(d) * torch.arange(3.0, device=d)).to_dense(),
    "mul_broadcast_col": lambda d: (_coo(d) * torch.arange(2.0, device=d).reshape(2, 1)).to_dense(),
    "dense_mul_sparse": lambda d: (torch.full((2, 3), 3.0, device=d) * _coo(d)).to_dense(),
    "div_zero_dim": lambda d: (_coo(d) / torch.tensor(2.0, device=d)).to_dense(),
    "int_mul_float": lambda d: (_coo(d, torch.int64) * 2.5).to_dense(),
    "sum_dtype": lambda d: torch.sparse.sum(_coo(d), dtype=torch.float64),
    "int_mm": lambda d: torch.sparse.mm(_coo(d, torch.int64), torch.ones(3, 2, dtype=torch.int64, device=d)),
}


def _cpu(x):
    if isinstance(x, torch.Tensor):
        assert x.device.type in ("cpu", "tpu")
        return x.cpu()
    if isinstance(x, tuple):
        return tuple(_cpu(e) for e in x)
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_sparse_matches_cpu(name):
    want = CASES[name]("cpu")
    got = CASES[name]("tpu")
    if isinstance(got, torch.Tensor):
        assert got.device.type == "tpu"
        assert not got.is_sparse
    got = _cpu(got)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    else:
        assert got == want


def test_device_round_trip_keeps_the_entries():
    s = torch.sparse_coo_tensor(torch.tensor(I), torch.tensor(V), (2, 3))
    t = s.to("tpu")
    assert t.is_sparse and t.device.type == "tpu" and t._values().device.type == "tpu"
    back = t.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    assert torch.equal(back.to_dense(), s.to_dense())


def test_graph_convolution_training_matches_cpu():
    # A GCN-style layer: normalized sparse adjacency times a Linear's output, trained three steps.
    def run(dev):
        torch.manual_seed(0)
        n = 6
        i = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 2], [1, 2, 3, 4, 5, 0, 3, 5]])
        adj = torch.sparse_coo_tensor(i, torch.ones(8), (n, n)).coalesce().to(dev)
        deg = torch.sparse.sum(adj, dim=1).to_dense()
        x = torch.randn(n, 4).to(dev)
        lin = torch.nn.Linear(4, 3).to(dev)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        losses = []
        for _ in range(3):
            h = torch.sparse.mm(adj, lin(x)) / deg.unsqueeze(1)
            loss = h.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, lin.weight.detach().cpu()

    (lc, wc), (lt, wt) = run("cpu"), run("tpu")
    assert lc == pytest.approx(lt, rel=1e-5)
    torch.testing.assert_close(wt, wc, rtol=1e-5, atol=1e-6)


def test_bad_calls_raise_like_cpu():
    for dev in ("cpu", "tpu"):
        s = _coo(dev)
        with pytest.raises(RuntimeError):
            torch.sparse.mm(s, torch.ones(2, 2, device=dev))  # 2x3 @ 2x2
        with pytest.raises(RuntimeError):
            s + torch.sparse_coo_tensor(torch.tensor(I, device=dev), torch.tensor(V, device=dev), (3, 3))
        with pytest.raises(RuntimeError, match="add\\(dense, sparse\\)"):
            s + torch.ones(2, 3, device=dev)
        with pytest.raises(RuntimeError, match="add\\(dense, sparse\\)"):
            s.clone().add_(torch.ones(2, 3, device=dev))
        for divisor in (s, torch.ones(2, 3, device=dev)):
            with pytest.raises(RuntimeError, match="Sparse division requires a scalar"):
                s / divisor


D = [[0.0, 1, 0], [2, 0, 3], [0, 0, 0], [4, 0, 5]]  # an empty row


def _dense(d):
    return torch.tensor(D, device=d)


def _as_dense(x):
    x = x.cpu()
    return x.to_dense() if x.layout != torch.strided else x


# CSR and CSC (eager/sparse_compressed.cpp): the same calls on cpu and tpu, compared densely where sparse
COMPRESSED = {
    "csr_indices": lambda d: (_dense(d).to_sparse_csr().crow_indices(), _dense(d).to_sparse_csr().col_indices()),
    "csc_indices": lambda d: (_dense(d).to_sparse_csc().ccol_indices(), _dense(d).to_sparse_csc().row_indices()),
    "csr_values": lambda d: _dense(d).to_sparse_csr().values(),
    "csc_values": lambda d: _dense(d).to_sparse_csc().values(),
    "csr_to_dense": lambda d: _dense(d).to_sparse_csr().to_dense(),
    "csc_to_dense": lambda d: _dense(d).to_sparse_csc().to_dense(),
    "csr_to_coo": lambda d: _dense(d).to_sparse_csr().to_sparse().coalesce().indices(),
    "coo_to_csr": lambda d: _dense(d).to_sparse().to_sparse_csr().crow_indices(),
    "csr_to_csc": lambda d: _dense(d).to_sparse_csr().to_sparse_csc().row_indices(),
    "transpose": lambda d: _dense(d).to_sparse_csr().t(),
    "mm": lambda d: _dense(d).to_sparse_csr() @ torch.arange(6.0, device=d).reshape(3, 2),
    "csc_mm": lambda d: _dense(d).to_sparse_csc() @ torch.arange(6.0, device=d).reshape(3, 2),
    "sparse_mm": lambda d: torch.sparse.mm(_dense(d).to_sparse_csr(), torch.ones(3, 5, device=d)),
    "addmm": lambda d: torch.addmm(torch.ones(4, 2, device=d), _dense(d).to_sparse_csr(),
                                   torch.arange(6.0, device=d).reshape(3, 2), beta=0.5, alpha=2),
    "dense_mm": lambda d: torch.arange(8.0, device=d).reshape(2, 4) @ _dense(d).to_sparse_csr(),
    "sum": lambda d: _dense(d).to_sparse_csr().sum(),
    "mul": lambda d: _dense(d).to_sparse_csr() * 3,
    "add": lambda d: _dense(d).to_sparse_csr() + _dense(d).to_sparse_csr(),
    "neg": lambda d: -_dense(d).to_sparse_csr(),
    "clone_copy": lambda d: _dense(d).to_sparse_csr().clone().copy_(_dense(d).to_sparse_csr() * 2),
    "factory": lambda d: torch.sparse_csr_tensor(torch.tensor([0, 1, 3], device=d), torch.tensor([1, 0, 2], device=d),
                                                 torch.tensor([1.0, 2, 3], device=d), (2, 3), check_invariants=True),
}


@pytest.mark.parametrize("case", list(COMPRESSED))
def test_compressed_matches_cpu(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu, tpu = COMPRESSED[case]("cpu"), COMPRESSED[case]("tpu")
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    tpu = tpu if isinstance(tpu, tuple) else (tpu,)
    for c, t in zip(cpu, tpu):
        assert t.device.type == "tpu" and t.layout == c.layout
        torch.testing.assert_close(_as_dense(t), _as_dense(c))


def test_compressed_moves_and_grads():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = torch.tensor(D).to_sparse_csr()
        t = c.to("tpu")
        assert t.layout == torch.sparse_csr and t.device.type == "tpu"
        torch.testing.assert_close(t.cpu().to_dense(), c.to_dense())
        x = torch.randn(3, 2, device="tpu", requires_grad=True)
        (t @ x).pow(2).sum().backward()
        xc = x.detach().cpu().requires_grad_()
        (c @ xc).pow(2).sum().backward()
        torch.testing.assert_close(x.grad.cpu(), xc.grad)


def test_compressed_errors():
    x = torch.ones(2, 2, device="tpu")
    with pytest.raises(NotImplementedError, match="BSR, BSC"):
        x.to_sparse_bsr((1, 1))
    with pytest.raises(NotImplementedError, match="batch"):
        torch.ones(2, 2, 2, device="tpu").to_sparse_csr()
    with pytest.raises(RuntimeError, match="nnz"):  # PyTorch's invariant check
        torch.sparse_csr_tensor(torch.tensor([0, 2, 1], device="tpu"), torch.tensor([1, 0, 2], device="tpu"),
                                torch.tensor([1.0, 2, 3], device="tpu"), (2, 3), check_invariants=True)


def test_sparse_embedding_with_sparse_adam_matches_cpu():
    # nn.Embedding(sparse=True) gives sparse COO gradients; SparseAdam steps them (coalesce, sparse_mask, add_).
    def run(dev):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 3, sparse=True).to(dev)
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
        for _ in range(3):
            loss = emb(torch.tensor([1, 2, 2, 5], device=dev)).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            assert emb.weight.grad.is_sparse
            opt.step()
        return emb.weight.detach().cpu()

    torch.testing.assert_close(run("tpu"), run("cpu"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("inplace", [False, True])
def test_sparse_type_promotion_as_on_cpu(op, inplace):
    # test_type_promotion's sparse tests: the promoted dtype, in-place results cast back or CPU's error
    import itertools

    dtypes = [torch.uint8, torch.int64, torch.float32]

    def run(d, a, b):
        base = torch.tensor([[0.0, 1, 2], [2, 0, 1]])
        s1 = base.to(a).to(d).to_sparse()
        s2 = (base + 1).remainder(3).to(b).to(d).to_sparse()
        try:
            r = getattr(s1, op + ("_" if inplace else ""))(s2)
        except RuntimeError as e:
            return ("error", str(e).split(" in ")[0])
        return (r.dtype, r.to_dense().cpu())

    for a, b in itertools.product(dtypes, dtypes):
        cpu, tpu = run("cpu", a, b), run("tpu", a, b)
        assert cpu[0] == tpu[0], (a, b, cpu, tpu)
        if cpu[0] != "error":
            torch.testing.assert_close(tpu[1], cpu[1])
        else:
            assert cpu[1] == tpu[1]


def test_sparse_bool_add_keeps_bool():
    s = torch.tensor([[True, False], [False, True]], device="tpu").to_sparse()
    r = s + s
    assert r.dtype == torch.bool
    assert torch.equal(r.to_dense().cpu(), torch.tensor([[True, False], [False, True]]))


def test_dense_mul_inplace_by_sparse():
    d = torch.tensor([[1.0, float("inf")], [3.0, 4.0]])
    s = torch.tensor([[2.0, 0.0], [0.0, 5.0]]).to_sparse()
    ref = d.clone().mul_(s)
    got = d.to("tpu").mul_(s.to("tpu"))
    assert got.layout == torch.strided
    torch.testing.assert_close(got.cpu(), ref)


def test_sparse_mask_backward_and_projection():
    # sparse_mask's backward projects the sparse gradient onto the mask (_sparse_mask_projection), as on CPU
    # (test_autograd's test_sparse_mask_autograd).
    t = torch.randn(3, device="tpu", requires_grad=True)
    mask = torch.ones(3, device="tpu")
    mask[1] = 0
    mask = mask.to_sparse()
    t.sparse_mask(mask).to_dense().sum().backward()
    assert torch.equal(t.grad.cpu(), torch.tensor([1.0, 0.0, 1.0]))
    s = torch.sparse_coo_tensor(torch.tensor([[0, 2, 2]]), torch.tensor([1.0, 2.0, 3.0]), (4,))
    m = torch.sparse_coo_tensor(torch.tensor([[2, 3]]), torch.tensor([1.0, 1.0]), (4,)).coalesce()
    for acc in (True, False):
        src = s if acc else s.coalesce()
        expected = torch.ops.aten._sparse_mask_projection(src, m, acc)
        got = torch.ops.aten._sparse_mask_projection(src.to("tpu"), m.to("tpu"), acc)
        assert torch.equal(got.to_dense().cpu(), expected.to_dense())
        assert torch.equal(got._indices().cpu(), expected._indices())


# The CSR products GNN code uses: sampled_addmm (a dense product at a sparse pattern) and sparse.mm with a reduction,
# forward and backward, against CPU.
INF, NAN = float("inf"), float("nan")


def _gnn_csr(dtype, seed=0, shape=(9, 7), density=0.35):
    g = torch.Generator().manual_seed(seed)
    d = torch.randn(*shape, generator=g).to(dtype) * (torch.rand(*shape, generator=g) < density)
    d[3] = 0  # an empty row
    return d


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_sampled_addmm_matches_cpu(dtype, strict_fallback):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = torch.Generator().manual_seed(1)
        s = _gnn_csr(dtype).to_sparse_csr()
        m1, m2 = torch.randn(9, 5, generator=g).to(dtype), torch.randn(5, 7, generator=g).to(dtype)
        for kw in ({}, {"beta": 0.3, "alpha": 1.7}, {"beta": 0.0}):
            ref = torch.sparse.sampled_addmm(s, m1, m2, **kw)
            got = torch.sparse.sampled_addmm(s.to("tpu"), m1.to("tpu"), m2.to("tpu"), **kw)
            assert got.layout == torch.sparse_csr and got.device.type == "tpu"
            assert torch.equal(got.crow_indices().cpu(), ref.crow_indices())
            assert torch.equal(got.col_indices().cpu(), ref.col_indices())
            torch.testing.assert_close(got.values().cpu(), ref.values())
        out = s.to("tpu").clone()
        torch.sparse.sampled_addmm(s.to("tpu"), m1.to("tpu"), m2.to("tpu"), alpha=2.0, out=out)
        torch.testing.assert_close(out.to_dense().cpu(), torch.sparse.sampled_addmm(s, m1, m2, alpha=2.0).to_dense())
        # backward: self's gradient on its pattern (sparse_mask), the dense operands' through products
        leaves = [t.requires_grad_() for t in (s.clone(), m1.clone(), m2.clone())]
        tleaves = [t.detach().to("tpu").requires_grad_() for t in (s, m1, m2)]
        for ls in (leaves, tleaves):
            torch.sparse.sampled_addmm(*ls, beta=0.5, alpha=1.5).to_dense().abs().sum().backward()
        for c, t in zip(leaves, tleaves):
            torch.testing.assert_close(_as_dense(t.grad), _as_dense(c.grad))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_sparse_mm_reduce_matches_cpu(dtype, reduce, strict_fallback):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = _gnn_csr(dtype, shape=(12, 8))
        other = torch.randn(8, 5, generator=torch.Generator().manual_seed(2)).to(dtype)
        ref = torch.sparse.mm(d.to_sparse_csr(), other, reduce)
        got = torch.sparse.mm(d.to_sparse_csr().to("tpu"), other.to("tpu"), reduce)
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got.cpu(), ref)
        # training: arg indices of amax/amin as CPU's, and both gradients
        s, o = d.to_sparse_csr().requires_grad_(), other.clone().requires_grad_()
        st, ot = d.to_sparse_csr().to("tpu").requires_grad_(), other.to("tpu").requires_grad_()
        (r, arg), (rt, argt) = (torch.ops.aten._sparse_mm_reduce_impl(a, b, reduce) for a, b in ((s, o), (st, ot)))
        assert torch.equal(argt.cpu(), arg)
        w = torch.randn(12, 5).to(dtype)
        (r * w).sum().backward()
        (rt * w.to("tpu")).sum().backward()
        # bfloat16 gradients: one dot product in 96 rounds 3 bf16 steps (2%) away from CPU's kernel, which rounds
        # its products and sums in another order
        tol = {"rtol": 2.5e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(st.grad.to_dense().cpu(), s.grad.to_dense(), **tol)
        torch.testing.assert_close(ot.grad.cpu(), o.grad, **tol)


def test_sparse_mm_reduce_special_values_and_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = torch.tensor([[1.0, 0, 2], [0, 0, 0], [0, -3, 0], [1, 1, 1]])
        o = torch.tensor([[-INF, 2.0, NAN], [3, 2, 1], [-INF, 2, 5]])  # all -inf, ties, NaN
        for reduce in ("sum", "mean", "amax", "amin"):
            s = d.to_sparse_csr().requires_grad_()
            st = d.to_sparse_csr().to("tpu").requires_grad_()
            ref, arg = torch.ops.aten._sparse_mm_reduce_impl(s, o, reduce)
            got, argt = torch.ops.aten._sparse_mm_reduce_impl(st, o.to("tpu"), reduce)
            torch.testing.assert_close(got.cpu(), ref, equal_nan=True)
            assert torch.equal(argt.cpu(), arg)
        calls = [
            lambda dev: torch.sparse.mm(torch.eye(3).to_sparse_csr().to(dev), torch.ones(4, 2, device=dev), "sum"),
            lambda dev: torch.sparse.mm(torch.eye(3).to_sparse_csr().to(dev), torch.ones(3, 2, device=dev), "prod"),
            lambda dev: torch.sparse.mm(torch.eye(3).to_sparse_csr().to(dev), torch.ones(3, 2, device=dev), "max_"),
            lambda dev: torch.sparse.mm(torch.eye(3).to_sparse_csr().to(dev),
                                        torch.ones(3, 2, device=dev, dtype=torch.float64), "sum"),
            lambda dev: torch.sparse.sampled_addmm(torch.eye(3).to_sparse_csr().to(dev), torch.ones(3, 2, device=dev),
                                                   torch.ones(3, 3, device=dev)),
            lambda dev: torch.sparse.sampled_addmm(torch.eye(3).to_sparse_csr().to(dev), torch.ones(3, 2, device=dev),
                                                   torch.ones(2, 3, device=dev, dtype=torch.float64)),
        ]
        for call in calls:
            with pytest.raises(RuntimeError) as cpu_err:
                call("cpu")
            with pytest.raises(RuntimeError) as tpu_err:
                call("tpu")
            assert str(cpu_err.value).split(";")[0].split(" but got")[0] in str(tpu_err.value)


def test_advanced_indexing_selecting_nothing(strict_fallback):
    # Empty selections index empty dims without a gather (XLA takes no slice larger than an empty dim), on the
    # device; like CPU's kernel, an index that selects nothing is not bounds-checked.
    x = torch.randn(0, 5)
    i = torch.zeros(0, dtype=torch.long)
    for f in (lambda t, j: t[j, j], lambda t, j: t[j], lambda t, j: t.t()[:, j],
              lambda t, j: torch.zeros(3, 0, device=t.device)[torch.tensor([5], device=t.device)]):
        ref, got = f(x, i), f(x.to("tpu"), i.to("tpu"))
        assert got.shape == ref.shape and got.device.type == "tpu"
        torch.tpu.synchronize()
