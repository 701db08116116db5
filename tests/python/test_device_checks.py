"""Device-side checks: out-of-range indices and integer division by zero raise what the CPU kernel raises.

The check runs inside the device program (an extra flag output); like a CUDA device-side assert, a violation is
raised at the next synchronization point (``.cpu()``, ``.item()``, printing, ``torch.tpu.synchronize()``), naming
the op, or at the failing call itself under ``TORCH_TPU_LAUNCH_BLOCKING=1``. Before these checks an out-of-range
index was clamped or dropped silently.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu


def _t(values, device, **kw):
    return torch.tensor(values, device=device, **kw)


def _x(d):
    return _t([1.0, 2.0, 3.0], d)


def _idx(v, d):
    return _t([v], d)


def _index_put(d, v, accumulate=False):
    y = _x(d).clone()
    y.index_put_((_idx(v, d),), _t([9.0], d), accumulate=accumulate)
    return y


def _setitem(d, v):
    y = _x(d).clone()
    y[_idx(v, d)] = 9.0
    return y


# Each case fails on CPU; on tpu it must fail with the same exception type and message (the tpu message adds the
# op and may add the offending index).
CASES = {
    "index": lambda d: _x(d)[_idx(5, d)],
    "index_negative": lambda d: _x(d)[_idx(-7, d)],
    "index_2d_second_dim": lambda d: torch.zeros(2, 3, device=d)[_idx(0, d), _idx(4, d)],
    "unsafe_index": lambda d: torch.ops.aten._unsafe_index(_x(d), [_idx(5, d)]),
    "setitem": lambda d: _setitem(d, 5),
    "index_put": lambda d: _index_put(d, 5),
    "index_put_accumulate": lambda d: _index_put(d, -4, accumulate=True),
    "index_select": lambda d: _x(d).index_select(0, _idx(5, d)),
    "index_select_negative": lambda d: _x(d).index_select(0, _idx(-1, d)),
    "embedding": lambda d: F.embedding(_idx(5, d), torch.zeros(3, 2, device=d)),
    "embedding_negative": lambda d: F.embedding(_idx(-1, d), torch.zeros(3, 2, device=d)),
    "gather": lambda d: _x(d).gather(0, _idx(5, d)),
    "gather_negative": lambda d: _x(d).gather(0, _idx(-1, d)),
    "scatter": lambda d: _x(d).clone().scatter_(0, _idx(5, d), _t([1.0], d)),
    "scatter_value": lambda d: _x(d).clone().scatter_(0, _idx(-1, d), 1.0),
    "scatter_add": lambda d: _x(d).clone().scatter_add_(0, _idx(5, d), _t([1.0], d)),
    "scatter_reduce": lambda d: _x(d).clone().scatter_reduce_(0, _idx(5, d), _t([1.0], d), "amax"),
    "take": lambda d: _x(d).take(_idx(5, d)),
    "take_negative": lambda d: _x(d).take(_idx(-7, d)),
    "put": lambda d: _x(d).clone().put_(_idx(5, d), _t([1.0], d)),
    "index_add": lambda d: _x(d).clone().index_add_(0, _idx(5, d), _t([1.0], d)),
    "index_add_negative": lambda d: _x(d).clone().index_add_(0, _idx(-1, d), _t([1.0], d)),
    "index_copy": lambda d: _x(d).clone().index_copy_(0, _idx(5, d), _t([1.0], d)),
    "index_fill": lambda d: _x(d).clone().index_fill_(0, _idx(-7, d), 1.0),
    "index_reduce": lambda d: _x(d).clone().index_reduce_(0, _idx(5, d), _t([1.0], d), "prod"),
    "cross_entropy": lambda d: F.cross_entropy(torch.ones(2, 3, device=d), _t([0, 5], d)),
    "cross_entropy_negative": lambda d: F.cross_entropy(torch.ones(2, 3, device=d), _t([0, -1], d)),
    "cross_entropy_label_smoothing": lambda d: F.cross_entropy(
        torch.ones(2, 3, device=d), _t([0, 5], d), label_smoothing=0.1
    ),
    "nll_loss_none": lambda d: F.nll_loss(torch.ones(2, 3, device=d), _t([5, 0], d), reduction="none"),
    "nll_loss2d": lambda d: F.nll_loss(torch.ones(1, 3, 2, 2, device=d), _t([[[0, 5], [1, 1]]], d)),
    "floor_divide_zero": lambda d: _t([1, 2], d) // _t([0, 1], d),
    "div_trunc_zero": lambda d: _t([1, 2], d).div(_t([0, 1], d), rounding_mode="trunc"),
    "div_floor_scalar_zero": lambda d: _t([1, 2], d).div(0, rounding_mode="floor"),
    "remainder_zero": lambda d: _t([1, 2], d) % _t([1, 0], d),
    "remainder_scalar_zero": lambda d: _t([1, 2], d) % 0,
    "fmod_zero": lambda d: torch.fmod(_t([1, 2], d), _t([0, 1], d)),
    "int32_floor_divide_zero": lambda d: _t([1, 2], d, dtype=torch.int32) // _t([0, 1], d, dtype=torch.int32),
    "masked_scatter_short_source": lambda d: torch.zeros(5, device=d).masked_scatter_(
        _t([True, True, True, False, False], d), torch.ones(2, device=d)),
    "masked_scatter_empty_source": lambda d: torch.zeros(5, device=d).masked_scatter_(
        _t([False, True, False, False, False], d), torch.ones(0, device=d)),
}


def _raised(fn):
    try:
        r = fn()
        if isinstance(r, torch.Tensor):
            r.cpu()  # a synchronization point
    except Exception as e:  # noqa: BLE001
        return e
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_violation_raises_like_cpu_at_synchronization(name):
    cpu = _raised(lambda: CASES[name]("cpu"))
    assert cpu is not None, "the case does not fail on CPU"
    tpu = _raised(lambda: CASES[name]("tpu"))
    assert tpu is not None, "tpu computed an answer where CPU raises"
    assert type(tpu) is type(cpu), f"cpu raised {type(cpu).__name__}, tpu raised {type(tpu).__name__}: {tpu}"
    cpu_msg = str(cpu).splitlines()[0]
    assert str(tpu).startswith(cpu_msg), f"cpu: {cpu_msg!r}\ntpu: {tpu}"
    assert "aten::" in str(tpu), str(tpu)  # names the op
    # Reported once: later work on the device is unaffected.
    assert torch_tpu._C._pending_device_checks() == 0
    torch.testing.assert_close((torch.arange(4.0, device="tpu") * 2).cpu(), torch.arange(4.0) * 2)


def test_valid_indices_still_work():
    x = torch.arange(12.0).view(3, 4)
    t = x.to("tpu")
    i = torch.tensor([2, -1, 0])
    torch.testing.assert_close(t[i.to("tpu")].cpu(), x[i])
    torch.testing.assert_close(t[:, i.to("tpu")].cpu(), x[:, i])
    torch.testing.assert_close(t.index_fill(0, torch.tensor([-1], device="tpu"), 7.0).cpu(),
                               x.index_fill(0, torch.tensor([-1]), 7.0))
    torch.testing.assert_close(t.take(torch.tensor([-1, 11], device="tpu")).cpu(), x.take(torch.tensor([-1, 11])))
    m = x > 4
    torch.testing.assert_close(t[m.to("tpu")].cpu(), x[m])  # masks: indices made on the device, in range
    logits, target = torch.randn(4, 5), torch.tensor([0, -100, 4, 2])
    torch.testing.assert_close(F.cross_entropy(logits.to("tpu"), target.to("tpu")).cpu(),
                               F.cross_entropy(logits, target), rtol=1e-5, atol=1e-5)  # ignore_index respected
    target = torch.tensor([0, 7, 4, 2])
    torch.testing.assert_close(F.cross_entropy(logits.to("tpu"), target.to("tpu"), ignore_index=7).cpu(),
                               F.cross_entropy(logits, target, ignore_index=7), rtol=1e-5, atol=1e-5)
    assert torch_tpu._C._pending_device_checks() == 0


def test_reported_at_each_synchronization_point():
    x = torch.arange(3.0, device="tpu")
    bad = torch.tensor([3], device="tpu")
    for sync in (lambda y: y.cpu(), lambda y: y.sum().item(), lambda y: torch.tpu.synchronize(), lambda y: str(y)):
        y = x[bad]  # no error yet: the program runs asynchronously
        with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
            sync(y)
        assert torch_tpu._C._pending_device_checks() == 0


def test_first_violation_is_reported_and_all_are_cleared():
    x = torch.arange(3.0, device="tpu")
    a = x.gather(0, torch.tensor([7], device="tpu"))
    b = x[torch.tensor([9], device="tpu")]
    with pytest.raises(RuntimeError, match=r"index 7 is out of bounds.*aten::gather"):
        a.cpu()
    b.cpu()  # b's violation was cleared with a's report, as CUDA reports one device-side assert


def test_compiled_graph_checks_indices():
    def f(x, i):
        return x[i] * 2 + torch.gather(x, 0, i.clamp(0, 2))

    cf = torch.compile(f, backend="tpu")
    x = torch.arange(3.0, device="tpu")
    torch.testing.assert_close(cf(x, torch.tensor([0, 2], device="tpu")).cpu(),
                               f(x.cpu(), torch.tensor([0, 2])))
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for dimension 0 with size 3"):
        cf(x, torch.tensor([0, 4], device="tpu")).cpu()


def test_launch_blocking_raises_at_the_failing_call(run_python):
    run_python(
        """
        import torch, torch_tpu
        x = torch.arange(3.0, device="tpu")
        try:
            x[torch.tensor([5], device="tpu")]
        except IndexError as e:
            assert "index 5 is out of bounds for dimension 0 with size 3" in str(e), e
            assert "aten::_unsafe_index" in str(e), e
        else:
            raise AssertionError("no error at the call")
        try:
            torch.tensor([4], device="tpu") // torch.tensor([0], device="tpu")
        except RuntimeError as e:
            assert "ZeroDivisionError" in str(e), e
        else:
            raise AssertionError("no error at the call")
        """,
        env={"TORCH_TPU_LAUNCH_BLOCKING": "1"},
    )


def test_checks_can_be_turned_off(run_python):
    # The documented opt-out: no flag outputs, out-of-range indices are clamped silently (XLA's semantics).
    run_python(
        """
        import torch, torch_tpu
        x = torch.arange(3.0, device="tpu")
        print(x[torch.tensor([5], device="tpu")].cpu())
        assert torch_tpu._C._pending_device_checks() == 0
        """,
        env={"TORCH_TPU_DEVICE_CHECKS": "0"},
    )


def test_switching_checks_at_runtime():
    x = torch.arange(3.0, device="tpu")
    bad = torch.tensor([5], device="tpu")
    assert torch_tpu.device_checks()
    try:
        torch_tpu.set_device_checks(False)
        x[bad].cpu()  # the program without a flag: clamped, no error
        assert torch_tpu._C._pending_device_checks() == 0
    finally:
        torch_tpu.set_device_checks(True)
    with pytest.raises(IndexError):
        x[bad].cpu()  # the same call signature gets its checked program back
