"""Fused eager mode: ops recorded and launched as one program at synchronization points.

Part of the op tests (tests/python/test_ops_basic.py) and the model tests (tests/python/test_models.py) run again here
with the mode set to "fused" (they compare with CPU); the tests below compare fused with strict directly and check
the synchronization points, in-place writes through views, autograd, RNG, the trace cache and error attribution.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

import test_models as _tm
import test_ops_basic as _ob


@pytest.fixture(autouse=True)
def fused_mode():
    prev = torch_tpu.eager_mode()
    torch_tpu.set_eager_mode("fused")
    yield
    torch_tpu.set_eager_mode(prev)


def strict(fn, *args):
    torch_tpu.set_eager_mode("strict")
    try:
        return fn(*args)
    finally:
        torch_tpu.set_eager_mode("fused")


def fused_stats():
    return torch_tpu.cache_stats()["fused"]


# ---- the op and model tests, in fused mode (collected here, so the fixture above applies) ----

_UNARY_SUBSET = [u for u in _ob.UNARY if u[0] in ("neg", "exp", "gelu", "floor", "sign", "to_int", "clone", "clamp")]


@pytest.mark.parametrize("name,fn,dtypes,rng,diff", _UNARY_SUBSET, ids=[u[0] for u in _UNARY_SUBSET])
def test_unary(name, fn, dtypes, rng, diff):
    _ob.test_unary(name, fn, dtypes, rng, diff)


_BINARY_SUBSET = [b for b in _ob.BINARY if b[0] in ("add", "sub", "mul", "div", "pow", "maximum", "eq", "atan2")]


@pytest.mark.parametrize("name,fn,dtypes,diff", _BINARY_SUBSET, ids=[b[0] for b in _BINARY_SUBSET])
def test_binary(name, fn, dtypes, diff):
    _ob.test_binary(name, fn, dtypes, diff)


test_python_scalars_and_promotion = _ob.test_python_scalars_and_promotion
test_where_masked_fill_addcmul = _ob.test_where_masked_fill_addcmul
test_reduction_nan_and_empty = _ob.test_reduction_nan_and_empty
test_softmax_family = _ob.test_softmax_family
test_layer_norm = _ob.test_layer_norm
test_embedding_index_select = _ob.test_embedding_index_select
test_mlp_attention_block_training_step = _ob.test_mlp_attention_block_training_step
test_shape_ops = _ob.test_shape_ops
test_indexing = _ob.test_indexing
test_sort_topk = _ob.test_sort_topk
test_factory = _ob.test_factory
test_random_ops_ranges_and_seed = _ob.test_random_ops_ranges_and_seed
test_qwen3_decoder_forward_backward_adamw_matches_cpu = _tm.test_qwen3_decoder_forward_backward_adamw_matches_cpu
test_moe_block_forward_backward_matches_cpu = _tm.test_moe_block_forward_backward_matches_cpu
test_batchnorm_running_stats_update_in_eager = _tm.test_batchnorm_running_stats_update_in_eager


# ---- fused against strict ----


def test_mode_switch_and_env(run_python):
    assert torch_tpu.eager_mode() == "fused"
    with pytest.raises(ValueError):
        torch_tpu.set_eager_mode("lazy")
    r = run_python("import torch_tpu; print(torch_tpu.eager_mode())", env={"TORCH_TPU_EAGER_MODE": "fused"})
    assert r.stdout.strip() == "fused"


def test_ops_are_recorded_and_launched_at_item():
    x = torch.arange(6.0, device="tpu")
    torch.tpu.synchronize()
    before = fused_stats()
    y = (x * 2 + 1).relu().sum()
    mid = fused_stats()
    assert mid["ops"] - before["ops"] >= 4 and mid["flushes"] == before["flushes"]
    assert y.item() == 36.0
    assert fused_stats()["flushes"] == before["flushes"] + 1


@pytest.mark.parametrize("sync", ["cpu", "print", "synchronize", "nonzero", "fallback", "other_device", "event"])
def test_synchronization_points(sync, capsys):
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    torch.tpu.synchronize()
    before = fused_stats()["flushes"]
    y = x * 3 - 1
    if sync == "cpu":
        got = y.cpu()
    elif sync == "print":
        print(y)
        assert "tensor(" in capsys.readouterr().out
        got = y.cpu()
    elif sync == "synchronize":
        torch.tpu.synchronize()
        assert fused_stats()["flushes"] == before + 1
        got = y.cpu()
    elif sync == "nonzero":
        nz = torch.nonzero(y > 10)
        assert nz.shape == torch.nonzero((x.cpu() * 3 - 1) > 10).shape
        got = y.cpu()
    elif sync == "fallback":
        # An op without a rule runs on the CPU: its input is read from the device first.
        from test_fallback import NO_RULE

        cubed = NO_RULE(y)
        assert fused_stats()["flushes"] == before + 1
        assert torch.equal(cubed.cpu(), (x.cpu() * 3 - 1) ** 3)
        got = y.cpu()
    elif sync == "other_device":
        z = y.to("tpu:1")
        assert fused_stats()["flushes"] >= before + 1
        got = z.cpu()
    else:
        ev = torch.tpu.Event()
        ev.record()
        assert fused_stats()["flushes"] == before + 1
        got = y.cpu()
    assert fused_stats()["flushes"] >= before + 1
    assert torch.equal(got, x.cpu() * 3 - 1)


def _step(w, x, bias):
    h = torch.tanh(x @ w + bias)
    h = F.softmax(h * 0.5, dim=-1)
    return h.sum(0), h.max()


def test_fused_equals_strict_bitwise_and_repeats_hit_the_cache():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 16, generator=g).to("tpu")
    bias = torch.randn(16, generator=g).to("tpu")
    xs = [torch.randn(8, 16, generator=g).to("tpu") for _ in range(4)]
    want = [tuple(t.cpu() for t in strict(_step, w, x, bias)) for x in xs]
    before = fused_stats()
    for x, (ws, wm) in zip(xs, want):
        s, m = _step(w, x, bias)
        assert torch.equal(s.cpu(), ws) and torch.equal(m.cpu(), wm)
        torch_tpu._C._fused_wait()
    after = fused_stats()
    # The same step four times: run op by op once, compiled (in the background) the second time, a cached program
    # from then on (or read from the disk cache at once, when an earlier run left it there).
    assert after["hits"] - before["hits"] >= 1
    assert after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"] == 1


def test_in_place_writes_through_views():
    def f(base):
        a = base.clone()
        v = a[1:, ::2]          # a strided view
        v.mul_(10)
        a[0].add_(a[2])         # reads a row written above
        t = a.t()
        t[0, 1] = -1.0          # write through a transposed view
        a.unsqueeze(0)[0, 2, 3] += 5
        return a, v.sum()

    base = torch.arange(20.0).reshape(4, 5).to("tpu")
    want = [t.cpu() for t in strict(f, base)]
    got = f(base)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)
    cpu = f(base.cpu())
    assert torch.equal(want[0], cpu[0])


def test_temporaries_are_not_outputs_and_aliases_see_writes():
    x = torch.ones(4, 4, device="tpu")
    torch.tpu.synchronize()
    y = x + 1
    z = y * 2                  # y dies below, z stays
    view = z.view(16)
    del y
    view[3] = 100.0
    assert z[0, 3].item() == 100.0
    assert torch.equal(z.cpu().flatten()[:3], torch.full((3,), 4.0))


def test_autograd_backward_on_the_device_thread():
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 3)
    x = torch.randn(5, 6)
    tl = torch.nn.Linear(6, 3).to("tpu")
    tl.load_state_dict(lin.state_dict())
    loss_c = F.gelu(lin(x)).pow(2).mean()
    loss_c.backward()
    loss_t = F.gelu(tl(x.to("tpu"))).pow(2).mean()
    loss_t.backward()
    torch.testing.assert_close(loss_t.item(), loss_c.item())
    torch.testing.assert_close(tl.weight.grad.cpu(), lin.weight.grad)
    torch.testing.assert_close(tl.bias.grad.cpu(), lin.bias.grad)


def test_rng_draws_the_same_keys_as_strict():
    def draw():
        torch.manual_seed(1234)
        a = torch.rand(100, device="tpu")
        b = torch.randn(7, 3, device="tpu")
        c = F.dropout(torch.ones(50, device="tpu"), 0.5, training=True)
        return a.cpu(), b.cpu(), c.cpu()

    want = strict(draw)
    got = draw()
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_loop_without_synchronization_is_cut_at_its_period(run_python):
    code = """
import torch, torch_tpu
torch_tpu.set_eager_mode("fused")
w = torch.randn(8, 8).to("tpu")
acc = torch.zeros(8, 8, device="tpu")
torch.tpu.synchronize()
def loop(n):
    global acc
    for i in range(n):          # 4 ops per iteration, never synchronized
        acc = (acc @ w).tanh() * 0.5 + w
loop(100)
torch_tpu._C._fused_wait()
s0 = torch_tpu.cache_stats()["fused"]
loop(200)                       # cut into identical traces, each one launch of the same fused program
s1 = torch_tpu.cache_stats()["fused"]
torch.tpu.synchronize()
ref = torch.zeros(8, 8)
wc = w.cpu()
for i in range(300):
    ref = (ref @ wc).tanh() * 0.5 + wc
assert torch.allclose(acc.cpu(), ref, atol=1e-5), (acc.cpu() - ref).abs().max()
print(s1["limit_flushes"] - s0["limit_flushes"], s1["hits"] - s0["hits"], s1["compiles"])
"""
    # (speed check off: its timed runs op by op would count as launches that are not hits)
    r = run_python(code, env={"TORCH_TPU_FUSED_MAX_OPS": "100", "TORCH_TPU_CACHE_DIR": "", "TORCH_TPU_FUSED_SPEED_CHECK": "0"})
    cuts, hits, compiles = map(int, r.stdout.split())
    assert cuts >= 8 and hits == cuts and compiles <= 2, r.stdout


def test_meta_errors_raise_at_the_op_and_keep_the_trace():
    x = torch.arange(6.0, device="tpu")
    y = x * 2
    with pytest.raises(RuntimeError, match="size of tensor a"):
        y + torch.ones(5, device="tpu")
    assert torch.equal(y.cpu(), torch.arange(6.0) * 2)


def test_an_error_inside_a_fused_block_names_the_op():
    # The device cannot allocate 256 GiB: the error surfaces when the block is launched and names the op, both the
    # first time (op by op) and once the block has a fused program (which then reruns op by op to find it).
    x = torch.ones(3, device="tpu")
    for attempt in range(3):
        torch.tpu.synchronize()
        big = torch.zeros(2**36, device="tpu")
        y = (x + 1) * 2
        with pytest.raises(RuntimeError, match="aten::zero"):
            y.cpu()
        # The block's results are lost, not silently zero.
        with pytest.raises(RuntimeError, match="value was lost"):
            y.cpu()
        del big, y
    assert torch.equal(((x + 1) * 2).cpu(), torch.full((3,), 4.0))


def test_device_checks_hold_in_fused_blocks():
    # An out-of-range index inside a recorded block raises IndexError at the synchronization point, naming the op,
    # whether the block runs op by op (first sighting) or as its fused program (later ones); valid blocks of the
    # same trace still compute.
    x = torch.arange(4.0, device="tpu")
    before = fused_stats()
    for step in range(4):
        torch.tpu.synchronize()
        bad = step % 2 == 1
        idx = torch.tensor([3 if not bad else 7], device="tpu")
        y = (x * 2)[idx] + 1
        if bad:
            with pytest.raises(IndexError, match="aten::"):
                y.cpu()
        else:
            assert torch.equal(y.cpu(), torch.tensor([7.0]))
        torch_tpu._C._fused_wait()
    assert torch_tpu._C._pending_device_checks() == 0
    assert fused_stats()["hits"] - before["hits"] >= 1


# ---- the speed check: a fused program no faster than its trace op by op is dropped ----


@pytest.fixture
def speed_check():
    def set_check(trials, bias):
        torch_tpu._C._fused_set_speed_check(trials, bias)

    yield set_check
    torch_tpu._C._fused_set_speed_check(-1, 0.0)


def _speed_step(x, w):
    # 5 ops, one trace per call (.cpu() launches it); shapes no other test uses, so the trace is new here.
    return ((x @ w).tanh() * 0.5 + 1).sum(0).cpu()


def _until(cond, step, limit=40):
    for _ in range(limit):
        out = step()
        torch_tpu._C._fused_wait()  # the fused program compiled in the background lands
        if cond():
            return out
    pytest.fail(f"not reached in {limit} steps: {fused_stats()}")


BLOCK = 8  # steps per timed block of the check by steps (fused_policy.cpp kBlockSteps)


def test_speed_check_drops_a_slower_fused_program_and_checks_it_again(speed_check):
    # A trace repeating back to back is checked by steps: blocks of 8 steps recorded and launched as the program
    # alternate with blocks of 8 steps run as strict mode runs them (bypassed). Every timed fused step counts 10 s
    # more than it took: the check must find the program slower than strict mode.
    speed_check(2, 10.0)
    x, w = torch.randn(3, 24).to("tpu"), torch.randn(24, 37).to("tpu")
    ref = strict(_speed_step, x, w)
    s0 = fused_stats()
    step = lambda: _speed_step(x, w)  # noqa: E731
    out = _until(lambda: fused_stats()["slow_programs"] > s0["slow_programs"], step, limit=80)
    torch.testing.assert_close(out, ref)
    s1 = fused_stats()
    assert s1["speed_checks"] - s0["speed_checks"] == 1
    # Untimed first launches, then 2 rounds of a fused block (and the launch it begins after) and a strict block.
    assert s1["speed_trials"] - s0["speed_trials"] >= 3 + 2 * (1 + 2 * BLOCK)
    assert s1["bypassed"] - s0["bypassed"] >= 2 * BLOCK * 5  # the strict blocks' ops (5 per step), not recorded
    # Dropped: the trace runs op by op once more, then its ops run as in strict mode, not recorded (the same values
    # as strict mode); no new compile.
    for _ in range(5):
        assert torch.equal(step(), ref)
    s2 = fused_stats()
    assert s2["hits"] == s1["hits"] and s2["replays"] - s1["replays"] <= 1
    assert s2["bypassed"] - s1["bypassed"] >= 4 * 5
    assert s2["compiles"] == s1["compiles"]
    # After 64 traces' worth of ops it is recorded and checked again (and, still slower, dropped again).
    _until(lambda: fused_stats()["slow_programs"] > s1["slow_programs"], step, limit=64 + 3 + 2 * (1 + 2 * BLOCK) + 5)
    s3 = fused_stats()
    assert s3["speed_checks"] == s1["speed_checks"] + 1
    assert s3["hits"] > s2["hits"]
    for _ in range(3):
        assert torch.equal(step(), ref)


def test_speed_check_keeps_a_faster_fused_program(speed_check):
    speed_check(2, -10.0)  # every timed fused step counts as free
    x, w = torch.randn(5, 24).to("tpu"), torch.randn(24, 29).to("tpu")
    ref = strict(_speed_step, x, w)
    s0 = fused_stats()
    step = lambda: _speed_step(x, w)  # noqa: E731
    _until(lambda: fused_stats()["speed_checks"] > s0["speed_checks"], step, limit=80)
    s1 = fused_stats()
    assert s1["slow_programs"] == s0["slow_programs"]
    for _ in range(5):
        torch.testing.assert_close(step(), ref)
    s2 = fused_stats()
    assert s2["hits"] - s1["hits"] == 5 and s2["speed_trials"] == s1["speed_trials"]
    assert s2["bypassed"] == s1["bypassed"]
    # Off: a new fused program is used from its first launch, unchecked.
    speed_check(0, 10.0)
    x2 = torch.randn(6, 24).to("tpu")
    _until(lambda: fused_stats()["hits"] > s2["hits"], lambda: _speed_step(x2, w))
    assert fused_stats()["speed_trials"] == s2["speed_trials"]
    assert fused_stats()["slow_programs"] == s0["slow_programs"]


def test_speed_check_survives_mode_changes_inside_its_blocks(speed_check):
    # Strict steps between two fused ones (the mode changed inside a timed block, or inside the strict block) end that
    # block untimed; the check goes on from the next fused launch and finishes (the faster program kept).
    speed_check(2, -10.0)
    x, w = torch.randn(4, 24).to("tpu"), torch.randn(24, 35).to("tpu")
    ref = strict(_speed_step, x, w)
    s0 = fused_stats()
    step = lambda: _speed_step(x, w)  # noqa: E731
    _until(lambda: fused_stats()["speed_trials"] - s0["speed_trials"] >= 3 + 3, step)  # inside the first block
    for cut in range(2):
        torch_tpu.set_eager_mode("strict")
        for _ in range(3):
            assert torch.equal(step(), ref)
        torch_tpu.set_eager_mode("fused")
        for _ in range(BLOCK + 2 - cut):  # the second time, stops inside the strict block
            torch.testing.assert_close(step(), ref)
    _until(lambda: fused_stats()["speed_checks"] > s0["speed_checks"], step, limit=80)
    s1 = fused_stats()
    assert s1["slow_programs"] == s0["slow_programs"]
    for _ in range(3):
        torch.testing.assert_close(step(), ref)
    assert fused_stats()["hits"] - s1["hits"] == 3


@pytest.mark.parametrize("bias", [10.0, -10.0])
def test_speed_check_by_launches_when_other_traces_run_between(speed_check, bias):
    # Two traces launched in turn: neither repeats back to back, so neither's steps can run apart as strict mode.
    # Each program's launches alternate with launches of its trace op by op (2 timed of each kind): a slower program
    # is dropped (bias 10 s), a faster one kept; no op is bypassed either way.
    speed_check(2, bias)
    n = 31 if bias > 0 else 33  # traces new to this case
    x, w = torch.randn(7, 24).to("tpu"), torch.randn(24, n).to("tpu")
    v = torch.randn(9, 24).to("tpu")
    ref_a, ref_b = strict(_speed_step, x, w), strict(_speed_step, v, w)
    s0 = fused_stats()

    def step():
        return _speed_step(x, w), _speed_step(v, w)

    _until(lambda: fused_stats()["speed_checks"] - s0["speed_checks"] >= 2, step, limit=60)
    s1 = fused_stats()
    assert s1["bypassed"] == s0["bypassed"]
    assert s1["speed_trials"] - s0["speed_trials"] >= 2 * (3 + 2 * 2)
    assert s1["slow_programs"] - s0["slow_programs"] == (2 if bias > 0 else 0)
    for _ in range(3):
        a, b = step()
        torch.testing.assert_close(a, ref_a)
        torch.testing.assert_close(b, ref_b)
    s2 = fused_stats()
    if bias > 0:
        assert s2["hits"] == s1["hits"]
    else:
        assert s2["hits"] - s1["hits"] == 6
    assert s2["speed_checks"] == s1["speed_checks"]


def test_identical_blocks_without_synchronization_settle_on_fused_programs(run_python):
    # 6 identical residual blocks of 5 ops per step, no synchronization: the op sequence's period is one block, so
    # traces are cut every 35 ops, at 6 different places of the 30-op step (6 traces, each new at first). The cut
    # must survive those first sightings (not fall back to the size limit), and the trace cut at the size limit when
    # the period was found is not compiled: after warm-up every cut is one launch.
    code = """
import torch, torch_tpu
torch_tpu.set_eager_mode("fused")
torch.manual_seed(0)
ws = [torch.randn(16, 16).to("tpu") * 0.1 for _ in range(6)]
x0 = torch.randn(2, 16).to("tpu")
def step(x):
    for w in ws:  # 5 ops per block
        x = x + ((x @ w).tanh() * 0.5 - 0.1)
    return x
def loop(n):
    x = x0
    for _ in range(n):
        x = step(x)
    return x
for _ in range(3):  # first sightings; programs for one live set; programs for every live set
    loop(40); torch.tpu.synchronize()
    torch_tpu._C._fused_wait()
s0 = torch_tpu.cache_stats()["fused"]
y = loop(40)
s1 = torch_tpu.cache_stats()["fused"]
torch_tpu.set_eager_mode("strict")
ref = loop(40)
assert torch.allclose(y.cpu(), ref.cpu(), atol=1e-5)
d = {k: s1[k] - s0[k] for k in ("flushes", "limit_flushes", "hits", "replays", "compiles")}
print(d["limit_flushes"], d["hits"], d["replays"], d["compiles"])
"""
    r = run_python(code, env={"TORCH_TPU_FUSED_MAX_OPS": "200", "TORCH_TPU_CACHE_DIR": "",
                              "TORCH_TPU_FUSED_SPEED_CHECK": "0"})
    cuts, hits, replays, compiles = map(int, r.stdout.split())
    assert cuts >= 30 and replays <= 1 and compiles == 0 and hits >= cuts, r.stdout


def test_inference_products_read_packed_weights_while_recording():
    # With autograd off, a product recorded in fused mode reads the weight through its packed (row-major transposed)
    # copy like strict mode: the copy is made when the op is recorded, from the weight's buffer.
    lin = torch.nn.Linear(32, 48).to("tpu")
    x = torch.randn(4, 32).to("tpu")
    before = torch_tpu.cache_stats()["packed_weights"]
    with torch.no_grad():
        y = (lin(x) * 2).cpu()
    assert torch_tpu.cache_stats()["packed_weights"] == before + 1
    with torch.no_grad():
        ref = strict(lambda: (lin(x) * 2).cpu())
    torch.testing.assert_close(y, ref)
    torch.testing.assert_close(y, (torch.nn.functional.linear(x.cpu(), lin.weight.cpu(), lin.bias.cpu()) * 2))


# ---- donation: storages a trace overwrites are updated in place ----


def _momentum_step(params, bufs, grads):
    snaps = []
    for p, b, g in zip(params, bufs, grads):
        snaps.append(p.clone())  # read before the update, in the same trace: must keep the old value
        b.mul_(0.9).add_(g)
        p.add_(b, alpha=-0.1)
    torch.tpu.synchronize()
    return snaps


def test_overwritten_storages_are_donated_and_values_stay_right(speed_check):
    speed_check(0, 0.0)  # every launch of the fused program counts (no runs op by op for timing)
    g = torch.Generator().manual_seed(3)
    init = [torch.randn(32, 16, generator=g) for _ in range(3)]
    grads_c = [torch.randn(32, 16, generator=g) for _ in range(3)]

    def run(mode_fused):
        params = [t.to("tpu") for t in init]
        bufs = [torch.zeros(32, 16, device="tpu") for _ in init]
        grads = [t.to("tpu") for t in grads_c]
        held = params[1]  # another name for the same storage: not another holder of its buffer
        snaps = []
        for _ in range(8):
            snaps = _momentum_step(params, bufs, grads)
            if mode_fused:
                torch_tpu._C._fused_wait()
        return [p.cpu() for p in params] + [b.cpu() for b in bufs] + [s.cpu() for s in snaps] + [held.cpu()]

    want = strict(run, False)
    s0 = fused_stats()
    got = run(True)
    s1 = fused_stats()
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert s1["hits"] > s0["hits"]
    # Every launch of the fused program donates the 3 parameters and 3 momentum buffers it overwrites.
    assert s1["donated"] - s0["donated"] >= 6 * (s1["hits"] - s0["hits"]), (s0, s1)
    text = torch_tpu._C._fused_pending_text()
    assert text == ""  # synchronized: nothing pending


def test_donation_keeps_values_read_before_the_update_and_can_be_turned_off(run_python):
    code = """
import torch, torch_tpu
torch_tpu.set_eager_mode("fused")
torch_tpu._C._fused_set_speed_check(0, 0.0)
x = torch.arange(64.0).reshape(8, 8).to("tpu")
torch.tpu.synchronize()
for i in range(6):
    keep = x.clone()          # pending in the trace: reads x before the update
    x.mul_(2).add_(1)
    torch.tpu.synchronize()
    torch_tpu._C._fused_wait()
    assert torch.equal(keep.cpu() * 2 + 1, x.cpu())
s = torch_tpu.cache_stats()["fused"]
print(s["hits"], s["donated"])
"""
    r = run_python(code, env={"TORCH_TPU_CACHE_DIR": ""})
    hits, donated = map(int, r.stdout.split())
    assert hits >= 2 and donated >= hits, r.stdout
    r = run_python(code, env={"TORCH_TPU_CACHE_DIR": "", "TORCH_TPU_FUSED_DONATE": "0"})
    hits, donated = map(int, r.stdout.split())
    assert hits >= 2 and donated == 0, r.stdout


def test_ops_launch_as_in_strict_mode_while_a_repeating_trace_compiles(run_python):
    code = """
import torch, torch_tpu
torch_tpu.set_eager_mode("fused")
torch_tpu._C._fused_set_speed_check(0, 0.0)
torch.manual_seed(0)
w = torch.randn(24, 24).to("tpu")
x = torch.randn(4, 24).to("tpu")
def step(x):
    for _ in range(4):
        x = (x @ w).tanh() * 0.9 + 0.1
    return x
outs = [step(x).sum(0).cpu() for _ in range(12)]  # each step ends at .cpu(): one trace, the same every step
s = torch_tpu.cache_stats()["fused"]
torch_tpu._C._fused_wait()
later = [step(x).sum(0).cpu() for _ in range(4)]
s2 = torch_tpu.cache_stats()["fused"]
torch_tpu.set_eager_mode("strict")
ref = step(x).sum(0).cpu()
assert all(torch.allclose(o, ref, rtol=1e-5, atol=1e-5) for o in outs + later)
print(s["bypassed"], s["replays"], s2["hits"] - s["hits"], s["ops"])
"""
    r = run_python(code, env={"TORCH_TPU_CACHE_DIR": ""})
    bypassed, replays, hits, ops = map(int, r.stdout.split())
    # Seen, queued, still compiling: three runs op by op, then the ops of the next steps are not recorded until the
    # program lands (its compile takes far longer than these steps); afterwards every step is one launch.
    assert replays == 3 and ops == 3 * 17 and bypassed == 9 * 17 and hits >= 3, r.stdout
    r = run_python(code, env={"TORCH_TPU_CACHE_DIR": "", "TORCH_TPU_FUSED_BYPASS": "0"})
    bypassed, replays, hits, ops = map(int, r.stdout.split())
    assert bypassed == 0 and replays >= 12 and hits >= 3, r.stdout
