"""``torch.tpu.topology_aware_mesh``: a rank layout for ``DeviceMesh`` that follows the chips' physical topology.

TorchTPU's semantics: every rank of the initialized process group reports its PJRT device (global id, process
index, and on TPU plugins the chip's ``coords``, ``core_on_chip`` and ``slice_index``); the reports are all-gathered,
so every rank derives the same layout; the result is an int64 tensor of global ranks of shape ``mesh_shape`` (for
``topology="multi_slice"``, elementwise ``dcn_mesh_shape * mesh_shape``), to pass as
``DeviceMesh("tpu", mesh=layout)``. ``mesh_shape`` orders axes by increasing network intensity (the busiest last).

Placement: when every device reports ``coords`` (TPU plugins), JAX's ``mesh_utils`` assigns logical axes to the
physical torus (``create_device_mesh`` / ``create_hybrid_device_mesh``), so logically adjacent ranks are
physically adjacent. Devices without coordinates (the CPU plugin, GPUs) have no physical layout to follow: ranks are
ordered by (slice, process, device id) and laid out row-major, and for ``multi_slice`` each slice (or process, with
``process_is_granule=True``) becomes one block of the outer ``dcn_mesh_shape``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ["topology_aware_mesh", "local_device_attributes"]


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    r"""The part of a ``jax.Device`` that JAX's ``mesh_utils`` reads, for one rank's device."""

    id: int
    coords: Optional[Tuple[int, ...]]
    core_on_chip: int
    device_kind: str
    platform: str
    process_index: int
    slice_index: int


def _ints(text: Any) -> Tuple[int, ...]:
    return tuple(int(v) for v in str(text).split(".") if v.strip() != "")


def local_device_attributes(device: Any = None) -> Dict[str, Any]:
    r"""The PJRT attributes of ``device`` (the current tpu device by default): ``id`` (global device id),
    ``process_index``, ``device_kind``, ``coords`` (None where the plugin reports none), ``core_on_chip``,
    ``slice_index`` and the raw ``attributes``."""
    from . import device as _dev

    _dev._lazy_init()
    idx = _dev._device_index(device)
    raw = dict(_dev._C()._device_attributes(idx))
    attrs = {str(k): str(v) for k, v in dict(raw.get("attributes", {})).items()}
    coords = _ints(attrs["coords"]) if "coords" in attrs else None
    return {
        "id": int(raw["id"]),
        "process_index": int(raw["process_index"]),
        "device_kind": str(raw["device_kind"]),
        "coords": coords,
        "core_on_chip": int(_ints(attrs.get("core_on_chip", "0"))[0] if attrs.get("core_on_chip") else 0),
        "slice_index": int(_ints(attrs.get("slice_index", "0"))[0] if attrs.get("slice_index") else 0),
        "attributes": attrs,
    }


def _gather_device_info() -> List[DeviceInfo]:
    import torch.distributed as dist

    from . import device as _dev

    d = local_device_attributes(_dev.current_device())
    mine = (d["id"], d["coords"], d["core_on_chip"], d["device_kind"], d["process_index"], d["slice_index"])
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    platform = "tpu" if str(d["device_kind"]).upper().startswith("TPU") else str(d["device_kind"]).split(" ")[0]
    return [DeviceInfo(id=int(g[0]), coords=tuple(g[1]) if g[1] is not None else None, core_on_chip=int(g[2]),
                       device_kind=str(g[3]), platform=platform, process_index=int(g[4]), slice_index=int(g[5]))
            for g in gathered]


def _blocks(granules: List[np.ndarray], dcn_mesh_shape: Sequence[int]) -> np.ndarray:
    r"""``granules`` (each of the inner shape) laid out as the blocks of ``dcn_mesh_shape``: the result has shape
    ``dcn * inner`` elementwise, with block ``i`` (row-major over ``dcn_mesh_shape``) holding granule ``i``."""
    inner = granules[0].shape
    stacked = np.stack(granules).reshape(tuple(dcn_mesh_shape) + inner)
    n = len(inner)
    order = [a for i in range(n) for a in (i, n + i)]  # (d0, m0, d1, m1, ...)
    return stacked.transpose(order).reshape(tuple(d * m for d, m in zip(dcn_mesh_shape, inner)))


def arrange(infos: Sequence[DeviceInfo], mesh_shape: Sequence[int], *, topology: str = "single_slice",
            dcn_mesh_shape: Optional[Sequence[int]] = None, process_is_granule: bool = False,
            allow_split_physical_axes: bool = False, contiguous_submeshes: bool = False) -> torch.Tensor:
    r"""The rank layout of the devices ``infos`` (indexed by rank): see :func:`topology_aware_mesh`."""
    mesh_shape = tuple(int(s) for s in mesh_shape)
    world = len(infos)
    if topology not in ("single_slice", "multi_slice"):
        raise ValueError(f"Unknown topology: {topology!r}")
    if len({i.id for i in infos}) != world:
        raise RuntimeError(
            "Duplicate pjrt device ids across torch ranks: expected exactly one torch process (rank) per tpu device. "
            "Give each rank its own device (torch.tpu.set_device) before init_process_group.")
    id_to_rank = {info.id: rank for rank, info in enumerate(infos)}
    if topology == "multi_slice":
        if dcn_mesh_shape is None:
            raise ValueError("topology='multi_slice' requires dcn_mesh_shape")
        dcn = tuple(int(s) for s in dcn_mesh_shape)
        if len(dcn) != len(mesh_shape):
            raise ValueError(f"dcn_mesh_shape {dcn} and mesh_shape {mesh_shape} must have the same number of axes")
        want = math.prod(dcn) * math.prod(mesh_shape)
    else:
        dcn = None
        want = math.prod(mesh_shape)
    if want != world:
        raise ValueError(f"the mesh has {want} positions but the process group has {world} ranks")
    by_id = sorted(infos, key=lambda i: i.id)
    if all(i.coords is not None for i in infos) and infos[0].platform == "tpu":
        from jax.experimental import mesh_utils

        if dcn is not None:
            devs = mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn, devices=by_id,
                                                        process_is_granule=process_is_granule,
                                                        allow_split_physical_axes=allow_split_physical_axes)
        else:
            devs = mesh_utils.create_device_mesh(mesh_shape, devices=by_id, contiguous_submeshes=contiguous_submeshes,
                                                 allow_split_physical_axes=allow_split_physical_axes)
        ranks = np.vectorize(lambda d: id_to_rank[d.id], otypes=[np.int64])(devs)
        return torch.from_numpy(np.ascontiguousarray(ranks))
    ordered = sorted(infos, key=lambda i: (i.slice_index, i.process_index, i.id))
    ranks = np.array([id_to_rank[i.id] for i in ordered], dtype=np.int64)
    if dcn is None:
        return torch.from_numpy(ranks.reshape(mesh_shape).copy())
    key = (lambda i: i.process_index) if process_is_granule else (lambda i: i.slice_index)
    groups: Dict[int, List[int]] = {}
    for info in ordered:
        groups.setdefault(key(info), []).append(id_to_rank[info.id])
    if len(groups) == 1 and math.prod(dcn) > 1:
        # One slice (or process) holding everything: split it into equal consecutive granules.
        per = math.prod(mesh_shape)
        granules = [ranks[g * per:(g + 1) * per].reshape(mesh_shape) for g in range(math.prod(dcn))]
    else:
        if len(groups) != math.prod(dcn):
            raise ValueError(f"dcn_mesh_shape {dcn} needs {math.prod(dcn)} granules, the ranks span {len(groups)} "
                             f"{'processes' if process_is_granule else 'slices'}")
        sizes = {len(v) for v in groups.values()}
        if sizes != {math.prod(mesh_shape)}:
            raise ValueError(f"each granule must hold {math.prod(mesh_shape)} ranks (mesh_shape {mesh_shape}), "
                             f"they hold {sorted(sizes)}")
        granules = [np.array(groups[k], dtype=np.int64).reshape(mesh_shape) for k in sorted(groups)]
    return torch.from_numpy(_blocks(granules, dcn).copy())


_warned = False


def topology_aware_mesh(mesh_shape: Sequence[int], *, topology: str = "single_slice",
                        dcn_mesh_shape: Optional[Sequence[int]] = None, process_is_granule: bool = False,
                        allow_split_physical_axes: bool = False, contiguous_submeshes: bool = False) -> torch.Tensor:
    r"""An int64 tensor of global ranks of shape ``mesh_shape`` (``multi_slice``: ``dcn_mesh_shape * mesh_shape``)
    placing logically adjacent mesh positions on physically adjacent devices; identical on every rank. Pass it
    as ``DeviceMesh("tpu", mesh=...)``. Needs an initialized process group (RuntimeError otherwise). Experimental
    in TorchTPU: warns once."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("topology_aware_mesh() is experimental and may change in the future.", stacklevel=2)
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "PyTorch distributed process group must be initialized before calling topology_aware_mesh "
            "(torch.distributed.init_process_group(\"tpu_dist\")).")
    return arrange(_gather_device_info(), mesh_shape, topology=topology, dcn_mesh_shape=dcn_mesh_shape,
                   process_is_granule=process_is_granule, allow_split_physical_axes=allow_split_physical_axes,
                   contiguous_submeshes=contiguous_submeshes)
