"""torch.compile(backend="tpu"): whole graphs as one XLA program (inference and training).

Compiled results are checked against tpu eager and against torch on the CPU. Configs are tiny: XLA compiles are
CPU-heavy. Each test uses its own disk-cache directory unless it tests the disk cache itself.
"""

from __future__ import annotations

import copy
import logging
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MLP, DecoderConfig, DiTBlock, Qwen3Decoder, UNet2D, seeded  # noqa: E402

TINY = DecoderConfig(vocab=64, hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate=64)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # fresh dynamo state, a private compile cache


def tpu_compile(fn, **kw):
    return torch.compile(fn, backend="tpu", dynamic=False, **kw)


def close(a, b, atol=1e-5, rtol=1e-4):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), atol=atol, rtol=rtol)


# ---------------------------------------------------------------------------------------------------------------
# registration


def test_backend_registered_and_default_unchanged():
    import torch._dynamo
    from torch._dynamo.backends import registry

    assert "tpu" in torch._dynamo.list_backends()
    assert registry.lookup_backend("tpu") is torch_tpu._dynamo_backend.tpu_backend
    assert registry._default_backend == "inductor"
    from torch._dynamo.device_interface import get_interface_for_device

    assert get_interface_for_device("tpu").is_available()


def test_import_does_not_import_dynamo(run_python):
    p = run_python("""
        import sys, torch_tpu
        assert 'torch._dynamo' not in sys.modules, 'import torch_tpu imported dynamo'
        import torch
        torch_tpu._dynamo_backend._install()  # re-install is harmless
        import torch._dynamo
        assert 'tpu' in torch._dynamo.list_backends()
        print('ok')
    """)
    assert "ok" in p.stdout


# ---------------------------------------------------------------------------------------------------------------
# numerics: MLP, decoder, DiT, UNet


def test_mlp_inference_matches_eager_and_cpu():
    m = seeded(0, MLP)
    x = seeded(1, torch.randn, 8, 32)
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    torch_tpu.reset_fallback_counts()
    with torch.no_grad():
        out = c(x.to("tpu"))
        close(out, m(x))
        close(out, mt(x.to("tpu")))
    s = torch_tpu.compile_stats()
    assert s["compiles"] + s["disk_hits"] + s["memory_hits"] >= 1
    # the compiled graph and the eager run are lowered whole: nothing ran on the CPU fallback
    assert torch_tpu.fallback_counts() == {}


def test_mlp_training_grads_match():
    m = seeded(0, MLP)
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    opt, opt_t = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(mt.parameters(), lr=0.1)
    for step in range(3):
        x = seeded(10 + step, torch.randn, 8, 32)
        loss = m(x).square().mean()
        loss_t = c(x.to("tpu")).square().mean()
        close(loss_t, loss)
        loss.backward()
        loss_t.backward()
        for p, q in zip(m.parameters(), mt.parameters()):
            close(q.grad, p.grad)
        opt.step(), opt_t.step()
        opt.zero_grad(), opt_t.zero_grad()


def test_decoder_prefill_inference():
    m = seeded(0, Qwen3Decoder, TINY)
    ids = seeded(1, torch.randint, 0, TINY.vocab, (2, 8))
    mt = copy.deepcopy(m).to("tpu")
    with torch.no_grad():
        out = tpu_compile(mt)(ids.to("tpu"))
        close(out, m(ids))
        close(out, mt(ids.to("tpu")))


def test_decoder_decode_with_static_kv_cache():
    m = seeded(0, Qwen3Decoder, TINY)
    m.init_kv_cache(1, 16)
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    before = torch_tpu.compile_stats()
    with torch.no_grad():
        for i, tok in enumerate([5, 9, 3, 7]):
            ids, pos = torch.tensor([[tok]]), torch.tensor([i])
            close(c(ids.to("tpu"), pos.to("tpu")), m(ids, pos))
    # The KV cache (buffers mutated in place inside the graph) was written back.
    for lc, lt in zip(m.layers, mt.layers):
        close(lt.attn.k_cache, lc.attn.k_cache)
        close(lt.attn.v_cache, lc.attn.v_cache)
    after = torch_tpu.compile_stats()
    assert after["lowerings"] - before["lowerings"] == 1  # one program for every step
    # Every step updated both caches of every layer in place: their buffers (a few KiB, far below
    # TORCH_TPU_DONATE_MIN_BYTES) were donated to the program, as jax.jit's donated arguments, not copied.
    assert after["donated"] - before["donated"] == 4 * 2 * TINY.layers


def test_compiled_state_update_is_donated_in_place():
    def step(cache, pos, x):
        cache.index_copy_(0, pos, x)
        return cache.sum(0)

    c = tpu_compile(step)
    cache = torch.zeros(8, 4, device="tpu")
    cache.add_(1)  # a buffer of its own (128 bytes)
    ref = torch.ones(8, 4)
    d0 = torch_tpu.compile_stats()["donated"]
    for i in range(3):
        x = torch.full((1, 4), float(i))
        close(c(cache, torch.tensor([i], device="tpu"), x.to("tpu")), step(ref, torch.tensor([i]), x))
    close(cache, ref)
    assert torch_tpu.compile_stats()["donated"] - d0 == 3
    # Tensors made from the cache before a call (a clone, a view) see what they must after the in-place update.
    snap, view = cache.clone(), cache[4:]
    c(cache, torch.tensor([5], device="tpu"), torch.full((1, 4), 9.0, device="tpu"))
    assert torch_tpu.compile_stats()["donated"] - d0 == 4
    ref[5] = 9.0
    close(cache, ref)
    close(view, ref[4:])
    assert snap.cpu()[5].tolist() == [1.0] * 4


def _decoder_losses(model, steps, compiled: bool, compile_opt: bool = False):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def loss_fn(mod, ids):
        logits = mod(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, TINY.vocab), ids[:, 1:].reshape(-1))

    lf = tpu_compile(loss_fn) if compiled else loss_fn
    ostep = tpu_compile(opt.step) if compile_opt else opt.step
    dev = next(model.parameters()).device
    losses = []
    for s in range(steps):
        ids = seeded(100 + s % 2, torch.randint, 0, TINY.vocab, (2, 9)).to(dev)
        loss = lf(model, ids)
        loss.backward()
        ostep()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("compile_opt", [False, True], ids=["eager_adamw", "compiled_adamw"])
def test_decoder_training_adamw_follows_eager(compile_opt):
    m = seeded(0, Qwen3Decoder, TINY)
    ref_cpu = _decoder_losses(copy.deepcopy(m), 4, compiled=False)
    ref_tpu = _decoder_losses(copy.deepcopy(m).to("tpu"), 4, compiled=False)
    got = _decoder_losses(copy.deepcopy(m).to("tpu"), 4, compiled=True, compile_opt=compile_opt)
    torch.testing.assert_close(got, ref_tpu, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(got, ref_cpu, atol=2e-4, rtol=1e-4)
    assert got[2] < got[0] and got[3] < got[1]  # two batches, alternating: both improve


def test_dit_block_forward_and_backward():
    m = seeded(0, DiTBlock, 32, 4)
    x, cond = seeded(1, lambda: (torch.randn(2, 8, 32), torch.randn(2, 32)))
    mt = copy.deepcopy(m).to("tpu")
    out = tpu_compile(mt)(x.to("tpu"), cond.to("tpu"))
    ref = m(x, cond)
    close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    for p, q in zip(m.parameters(), mt.parameters()):
        close(q.grad, p.grad, atol=1e-4)


def test_unet_forward_and_backward():
    assert torch_tpu._C._compile_has_rule("aten::convolution")
    m = seeded(0, UNet2D, 3, 3, 8, 4)
    x = seeded(1, torch.randn, 2, 3, 16, 16)
    mt = copy.deepcopy(m).to("tpu")
    out = tpu_compile(mt)(x.to("tpu"))
    ref = m(x)
    close(out, ref, atol=1e-4)
    out.square().mean().backward()
    ref.square().mean().backward()
    for p, q in zip(m.parameters(), mt.parameters()):
        close(q.grad, p.grad, atol=1e-4)


# ---------------------------------------------------------------------------------------------------------------
# inputs, mutations, randomness


def test_strided_inputs_read_on_device():
    def f(a, b):
        return (a * 2 + b).sum(0)

    a = seeded(0, torch.randn, 6, 5)
    b = seeded(1, torch.randn, 5, 6)
    at, bt = a.to("tpu"), b.to("tpu")
    c = tpu_compile(f)
    close(c(at[1:], bt.t()[1:]), f(a[1:], b.t()[1:]))  # offset slice and transposed view
    close(c(at[:5], bt.t()[:5]), f(a[:5], b.t()[:5]))
    torch_tpu.reset_fallback_counts()
    close(c(at[::1][1:], bt.t()[1:]), f(a[1:], b.t()[1:]))
    assert torch_tpu.fallback_counts() == {}


def test_inference_reads_packed_weights_and_sees_weight_updates():
    # On the CPU plugin, inference programs read transposed copies of nn.Linear weights (x @ W.T is slow on
    # XLA:CPU); a weight written between calls gets a fresh copy, and training graphs never pack.
    m = seeded(0, MLP, 16, 32, 8)
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    x = seeded(1, torch.randn, 4, 16)
    before = torch_tpu.compile_stats()["packed_weights"]
    with torch.no_grad():
        close(c(x.to("tpu")), m(x))
        packed = torch_tpu.compile_stats()["packed_weights"] - before
        assert packed == 2  # fc1 and fc2 (fc3 has 8 rows: too small to pack); biases stay as they are
        close(c(x.to("tpu")), m(x))
        assert torch_tpu.compile_stats()["packed_weights"] - before == 2  # reused
        m.fc1.weight.mul_(-2.0)
        mt.fc1.weight.mul_(-2.0)
        close(c(x.to("tpu")), m(x))
        assert torch_tpu.compile_stats()["packed_weights"] - before == 3  # only the written weight
    torch.tpu.empty_cache()
    with torch.no_grad():
        close(c(x.to("tpu")), m(x))
    # A training step (forward and backward graphs) reads the weights as they are.
    torch._dynamo.reset()
    mt.zero_grad()
    n = torch_tpu.compile_stats()["packed_weights"]
    tpu_compile(mt)(x.to("tpu")).sum().backward()
    m(x).sum().backward()
    close(mt.fc1.weight.grad, m.fc1.weight.grad, atol=1e-4)
    assert torch_tpu.compile_stats()["packed_weights"] == n


def test_broadcast_transcendentals_exact():
    # cos/sin read by several consumers and broadcast are computed once (materialized): values, NaN and -0.0 as CPU.
    def f(a, q, k):
        c, s = a.cos(), a.sin()
        return q * c + q.flip(-1) * s, k * c - k * s, s

    a = seeded(0, torch.randn, 16, 8) * 4
    a[0, 0], a[0, 1], a[1, 2] = float("nan"), -0.0, float("inf")
    q, k = seeded(1, torch.randn, 3, 16, 8), seeded(2, torch.randn, 2, 3, 16, 8)
    got = tpu_compile(f)(a.to("tpu"), q.to("tpu"), k.to("tpu"))
    want = f(a, q, k)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, atol=1e-5, rtol=1e-5, equal_nan=True)
    assert torch.signbit(got[2].cpu()[0, 1])  # sin(-0.0) == -0.0


def test_batchnorm_running_stats_written_back():
    m = seeded(0, nn.Sequential, nn.Linear(8, 8), nn.BatchNorm1d(8))
    mt = copy.deepcopy(m).to("tpu")
    c = tpu_compile(mt)
    for s in range(2):
        x = seeded(s, torch.randn, 16, 8)
        close(c(x.to("tpu")), m(x), atol=1e-4)
    close(mt[1].running_mean, m[1].running_mean)
    close(mt[1].running_var, m[1].running_var)
    assert int(mt[1].num_batches_tracked) == 2


def test_in_place_update_of_inputs():
    def f(buf, x):
        buf.mul_(0.5).add_(x)
        return buf.sum()

    buf = torch.ones(4, 4)
    x = torch.arange(16.0).reshape(4, 4)
    bt = buf.to("tpu")
    c = tpu_compile(f)
    for _ in range(2):
        out = c(bt, x.to("tpu"))
        ref = f(buf, x)
        close(out, ref)
    close(bt, buf)


def test_random_ops_reproducible_under_manual_seed():
    def f(x):
        return F.dropout(x, 0.5, training=True) + torch.rand_like(x)

    x = torch.ones(64, 64, device="tpu")
    c = tpu_compile(f)
    torch.manual_seed(123)
    a = c(x).cpu()
    b = c(x).cpu()
    torch.manual_seed(123)
    a2 = c(x).cpu()
    assert torch.equal(a, a2)
    assert not torch.equal(a, b)
    kept = (a >= 1).float().mean().item()  # dropout keeps about half (scaled to 2): 2 + rand >= 2
    assert 0.35 < (a >= 2).float().mean().item() < 0.65, kept


# ---------------------------------------------------------------------------------------------------------------
# compile cache, recompiles, logging


def test_recompiles_only_on_new_shapes(caplog):
    m = seeded(0, MLP).to("tpu")
    c = tpu_compile(m)
    torch_tpu._dynamo_backend.reset_compile_stats()
    with caplog.at_level(logging.INFO, logger="torch_tpu"), torch.no_grad():
        c(torch.randn(4, 32, device="tpu"))
        c(torch.randn(4, 32, device="tpu"))
        c(torch.randn(4, 32, device="tpu"))
        s1 = torch_tpu.compile_stats()
        c(torch.randn(6, 32, device="tpu"))
        c(torch.randn(6, 32, device="tpu"))
        s2 = torch_tpu.compile_stats()
    assert s1["lowerings"] == 1 and s1["compiles"] == 1 and s1["runs"] == 3
    assert s2["lowerings"] == 2 and s2["compiles"] == 2 and s2["runs"] == 5
    msgs = [r.getMessage() for r in caplog.records if r.name == "torch_tpu"]
    assert sum("compiled graph" in m for m in msgs) == 2, msgs
    assert any("ops in" in m for m in msgs)



def test_graph_program_cache_is_bounded():
    """A compiled graph keeps at most TORCH_TPU_GRAPH_PROGRAM_CACHE_SIZE programs (one per input signature), the
    least recently used out; a dropped program is rebuilt from the executable cache (a lowering, no compile)."""
    from torch_tpu import _C

    runners = []
    init = torch_tpu._dynamo_backend._GraphRunner.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        runners.append(self)

    # The same sizes over buffers of other lengths: one dynamo graph, one input signature (and program) per buffer.
    bases = [torch.arange(n, dtype=torch.float32, device="tpu") for n in (5, 6, 7)]
    old = _C._compile_graph_program_limit()
    assert old == 64  # the default
    torch_tpu._dynamo_backend._GraphRunner.__init__ = record
    try:
        for limit, ref in ((2, lambda x: x * 2 + 1), (0, lambda x: x * 3 - 1)):  # bounded, then unbounded
            _C._compile_set_graph_program_limit(limit)
            c = tpu_compile(ref)

            def call(b):
                close(c(b[:4]), ref(b.cpu()[:4]))

            torch_tpu._dynamo_backend.reset_compile_stats()
            for b in bases:
                call(b)
            s1 = torch_tpu.compile_stats()
            call(bases[2])  # the most recent: kept
            call(bases[0])  # the oldest: dropped when bounded
            s2 = torch_tpu.compile_stats()
            cg = runners[-1].cg
            if limit:
                assert s1["lowerings"] == 3 and s1["program_evictions"] == 1, s1
                assert s2["lowerings"] == 4 and s2["program_evictions"] == 2, s2
                assert s2["compiles"] == s1["compiles"] and s2["memory_hits"] == s1["memory_hits"] + 1, (s1, s2)
                assert cg._program_count() == 2
            else:
                assert s2["lowerings"] == 3 and s2["program_evictions"] == 0, s2
                assert cg._program_count() == 3
    finally:
        torch_tpu._dynamo_backend._GraphRunner.__init__ = init
        _C._compile_set_graph_program_limit(old)


# A custom op without a lowering rule: it runs eagerly (its implementation uses tpu eager ops).
@torch.library.custom_op("tpu_compile_test::scale_shift", mutates_args=())
def _scale_shift(x: torch.Tensor) -> torch.Tensor:
    return x * 3 - 1


@_scale_shift.register_fake
def _(x):
    return torch.empty_like(x)


def _uses_custom_op(x):
    y = torch.relu(x) + 1
    z = torch.ops.tpu_compile_test.scale_shift(y)
    return (z * z).sum(-1)


def test_partitioned_fallback(caplog):
    x = seeded(0, torch.randn, 4, 8)
    with caplog.at_level(logging.INFO, logger="torch_tpu"):
        out = tpu_compile(_uses_custom_op)(x.to("tpu"))
    close(out, _uses_custom_op(x))
    s = torch_tpu.compile_stats()
    assert s["partitioned_graphs"] >= 1
    assert any("tpu_compile_test::scale_shift" in r.getMessage() for r in caplog.records)


def test_fullgraph_names_the_op_without_rule():
    x = torch.randn(4, 8, device="tpu")
    with pytest.raises(Exception, match="tpu_compile_test::scale_shift"):
        tpu_compile(_uses_custom_op, fullgraph=True)(x)


def test_second_process_hits_disk_cache(run_python, tmp_path):
    code = f"""
        import sys, copy, torch, torch_tpu
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from models import Qwen3Decoder, DecoderConfig, seeded
        cfg = DecoderConfig(vocab=64, hidden=32, layers=1, heads=4, kv_heads=2, head_dim=8, intermediate=64)
        m = seeded(0, Qwen3Decoder, cfg).to("tpu")
        ids = torch.randint(0, 64, (2, 5)).to("tpu")
        loss = torch.compile(m, backend="tpu", dynamic=False)(ids).square().mean()
        loss.backward()
        s = torch_tpu.compile_stats()
        print("STATS", s["compiles"], s["disk_hits"], s["disk_writes"])
    """
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "shared_cache")}
    first = run_python(code, env=env).stdout.split("STATS")[1].split()
    second = run_python(code, env=env).stdout.split("STATS")[1].split()
    assert int(first[0]) == 2 and int(first[2]) == 2, first  # forward and backward compiled and stored
    assert int(second[0]) == 0 and int(second[1]) == 2, second  # nothing compiled: both from disk


def test_uint64_constant_above_int64_runs_eagerly():
    # graph constants are int64 in the program description: a larger uint64 value runs the graph eagerly (it
    # raised a pybind cast error)
    f = torch.compile(lambda x: torch.full((3,), 2 ** 63, dtype=torch.uint64, device="tpu").bitwise_or(x),
                      backend="tpu")
    out = f(torch.ones(3, dtype=torch.uint64, device="tpu"))
    assert out.cpu().tolist() == [2 ** 63 + 1] * 3
