"""``torch_tpu._internal.sync``: TorchTPU's synchronization and inspection API over this package's runtime.

- :func:`synchronize` ``(tensors=None, wait=False)``: launch what fused eager mode has recorded (the program that
  computes the pending tensors) and, with ``wait=True``, wait until the devices holding ``tensors`` (every
  initialized device when ``tensors`` is None) have finished all work issued so far. In strict mode every op was
  launched already, so only the wait remains.
- :func:`computation_mlir` / :func:`pending_program_text`: the StableHLO text of the program fused eager mode
  would launch now (empty in strict mode or when nothing is recorded); :func:`dump_computation_mlir` writes it to
  a file. The program covers every value still alive, not only the tensors passed (one trace per process here).
- :func:`pending_op_count`: ops recorded and not launched yet.
- :func:`is_materialized` ``(t)``: whether a program computing ``t`` was launched (False only while fused eager
  mode has recorded ``t``'s value and not launched it); :func:`is_materializing`: launched and still running;
  :func:`is_ready`: computed (materialized and finished). CPU tensors are always all three's "done" answer.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, List, Optional, Sequence, Set, Union

import torch

__all__ = [
    "computation_mlir",
    "dump_computation_mlir",
    "is_materialized",
    "is_materializing",
    "is_ready",
    "pending_op_count",
    "pending_program_text",
    "synchronize",
]


def _C() -> Any:
    from torch_tpu import _C as C

    return C


def _unwrap(t: Any) -> torch.Tensor:
    local = getattr(t, "_local_tensor", None)  # DTensor: its shard on this rank
    if isinstance(local, torch.Tensor):
        return local
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"synchronize() takes tensors, a list of tensors or None, got {type(t).__name__}")
    return t


def _flatten(tensors: Union[torch.Tensor, Sequence[Any]]) -> List[torch.Tensor]:
    if isinstance(tensors, torch.Tensor) or hasattr(tensors, "_local_tensor"):
        return [_unwrap(tensors)]
    if isinstance(tensors, (list, tuple)):
        out: List[torch.Tensor] = []
        for t in tensors:
            out.extend(_flatten(t))
        return out
    raise TypeError(f"synchronize() takes tensors, a list of tensors or None, got {type(tensors).__name__}")


def synchronize(tensors: Union[None, torch.Tensor, Sequence[torch.Tensor]] = None, wait: bool = False) -> None:
    r"""Launch the pending (fused-mode) work computing ``tensors`` (all pending work when None); with
    ``wait=True`` also wait for it to finish on their devices (every initialized device when None).

    CPU tensors are always materialized and are skipped.
    """
    from torch_tpu import device as _dev

    devices: Optional[Set[int]] = None
    if tensors is not None:
        devices = set()
        for t in _flatten(tensors):
            if t.device.type == "tpu":
                devices.add(t.device.index if t.device.index is not None else _dev.current_device())
        if not devices:
            return
    if not _dev.is_initialized():
        return  # nothing was ever issued
    C = _C()
    C._fused_flush()  # one trace per process: launching it materializes every pending tensor
    if wait:
        for d in sorted(devices) if devices is not None else range(_dev.device_count()):
            C._synchronize(int(d))


def pending_program_text() -> str:
    r"""StableHLO text of the program fused eager mode would launch now ("" when nothing is recorded)."""
    from torch_tpu import device as _dev

    if not _dev.is_initialized():
        return ""
    return str(_C()._fused_pending_text())


def pending_op_count() -> int:
    r"""Ops recorded by fused eager mode and not launched yet (0 in strict mode)."""
    from torch_tpu import device as _dev

    if not _dev.is_initialized():
        return 0
    return int(_C()._fused_pending_ops())


def computation_mlir(*tensors: Any) -> str:
    r"""TorchTPU's name: the pending program's StableHLO text (see :func:`pending_program_text`). The tensors are
    checked to be tensors; the text covers every live pending value."""
    for t in tensors:
        _flatten(t)
    return pending_program_text()


def dump_computation_mlir(tensors: Iterable[torch.Tensor], file_name: str) -> None:
    r"""Write :func:`computation_mlir` of ``tensors`` to ``file_name`` (creating its directory)."""
    text = computation_mlir(*list(tensors))
    directory = os.path.dirname(file_name)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(file_name, "w") as f:
        f.write(text)


def _state(t: Any) -> int:
    from torch._subclasses.fake_tensor import FakeTensor

    t = _unwrap(t)
    if t.device.type != "tpu" or isinstance(t, FakeTensor):
        return 2
    from torch_tpu import device as _dev

    if not _dev.is_initialized():
        return 2
    return int(_C()._materialization_state(t))


def is_materialized(tensor: torch.Tensor) -> bool:
    r"""Whether ``tensor``'s value has been (or is being) computed by a launched program: False while fused eager
    mode has only recorded the ops computing it (:func:`synchronize` launches them). Does not launch anything."""
    return _state(tensor) != 0


def is_materializing(tensor: torch.Tensor) -> bool:
    r"""Whether the program computing ``tensor`` was launched and has not finished yet (``is_materialized`` and not
    :func:`is_ready`)."""
    return _state(tensor) == 1


def is_ready(tensor: torch.Tensor) -> bool:
    r"""Whether ``tensor``'s value is computed (its program launched and finished). Does not wait."""
    return _state(tensor) == 2
