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


def test_torch_accelerator_memory_api_matches_torch_tpu(run_python):
    # PyTorch's device-generic memory API reaches the registered allocator through c10::getDeviceAllocator. Before:
    # "INTERNAL ASSERT FAILED ... Allocator for tpu is not a DeviceAllocator" from every call. tpu is torch's
    # accelerator on TPU and GPU plugins; on the CPU plugin TORCH_TPU_ACCELERATOR=1 makes it so.
    run_python(
        """
        import gc, torch, torch_tpu
        acc = torch.accelerator
        MiB = 1 << 20
        assert acc.current_accelerator() == torch.device("tpu"), acc.current_accelerator()
        acc.empty_cache()

        def same(where):
            gc.collect()
            for dev in (None, 0, "tpu:0", torch.device("tpu", 0)):
                a, t = acc.memory_allocated(dev), torch.tpu.memory_allocated(0)
                assert a == t, (where, dev, a, t)
                assert acc.max_memory_allocated(dev) == torch.tpu.max_memory_allocated(0), where
                assert acc.memory_reserved(dev) == torch.tpu.memory_reserved(0), where
                assert acc.max_memory_reserved(dev) == torch.tpu.max_memory_reserved(0), where
            return acc.memory_allocated()

        base = same("start")
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="tpu")  # counted at allocation
        assert same("empty") == base + 4 * MiB
        y = torch.ones(MiB, device="tpu") * 3  # a launch's result
        assert same("launch") >= base + 8 * MiB
        peak = acc.max_memory_allocated()
        assert peak >= base + 8 * MiB
        del x, y
        assert same("freed") == base
        assert acc.max_memory_allocated() == peak  # the peak stays until reset
        acc.reset_peak_memory_stats()
        assert acc.max_memory_allocated() == acc.memory_allocated() == torch.tpu.max_memory_allocated() == base
        z = torch.zeros(MiB, dtype=torch.uint8, device="tpu")
        torch.tpu.reset_peak_memory_stats()  # one set of peaks behind both APIs
        assert acc.max_memory_allocated() == base + MiB
        del z

        s = acc.memory_stats("tpu:1")  # per device
        assert s["allocated_bytes.all.current"] == torch.tpu.memory_allocated(1)
        s = acc.memory_stats()
        for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                    "active_bytes.all.current", "allocation.all.current", "num_ooms"):
            assert key in s, key
        made = s["allocation.all.allocated"]
        w = [torch.empty(16, device="tpu") for _ in range(3)]
        s2 = acc.memory_stats()
        assert s2["allocation.all.allocated"] == made + 3
        assert s2["allocation.all.current"] == s["allocation.all.current"] + 3
        assert s2["allocated_bytes.all.allocated"] == s["allocated_bytes.all.allocated"] + 3 * 64
        del w
        acc.reset_accumulated_memory_stats()
        assert acc.memory_stats()["allocation.all.allocated"] == 0

        # The limit and torch.OutOfMemoryError are the same as torch.tpu's.
        free, total = acc.get_memory_info()
        assert (free, total) == torch.tpu.mem_get_info() and total == 64 * MiB, (free, total)
        try:
            torch.empty(80 * MiB, dtype=torch.uint8, device="tpu")
        except torch.OutOfMemoryError:
            pass
        assert acc.memory_stats()["num_ooms"] == 1

        # Fused eager: what the recorded ops will allocate counts when the statistics are read.
        torch_tpu.set_eager_mode("fused")
        v = torch.ones(MiB, device="tpu") + 1
        assert same("fused") >= base + 4 * MiB
        torch_tpu.set_eager_mode("strict")
        del v
        acc.empty_cache()
        assert same("empty_cache") == base
        print("OK")
        """,
        env={"TORCH_TPU_ACCELERATOR": "1", "TORCH_TPU_MEMORY_LIMIT": "64M"},
    )
