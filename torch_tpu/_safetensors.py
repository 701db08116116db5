"""``safetensors.torch.load_file(..., device="tpu")``: load on the host, then move the tensors to the device.

safetensors' Python binding parses its ``device`` argument into a fixed list of device kinds (cpu, cuda, mps, npu,
xpu, xla, hpu, mlu, musa) in its Rust extension and raises ``SafetensorError: device tpu is invalid`` for any other,
before a tensor is read; nothing registered with PyTorch reaches that check. Diffusers' disk offloading
(``enable_group_offload(..., offload_to_disk_path=...)`` without streams) loads each group with
``safetensors.torch.load_file(path, device=<onload device type>)``, and its model loading passes its
``map_location`` the same way.

When ``safetensors.torch`` is imported, its ``load_file`` is wrapped: a tpu device ("tpu", "tpu:1",
``torch.device("tpu", 1)``) loads the file on the CPU (safetensors' own path, memory-mapped) and copies each tensor
to the device with ``Tensor.to`` (one host-to-device transfer per tensor, as safetensors does for CUDA); every other
device goes to safetensors unchanged. ``TORCH_TPU_SAFETENSORS_SHIM=0`` leaves safetensors untouched.

Either upstream change removes this shim: safetensors accepting any device type PyTorch knows (its binding's device
parser passing an unknown type through to ``torch.device`` instead of rejecting it), or Diffusers'
``ModuleGroup._onload_from_disk`` loading to "cpu" and moving with ``.to(self.onload_device)``, as its stream path
already does.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import torch

from . import _settings

_MARK = "_torch_tpu_wrapped"


def _tpu_device(device: Any) -> Optional[torch.device]:
    if isinstance(device, torch.device):
        return device if device.type == "tpu" else None
    if isinstance(device, str) and (device == "tpu" or device.startswith("tpu:")):
        return torch.device(device)
    return None


def _wrap(module: Any) -> None:
    load_file = getattr(module, "load_file", None)
    if load_file is None or getattr(load_file, _MARK, False):
        return

    @functools.wraps(load_file)
    def tpu_aware_load_file(filename: Any, device: Any = "cpu", *args: Any, **kwargs: Any) -> Any:
        dev = _tpu_device(device)
        if dev is None:
            return load_file(filename, device, *args, **kwargs)
        tensors = load_file(filename, "cpu", *args, **kwargs)
        return {name: t.to(dev) for name, t in tensors.items()}

    setattr(tpu_aware_load_file, _MARK, True)
    module.load_file = tpu_aware_load_file


def _install() -> None:
    r"""Wrap ``safetensors.torch.load_file`` now if it is imported, else right after it is (never importing it)."""
    if not _settings.get("TORCH_TPU_SAFETENSORS_SHIM"):
        return
    from .api import _when_imported

    _when_imported("safetensors.torch", _wrap, "tpu devices for safetensors.torch.load_file")
