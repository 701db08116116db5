"""The C++ graph call of inference graphs (torch_tpu/_dynamo_backend/_backend.py `_graph_call`, `_C._GraphCall`):
which graphs take it, that it serves calls with the program built by the full path, and that everything else falls
back."""
from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
import torch.nn as nn

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import seeded  # noqa: E402


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # fresh dynamo state, a private compile cache


def tpu_compile(fn, **kw):
    return torch.compile(fn, backend="tpu", dynamic=False, fullgraph=True, **kw)


def stats():
    s = torch_tpu.compile_stats()
    return {k: s[k] for k in ("fast_calls", "runs", "lowerings", "graphs")}


def delta(before):
    now = stats()
    return {k: now[k] - before[k] for k in now}


def close(a, b, atol=1e-5, rtol=1e-4):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), atol=atol, rtol=rtol)


def test_inference_graph_is_called_from_cpp():
    def f(x, y):
        return x * y + 1, (x - y).sum()

    x, y = seeded(0, torch.randn, 4, 8), seeded(1, torch.randn, 4, 8)
    xt, yt = x.to("tpu"), y.to("tpu")
    c = tpu_compile(f)
    before = stats()
    for _ in range(3):
        got = c(xt, yt)
        for g, w in zip(got, f(x, y)):
            close(g, w)
    # The first call builds the program through AOTAutograd's wrappers and the runner; the next two take the graph
    # call straight to the launch.
    assert delta(before) == {"fast_calls": 2, "runs": 3, "lowerings": 1, "graphs": 1}


def test_graph_call_can_be_switched_off():
    x = torch.randn(16, device="tpu")
    c = tpu_compile(lambda x: x + 1, options={"graph_call": False})
    before = stats()
    for _ in range(3):
        close(c(x), x.cpu() + 1)
    assert delta(before)["fast_calls"] == 0 and delta(before)["runs"] == 3


def test_new_signature_is_built_by_the_full_path_then_served():
    # Dynamo does not guard storage offsets: a view at another offset reaches the same compiled graph with another
    # program signature, which the graph call leaves to the full path once.
    base = seeded(0, torch.randn, 40)
    bt = base.to("tpu")
    whole = bt[:16].clone()  # a tensor that is its whole buffer, then views into a larger one
    c = tpu_compile(lambda x: x * 2)
    before = stats()
    close(c(whole), base[:16] * 2)
    close(c(whole), base[:16] * 2)
    close(c(bt[3:19]), base[3:19] * 2)
    close(c(bt[3:19]), base[3:19] * 2)
    close(c(bt[20:36]), base[20:36] * 2)  # same signature as the offset-3 view: its program
    assert delta(before) == {"fast_calls": 3, "runs": 5, "lowerings": 2, "graphs": 1}


def test_in_graph_mutation_advances_the_version_as_the_wrappers_do():
    def f(buf, x):
        buf.add_(x)
        return buf * 2

    x = seeded(1, torch.randn, 4, 4)
    versions = {}
    for graph_call in (True, False):
        torch._dynamo.reset()
        buf = torch.zeros(4, 4)
        bt = buf.to("tpu")
        c = tpu_compile(f, options={"graph_call": graph_call})
        before = stats()
        v0 = bt._version
        for _ in range(3):
            close(c(bt, x.to("tpu")), f(buf, x))
        close(bt, buf)
        versions[graph_call] = bt._version - v0
        assert delta(before)["fast_calls"] == (2 if graph_call else 0)
    assert versions[True] == versions[False] == 3


def test_graphs_that_need_the_wrappers_keep_them():
    x = seeded(0, torch.randn, 4, 4)
    xt = x.to("tpu")
    before = stats()
    # An output that is a view of an input: AOTAutograd regenerates the view each call.
    c = tpu_compile(lambda x: (x.view(16), x + 1))
    for _ in range(2):
        v, y = c(xt)
        close(v, x.view(16))
        close(y, x + 1)
        assert v.untyped_storage()._cdata == xt.untyped_storage()._cdata
    # Training: inputs that require grad.
    w = seeded(1, torch.randn, 4, 4, requires_grad=True)
    wt = w.detach().to("tpu").requires_grad_()
    g = tpu_compile(lambda a, b: (a @ b).tanh().sum())
    for _ in range(2):
        wt.grad = None
        g(xt, wt).backward()
    (x @ w).tanh().sum().backward()
    close(wt.grad, w.grad)
    assert delta(before)["fast_calls"] == 0


def test_grad_mode_change_recompiles_into_a_training_graph():
    m = seeded(0, nn.Sequential, nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    x = seeded(1, torch.randn, 2, 8)
    before = stats()
    with torch.no_grad():
        for _ in range(3):
            out = c(x.to("tpu"))
            assert not out.requires_grad
            close(out, m(x))
    assert delta(before)["fast_calls"] == 2
    before = stats()
    out = c(x.to("tpu"))  # grad enabled: Dynamo's grad-mode guard fails, a training graph is compiled
    assert out.requires_grad
    out.sum().backward()
    m(x).sum().backward()
    close(mt[0].weight.grad, m[0].weight.grad, atol=1e-4)
    assert delta(before)["fast_calls"] == 0


def test_cpu_inputs_take_the_full_path():
    x = seeded(0, torch.randn, 8)
    c = tpu_compile(lambda x: x * 3)
    before = stats()
    for _ in range(2):
        close(c(x), x * 3)
    assert delta(before)["fast_calls"] == 0 and delta(before)["runs"] == 2


def test_time_stages_reports_every_stage():
    x = torch.randn(16, device="tpu")
    runners = []
    init = torch_tpu._dynamo_backend._GraphRunner.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        runners.append(self)

    torch_tpu._dynamo_backend._GraphRunner.__init__ = record
    try:
        tpu_compile(lambda x: x + 1)(x)
    finally:
        torch_tpu._dynamo_backend._GraphRunner.__init__ = init
    st = runners[0].cg._time_stages([x], 20)
    assert set(st) == {"signature", "program lookup", "launch bookkeeping and output tensors",
                       "PJRT execute (traced)"}
    assert st["PJRT execute (traced)"] > 0 and st["signature"] > 0


def test_inference_mode_mutation():
    # Tensors made under inference_mode have no version counter: the graph call mutates them without bumping one.
    def f(buf, x):
        buf.add_(x)
        return buf * 2

    x = seeded(1, torch.randn, 4, 4)
    buf = torch.zeros(4, 4)
    with torch.inference_mode():
        bt = buf.to("tpu")
        xt = x.to("tpu")
        c = tpu_compile(f)
        before = stats()
        for _ in range(3):
            close(c(bt, xt), f(buf, x))
    close(bt, buf)
    assert delta(before)["fast_calls"] == 2
