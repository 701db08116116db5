r"""Hugging Face Accelerate picks tpu where Transformers does, so ``Trainer`` works with no environment variable.

Transformers 5.24 chooses ``TrainingArguments.device`` through ``torch.accelerator`` (``is_torch_tpu_available()``:
the current accelerator is tpu and available), so it sends the model to ``tpu:0``. Accelerate 1.15 does not: its
``PartialState`` knows a fixed list of device types (``default_device``: mps, mlu, sdaa, musa, npu, hpu, cuda, xpu,
neuron, else cpu), and its only setting for another device is ``ACCELERATE_TORCH_DEVICE``, which it also applies
under ``use_cpu=True`` (so setting it for everyone would move CPU runs to tpu). Without help, ``Accelerator.prepare``
puts the batches on the CPU while the model is on tpu ("Expected all tensors to be on the same device").

When ``accelerate.state`` is imported, three methods of ``PartialState`` gain a tpu case, each only where Accelerate
itself would fall back to the CPU without being asked to:

* ``default_device`` (used when there is one process, not ``cpu=True`` and no ``ACCELERATE_TORCH_DEVICE``): tpu
  when torch's accelerator is tpu and available (Transformers' own test), instead of cpu.
* ``_prepare_backend`` under ``torchrun`` (``LOCAL_RANK`` set), not ``cpu=True``: where Accelerate finds no device it
  knows it would run every process alone; it now distributes like its CPU data parallelism (``MULTI_CPU``: DDP without
  ``device_ids``) over the ``tpu_dist`` process-group backend (unless a backend, e.g. ``ddp_backend``, is given).
* ``set_device`` for such a run: ``tpu:<local rank % device count>`` instead of the CPU.

``ACCELERATE_TORCH_DEVICE``, ``use_cpu`` / ``cpu=True``, an explicit backend and any device Accelerate knows keep
their meaning.
"""

from __future__ import annotations

import os
from typing import Any

import torch

_MARK = "_torch_tpu_ddp"  # in PartialState's shared state: this run's processes are distributed over tpu_dist


def tpu_is_accelerator() -> bool:
    r"""Transformers' test for tpu (``is_torch_tpu_available``): torch's accelerator is tpu and available."""
    try:
        acc = torch.accelerator.current_accelerator()
        return acc is not None and acc.type == "tpu" and bool(torch.accelerator.is_available())
    except RuntimeError:
        return False


def _patch_state(state_mod: Any) -> None:
    cls = state_mod.PartialState
    if getattr(cls, "_torch_tpu_patched", False):
        return
    from accelerate.utils import DistributedType

    plain_default = cls.default_device
    plain_prepare = cls._prepare_backend
    plain_set_device = cls.set_device

    def default_device(self: Any) -> torch.device:
        device = plain_default.fget(self)
        if device.type == "cpu" and tpu_is_accelerator():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    def _prepare_backend(self: Any, cpu: bool = False, sagemaker_dp: bool = False, backend: Any = None) -> Any:
        chosen, distributed_type = plain_prepare(self, cpu, sagemaker_dp, backend)
        self.__dict__[_MARK] = False
        if (
            distributed_type == DistributedType.NO
            and not cpu
            and not sagemaker_dp
            and int(os.environ.get("LOCAL_RANK", -1)) != -1
            and tpu_is_accelerator()
        ):
            self.__dict__[_MARK] = True
            return (backend or "tpu_dist"), DistributedType.MULTI_CPU
        return chosen, distributed_type

    def set_device(self: Any) -> None:
        if self.device is None and self.__dict__.get(_MARK) and self.distributed_type == DistributedType.MULTI_CPU:
            n = max(torch.tpu.device_count(), 1)
            self.device = torch.device("tpu", self.local_process_index % n)
            torch.tpu.set_device(self.device)
            return
        plain_set_device(self)

    default_device.__doc__ = plain_default.__doc__
    cls.default_device = property(default_device)
    cls._prepare_backend = _prepare_backend
    cls.set_device = set_device
    cls._torch_tpu_patched = True


def _install() -> None:
    r"""Patch ``accelerate.state`` when it is imported (now if it already is); torch_tpu never imports it."""
    from .api import _when_imported

    _when_imported("accelerate.state", _patch_state, "tpu as Hugging Face Accelerate's default device")
