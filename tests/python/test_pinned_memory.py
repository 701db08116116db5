"""Pinned host memory for tpu, as CUDA provides it: `pin_memory()`, `empty(..., pin_memory=True)`, the pinned result of
a non_blocking copy to the CPU, DataLoader(pin_memory=True), and `is_pinned()` for any view into a pinned block
(DDP's find_unused_parameters bitmap needs it: test_trainer.py's DDP run uses Trainer's default, which turns it on)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset


def test_pin_memory_and_is_pinned():
    x = torch.randn(5, 3)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p[2:].is_pinned() and p.t().is_pinned()  # views into the block
    assert p.pin_memory().data_ptr() == p.data_ptr()  # already pinned: itself, as on CUDA
    assert torch.empty(4, pin_memory=True).is_pinned()
    assert torch.zeros(2, 2, dtype=torch.int32, pin_memory=True).is_pinned()
    assert torch.empty(0, pin_memory=True).is_pinned()


def test_copies_through_pinned_memory():
    x = torch.randn(64, 7)
    t = x.pin_memory().to("tpu", non_blocking=True)
    assert torch.equal(t.cpu(), x)
    back = t.to("cpu", non_blocking=True)  # CUDA's contract: a non_blocking copy to the CPU lands in pinned memory
    torch.tpu.synchronize()
    assert back.is_pinned() and torch.equal(back, x)
    host = torch.empty(64, 7, pin_memory=True)
    host.copy_(t * 2, non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(host, x * 2)


def test_dataloader_pins_batches():
    data = TensorDataset(torch.randn(10, 3), torch.arange(10))
    batches = list(DataLoader(data, batch_size=4, pin_memory=True))
    assert [b[0].is_pinned() and b[1].is_pinned() for b in batches] == [True] * 3
    got = torch.cat([b[0].to("tpu", non_blocking=True) for b in batches]).cpu()
    assert torch.equal(got, data.tensors[0])
