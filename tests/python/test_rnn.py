"""Recurrent layers on tpu against PyTorch CPU: nn.RNN / LSTM / GRU and their cells, forward and backward (input
and parameter gradients), in strict and fused eager mode and under torch.compile (dynamo's default graph break
around recurrent modules, and allow_rnn=True, which traces them).

On an accelerator device PyTorch computes LSTM and GRU steps with the fused cells aten::_thnn_fused_lstm_cell /
_thnn_fused_gru_cell and their backward (csrc/lowering/rules/rnn.cpp); nn.RNN's cells are composite. Every test
runs with strict fallbacks: an op without a lowering raises instead of running on the CPU.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch._dynamo
import torch_tpu
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from torch.utils._python_dispatch import TorchDispatchMode

pytestmark = pytest.mark.usefixtures("strict_fallback")

DEV = "tpu"
TOL = dict(rtol=2e-5, atol=2e-5)


def _tensors(out):
    r"""The tensors of a module's output (tuples, PackedSequence data), in order."""
    if isinstance(out, PackedSequence):
        return [out.data]
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res += _tensors(o)
    return res


def _to(x, device):
    if isinstance(x, PackedSequence):
        return PackedSequence(_to(x.data, device), x.batch_sizes,
                              x.sorted_indices if x.sorted_indices is None else x.sorted_indices.to(device),
                              x.unsorted_indices if x.unsorted_indices is None else x.unsorted_indices.to(device))
    if isinstance(x, torch.Tensor):
        y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _leaves(x):
    if isinstance(x, PackedSequence):
        return _leaves(x.data)
    if isinstance(x, torch.Tensor):
        return [x] if x.requires_grad else []
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _leaves(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    return []


def _run(module, args, call=None, backward=True):
    r"""Outputs, input gradients and parameter gradients of `call(module, *args)` (a weighted sum of every output
    is the loss, so each output gets a distinct gradient)."""
    call = call or (lambda m, *a: m(*a))
    out = _tensors(call(module, *args))
    if not backward:
        return [o.detach().cpu() for o in out], [], []
    g = torch.Generator().manual_seed(7)
    weights = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in out]
    loss = sum((o * w).sum() for o, w in zip(out, weights))
    loss.backward()
    grads = [t.grad.cpu() for t in _leaves(args)]
    pgrads = [p.grad.cpu() if p.grad is not None else None for p in module.parameters()]
    return [o.detach().cpu() for o in out], grads, pgrads


def _compare(module, args, call=None, tol=TOL, backward=True, tpu_module=None):
    torch.manual_seed(0)
    module.zero_grad(set_to_none=True)
    m_tpu = tpu_module(module) if tpu_module else copy.deepcopy(module).to(DEV)
    a_cpu = _to(args, "cpu")
    a_tpu = _to(args, DEV)
    exp = _run(module, a_cpu, call, backward)
    got = _run(m_tpu, a_tpu, call, backward)
    for kind, e_list, g_list in zip(("output", "input grad", "param grad"), exp, got):
        assert len(e_list) == len(g_list), kind
        for i, (e, g) in enumerate(zip(e_list, g_list)):
            if e is None:
                assert g is None, f"{kind} {i}"
                continue
            torch.testing.assert_close(g, e, **tol, msg=lambda m: f"{kind} {i}: {m}")
    return got


def _seq(*shape, grad=True, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


# ---- the cells ----

@pytest.mark.parametrize("bias", [True, False])
def test_cells(eager_mode, bias):
    torch.manual_seed(0)
    for cls, kw in ((nn.LSTMCell, {}), (nn.GRUCell, {}), (nn.RNNCell, {}), (nn.RNNCell, {"nonlinearity": "relu"})):
        cell = cls(5, 7, bias=bias, **kw)
        x = _seq(3, 5)
        if cls is nn.LSTMCell:
            hx = (_seq(3, 7), _seq(3, 7))
        else:
            hx = _seq(3, 7)
        _compare(cell, (x, hx))
        _compare(cell, (x,))  # no hidden state: zeros
        _compare(cell, (_seq(5),))  # unbatched


def test_cell_loop_and_partial_gradients(eager_mode):
    r"""Several steps of one cell (the backward accumulates through hx and cx), and a loss reading only hy or only
    cy (the fused backward's missing gradient is zero)."""
    torch.manual_seed(1)
    lstm, gru = nn.LSTMCell(4, 6), nn.GRUCell(4, 6)
    xs = _seq(5, 2, 4)

    def lstm_loop(m, x):
        h = c = None
        outs = []
        for t in range(x.shape[0]):
            h, c = m(x[t], None if h is None else (h, c))
            outs.append(h)
        return torch.stack(outs), c

    def gru_loop(m, x):
        h = None
        outs = []
        for t in range(x.shape[0]):
            h = m(x[t], h)
            outs.append(h)
        return torch.stack(outs)

    _compare(lstm, (xs,), lstm_loop)
    _compare(gru, (xs,), gru_loop)
    _compare(lstm, (xs,), lambda m, x: m(x[0])[0])  # hy only
    _compare(lstm, (xs,), lambda m, x: m(x[0])[1])  # cy only


def test_fused_cell_ops_directly():
    r"""The fused ops and their backward against the composite (differentiable) backward PyTorch defines for them,
    with and without biases, and float64."""
    torch.manual_seed(2)
    for dtype in (torch.float32, torch.float64):
        B, H = 3, 4
        ig, hg = torch.randn(B, 4 * H, dtype=dtype), torch.randn(B, 4 * H, dtype=dtype)
        cx, b1, b2 = torch.randn(B, H, dtype=dtype), torch.randn(4 * H, dtype=dtype), torch.randn(4 * H, dtype=dtype)
        for bias in (True, False):
            bi, bh = (b1, b2) if bias else (None, None)
            hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*_to((ig, hg, cx, bi, bh), DEV))
            gates = ig + hg + (b1 + b2 if bias else 0)
            i, f, g, o = gates.chunk(4, 1)
            i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
            exp_cy = f * cx + i * g
            torch.testing.assert_close(cy.cpu(), exp_cy)
            torch.testing.assert_close(hy.cpu(), o * exp_cy.tanh())
            torch.testing.assert_close(ws.cpu(), torch.cat([i, f, g, o], 1))
            ghy, gcy = torch.randn(B, H, dtype=dtype), torch.randn(B, H, dtype=dtype)
            exp = torch.ops.aten._thnn_differentiable_lstm_cell_backward(ghy, gcy, ig, hg, bi, bh, cx, exp_cy)
            for gh, gc in ((ghy, gcy), (ghy, None), (None, gcy)):
                got = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(*_to((gh, gc, cx, exp_cy, ws, bias), DEV))
                ref = torch.ops.aten._thnn_differentiable_lstm_cell_backward(gh, gc, ig, hg, bi, bh, cx, exp_cy)
                torch.testing.assert_close(got[0].cpu(), ref[0])
                torch.testing.assert_close(got[1].cpu(), ref[2])
                if bias:
                    torch.testing.assert_close(got[2].cpu(), ref[3])
                else:
                    assert got[2] is None
            assert exp is not None
            # GRU
            ig3, hg3, hx = ig[:, :3 * H], hg[:, :3 * H], cx
            bi3, bh3 = (b1[:3 * H], b2[:3 * H]) if bias else (None, None)
            hy, ws = torch.ops.aten._thnn_fused_gru_cell(*_to((ig3, hg3, hx, bi3, bh3), DEV))
            assert ws.shape == (B, 5 * H)
            ghy = torch.randn(B, H, dtype=dtype)
            ref = torch.ops.aten._thnn_differentiable_gru_cell_backward(ghy, ig3, hg3, hx, bi3, bh3)
            got = torch.ops.aten._thnn_fused_gru_cell_backward(ghy.to(DEV), ws, bias)
            for k in range(5 if bias else 3):
                torch.testing.assert_close(got[k].cpu(), ref[k], msg=lambda m: f"gru backward result {k}: {m}")
            if not bias:
                assert got[3] is None and got[4] is None


def test_gru_cell_meta_checks():
    r"""The GRU cell's meta kernel (PyTorch ships none) checks sizes like the CUDA kernel."""
    ig = torch.randn(2, 9, device="meta")
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(ig, ig, torch.randn(2, 4, device="meta"))
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(ig, ig, torch.randn(2, 3, device="meta"))
    assert hy.shape == (2, 3) and ws.shape == (2, 15)
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell_backward(torch.randn(2, 3, device="meta"), torch.randn(2, 14, device="meta"),
                                                     True)


# ---- the layers ----

LAYERS = [
    pytest.param(nn.LSTM, dict(num_layers=2, bidirectional=True), id="lstm-2-bi"),
    pytest.param(nn.LSTM, dict(num_layers=2, batch_first=True, proj_size=3), id="lstm-proj-batch_first"),
    pytest.param(nn.LSTM, dict(bias=False, bidirectional=True, proj_size=2), id="lstm-nobias-bi-proj"),
    pytest.param(nn.GRU, dict(num_layers=2, bidirectional=True), id="gru-2-bi"),
    pytest.param(nn.GRU, dict(batch_first=True, bias=False), id="gru-nobias-batch_first"),
    pytest.param(nn.RNN, dict(num_layers=2, bidirectional=True), id="rnn-tanh-2-bi"),
    pytest.param(nn.RNN, dict(nonlinearity="relu", batch_first=True), id="rnn-relu-batch_first"),
]


def _hidden(cls, kw, batch, hidden=6):
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h = _seq(layers, batch, kw.get("proj_size", 0) or hidden)
    if cls is nn.LSTM:
        return (h, _seq(layers, batch, hidden))
    return h


@pytest.mark.parametrize("cls,kw", LAYERS)
def test_layers(eager_mode, cls, kw):
    torch.manual_seed(3)
    m = cls(4, 6, **kw)
    T, B = 5, 3
    x = _seq(B, T, 4) if kw.get("batch_first") else _seq(T, B, 4)
    _compare(m, (x,))
    _compare(m, (x, _hidden(cls, kw, B)))
    _compare(m, (_seq(T, 4),))  # unbatched


@pytest.mark.parametrize("cls,kw", [LAYERS[0], LAYERS[3], LAYERS[5]])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences(cls, kw, enforce_sorted):
    torch.manual_seed(4)
    m = cls(4, 6, **kw)
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = _seq(5, 3, 4)

    def call(mod, x, h=None):
        packed = pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted)
        out, hn = mod(packed, h)
        padded, _ = pad_packed_sequence(out)
        return padded, hn

    _compare(m, (x,), call)
    _compare(m, (x, _hidden(cls, kw, 3)), call)


def test_eval_mode_and_no_grad(eager_mode):
    torch.manual_seed(5)
    for cls in (nn.LSTM, nn.GRU):
        m = cls(4, 6, num_layers=2, dropout=0.5).eval()
        with torch.no_grad():
            _compare(m, (_seq(5, 2, 4, grad=False),), backward=False)


class _RecordDropout(TorchDispatchMode):
    r"""Records the keep-masks of tpu's native_dropout calls."""

    def __init__(self):
        super().__init__()
        self.masks = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.native_dropout.default:
            self.masks.append(out[1].cpu())
        return out


class _ReplayDropout(TorchDispatchMode):
    r"""CPU dropout draws its noise with bernoulli_(1 - p): fill it with the recorded masks instead."""

    def __init__(self, masks):
        super().__init__()
        self.masks = list(masks)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.bernoulli_.float:
            return args[0].copy_(self.masks.pop(0).to(args[0].dtype))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_dropout_between_layers(eager_mode, cls):
    r"""Train mode with dropout: tpu draws its own masks; with the same masks the CPU gives the same outputs and
    gradients, the masks drop about p of the elements, and the same seed gives the same masks."""
    torch.manual_seed(6)
    p = 0.4
    m = cls(8, 64, num_layers=3, dropout=p)
    x = _seq(6, 4, 8)
    m_tpu = copy.deepcopy(m).to(DEV)
    x_tpu = _to(x, DEV)
    torch.tpu.manual_seed(11)
    rec = _RecordDropout()
    with rec:
        got = _run(m_tpu, (x_tpu,))
    assert len(rec.masks) == 2  # between the 3 layers
    kept = torch.cat([k.flatten().float() for k in rec.masks]).mean().item()
    assert abs(kept - (1 - p)) < 0.05, kept
    with _ReplayDropout(rec.masks):
        exp = _run(m, (_to(x, "cpu"),))
    for e_list, g_list in zip(exp, got):
        for e, g in zip(e_list, g_list):
            torch.testing.assert_close(g, e, **TOL)
    # the same seed draws the same masks
    m_tpu.zero_grad()
    torch.tpu.manual_seed(11)
    rec2 = _RecordDropout()
    with rec2:
        again = _run(m_tpu, (_to(x, DEV),))
    for a, b in zip(rec.masks, rec2.masks):
        assert torch.equal(a, b)
    torch.testing.assert_close(again[0][0], got[0][0], rtol=0, atol=0)


@pytest.mark.slow
def test_double_backward():
    r"""create_graph=True: autograd differentiates the fused cells through their composite backward."""
    torch.manual_seed(8)
    for cls in (nn.LSTMCell, nn.GRUCell):
        cell = cls(3, 4)
        x = _seq(2, 3)

        def call(m, x):
            y = m(x)
            y = y[0] if isinstance(y, tuple) else y
            (gx,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
            return gx

        _compare(cell, (x,), call)


@pytest.mark.slow
def test_half_precision():
    torch.manual_seed(9)
    for dtype, cls in ((torch.bfloat16, nn.LSTM), (torch.float16, nn.GRU)):
        if True:
            m = cls(4, 8).to(dtype)
            x = _seq(4, 2, 4, dtype=dtype)
            _compare(m, (x,), tol=dict(rtol=2e-2, atol=2e-2))


# ---- torch.compile ----

class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(12, 5)
        self.rnn = nn.RNN(5, 5, nonlinearity="relu")
        self.lcell = nn.LSTMCell(5, 5)
        self.gcell = nn.GRUCell(5, 5)
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y.transpose(0, 1))
        y, _ = self.rnn(y, h)
        h1, c1 = self.lcell(y[-1])
        h2 = self.gcell(h1, c1)
        return self.head(torch.tanh(h2)), y


@pytest.mark.slow
@pytest.mark.parametrize("allow_rnn", [True, False])
def test_compiled(fresh_dynamo, allow_rnn):
    r"""allow_rnn=True: dynamo traces the recurrent modules (PyTorch's decomposition, unrolled) and the cells (the
    fused cell ops inside the graph). allow_rnn=False (dynamo's default): a graph break around nn.RNN/LSTM/GRU, which
    run eagerly between the compiled graphs (their Python meta kernels must not be traced by Dynamo there)."""
    torch.manual_seed(10)
    model = _Model()
    x = _seq(3, 2, 4)  # two steps: the compiled graph is unrolled, and its compile time grows with the steps

    def tpu_module(m):
        return torch.compile(copy.deepcopy(m).to(DEV), backend="tpu")

    with torch._dynamo.config.patch(allow_rnn=allow_rnn):
        _compare(model, (x,), tpu_module=tpu_module, tol=dict(rtol=1e-4, atol=1e-4))
    stats = torch_tpu.compile_stats()
    # allow_rnn=False: Dynamo cannot resume after a break inside this forward, so it runs the forward eagerly
    assert stats["graphs"] >= 1 or not allow_rnn, stats


# ---- PyTorch's ModuleInfo samples ----

@pytest.mark.slow
@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"])
def test_module_info(name):
    from torch.testing._internal.common_modules import module_db

    (info,) = [m for m in module_db if m.module_cls.__name__ == name]
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True, training=True)
    assert samples
    for k, s in enumerate(samples):
        torch.manual_seed(k)
        m = info.module_cls(*s.constructor_input.args, **s.constructor_input.kwargs)
        _compare(m, (tuple(s.forward_input.args), dict(s.forward_input.kwargs)),
                 call=lambda mod, a, kw: mod(*a, **kw))
