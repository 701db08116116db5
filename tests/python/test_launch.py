"""One launch door (csrc/core/launch.h): every device program -- eager ops, fused-eager traces and their runs op by
op, storage programs, device-side check folds, compiled graphs -- is launched through core's launch, which checks
memory, counts the launch by kind (torch_tpu._C._launch_counts()) and names it for a profiler.

Before: fused-eager traces (as one program or op by op), storage growth and check folds called the runtime's
execute themselves: a fused trace whose results did not fit on the device ran anyway, past TORCH_TPU_MEMORY_LIMIT.
"""
import torch
import torch_tpu


def _counts():
    torch.tpu.synchronize()
    return dict(torch_tpu._C._launch_counts())


def _delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def _step(x, w):
    return torch.relu(x @ w + 1.0).sum(0)


def test_every_launch_is_counted_by_kind():
    x = torch.randn(8, 16).to("tpu")
    w = torch.randn(16, 4).to("tpu")
    before_dev = torch_tpu._C._launch_count(0)
    before = _counts()
    y = _step(x, w)
    y.cpu()
    d = _delta(before, _counts())
    # Three eager ops (mm+add may fuse into addmm: at least two), and the device's own count agrees.
    assert d.get("eager", 0) >= 2, d
    assert sum(d.values()) == torch_tpu._C._launch_count(0) - before_dev, d
    torch.testing.assert_close(y.cpu(), torch.relu(x.cpu() @ w.cpu() + 1.0).sum(0))


def test_fused_programs_and_their_ops_go_through_the_launch():
    x = torch.randn(8, 16).to("tpu")
    w = torch.randn(16, 4).to("tpu")
    expected = torch.relu(x.cpu() @ w.cpu() + 1.0).sum(0)
    prev = torch_tpu.eager_mode()
    torch_tpu.set_eager_mode("fused")
    torch_tpu._C._fused_set_speed_check(0, 0.0)
    try:
        s0 = torch_tpu.cache_stats()["fused"]
        disk0 = torch_tpu.cache_stats()["disk"]["hits"]
        before = _counts()
        for _ in range(4):  # seen (op by op), compiled in the background, then launched as one program
            torch.testing.assert_close(_step(x, w).cpu(), expected)
            torch_tpu._C._fused_wait()
        d = _delta(before, _counts())
    finally:
        torch_tpu._C._fused_set_speed_check(-1, 0.0)
        torch_tpu.set_eager_mode(prev)
    assert d.get("fused", 0) >= 1, d       # the trace as one program
    # the first sighting, run op by op, unless the disk cache already held the trace's program (then even the first
    # sighting launches it)
    assert d.get("eager", 0) >= 2 or torch_tpu.cache_stats()["disk"]["hits"] > disk0, d
    s1 = torch_tpu.cache_stats()["fused"]
    assert d["fused"] == s1["hits"] - s0["hits"], (d, s0, s1)


def test_fused_trace_beyond_the_memory_limit_raises_oom(run_python):
    run_python(
        """
        import torch, torch_tpu
        MiB = 1 << 20
        x = torch.ones(8 * MiB, dtype=torch.float32, device="tpu")  # 32 MiB of 64
        torch_tpu.set_eager_mode("fused")
        y = x * 2  # recorded: its 32 MiB result does not fit, and the launch at the synchronization point says so
        try:
            torch.tpu.synchronize()
        except torch.OutOfMemoryError as e:
            assert "Tried to allocate 32.00 MiB" in str(e), e
        else:
            raise AssertionError("a fused launch beyond the limit succeeded")
        z = x[: 2 * MiB] * 2  # 8 MiB fits
        assert z[5].item() == 2.0
        print("OK")
        """,
        env={"TORCH_TPU_MEMORY_LIMIT": "64M"},
    )
