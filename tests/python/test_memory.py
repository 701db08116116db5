"""The allocation contract (csrc/core/memory.h): an allocation the device cannot hold fails at the allocating call
with torch.OutOfMemoryError naming the requested size, and memory_allocated / max_memory_allocated / mem_get_info
count a tensor from its allocation (tpu storages get their device buffer lazily).

Before: torch.empty(2**40, device="tpu") succeeded and reported 0 bytes allocated; running out of memory was a plain
RuntimeError at first use, which code catching torch.OutOfMemoryError (accelerate's find_executable_batch_size)
cannot handle.
"""
import gc

import pytest
import torch


def _settle() -> int:
    gc.collect()
    torch.tpu.synchronize()
    return torch.tpu.memory_allocated()


def test_impossible_allocation_fails_at_the_call():
    with pytest.raises(torch.OutOfMemoryError, match=r"tpu out of memory\. Tried to allocate 4\.00 TiB"):
        torch.empty(2**40, device="tpu")
    with pytest.raises(torch.OutOfMemoryError, match=r"Tried to allocate"):
        torch.zeros(2**38, 4, dtype=torch.float64, device="tpu")
    # nothing was kept
    torch.testing.assert_close((torch.ones(3, device="tpu") * 2).cpu(), torch.full((3,), 2.0))


def test_empty_tensor_counts_as_allocated_at_once():
    base = _settle()
    x = torch.empty(1 << 20, device="tpu")  # 4 MiB, no device buffer yet
    assert _settle() == base + (4 << 20)
    assert torch.tpu.max_memory_allocated() >= base + (4 << 20)
    x.fill_(1.0)  # the reservation becomes the buffer: same count
    assert _settle() == base + (4 << 20)
    y = torch.empty(1 << 20, device="tpu")
    assert _settle() == base + (8 << 20)
    del x, y
    assert _settle() == base


def test_resize_grows_on_the_device_and_counts():
    base = _settle()
    x = torch.arange(4.0, device="tpu")
    x.resize_(1 << 18)  # 1 MiB
    assert _settle() == base + (1 << 20)
    torch.testing.assert_close(x[:4].cpu(), torch.arange(4.0))
    del x
    assert _settle() == base


def test_memory_limit_oom_contract(run_python):
    run_python(
        """
        import gc, torch, torch_tpu
        MiB = 1 << 20
        free, total = torch.tpu.mem_get_info()
        assert total == 64 * MiB, total
        assert torch.tpu.memory_stats()["bytes_limit"] == 64 * MiB
        x = torch.ones(8 * MiB, dtype=torch.float32, device="tpu")  # 32 MiB
        free2, _ = torch.tpu.mem_get_info()
        assert free2 <= free - 32 * MiB, (free, free2)
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="tpu")
        except torch.OutOfMemoryError as e:
            assert "Tried to allocate 40.00 MiB" in str(e) and "TORCH_TPU_MEMORY_LIMIT" in str(e), e
        else:
            raise AssertionError("allocation beyond the limit succeeded")
        try:
            y = x * 2  # its result does not fit either: the launch fails
        except torch.OutOfMemoryError as e:
            assert "Tried to allocate 32.00 MiB" in str(e), e
        else:
            raise AssertionError("launch beyond the limit succeeded")
        z = x[: 2 * MiB] * 2  # 8 MiB fits
        assert z[5].item() == 2.0
        del x, z
        gc.collect()

        # accelerate's find_executable_batch_size reacts to it: halve until it fits
        from accelerate.utils import find_executable_batch_size
        tried = []
        @find_executable_batch_size(starting_batch_size=64, reduce_batch_size_fn=lambda: tried[-1] // 2)
        def run(batch_size):
            tried.append(batch_size)
            w = torch.ones(batch_size * MiB // 4, device="tpu")  # batch_size MiB
            return (w + 1).sum().item()
        result = run()
        assert tried == [64, 32, 16], tried
        assert result == 2 * 16 * MiB / 4, result
        print("OK")
        """,
        env={"TORCH_TPU_MEMORY_LIMIT": "64M"},
    )
