"""``torch_tpu._internal.utils.hardware``: what accelerator this host has, without starting the runtime.

TorchTPU's names (Diffusers' TPU tensor-parallel tests call :func:`get_tpu_device_count` to match ranks to chips).
The count is that of the devices the configured PJRT plugin drives: the TPU chips on the PCI bus for libtpu, the
GPUs for the CUDA plugin, the virtual chips of the CPU plugin (``TORCH_TPU_NUM_DEVICES``, or ``cpu_device_count``
in ``TORCH_TPU_PJRT_OPTIONS``). Once the runtime is up, the plugin's own count is used.
"""

from __future__ import annotations

import enum
import glob
import os
import pathlib
from typing import Dict, List, Optional, Tuple

__all__ = [
    "TpuVersion",
    "get_tpu_device_count",
    "get_tpu_device_name",
    "get_tpu_topology",
    "get_tpu_version",
    "has_nvidia_gpu",
]

_GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id -> generation name.
_TPU_PCI_IDS: Dict[str, str] = {
    "0x005e": "TPU v4",
    "0x0062": "TPU v5p",
    "0x0063": "TPU v5e",
    "0x006f": "TPU v6e",
    "0x0076": "TPU v7",
}
# Single-host chip grids by generation and chip count (X,Y,Z; v7 chips have two cores).
_TOPOLOGIES: Dict[str, Dict[int, str]] = {
    "TPU v4": {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,2,2"},
    "TPU v5p": {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,2,2"},
    "TPU v5e": {1: "1,1,1", 4: "2,2,1", 8: "2,2,2"},
    "TPU v6e": {1: "1,1,1", 4: "2,2,1", 8: "2,4,1"},
    "TPU v7": {2: "1,1,1,2", 4: "1,2,1,2", 8: "2,2,1,2"},
}
_NVIDIA_NODES = ("/dev/nvidiactl", "/dev/dxg")


class TpuVersion(enum.Enum):
    V4 = "TPU v4"
    V5P = "TPU v5p"
    V5E = "TPU v5e"
    V6E = "TPU v6e"
    V7 = "TPU v7"
    UNKNOWN = "TPU"


def _pci_tpus(root: str = "/sys/bus/pci/devices") -> List[str]:
    r"""Generation names of the TPU chips on the PCI bus, one per chip."""
    out: List[str] = []
    try:
        devices = sorted(pathlib.Path(root).iterdir())
    except OSError:
        return out
    for dev in devices:
        try:
            if (dev / "vendor").read_text().strip() != _GOOGLE_PCI_VENDOR:
                continue
            name = _TPU_PCI_IDS.get((dev / "device").read_text().strip())
        except OSError:
            continue
        if name is not None:
            out.append(name)
    return out


def _plugin_kind() -> Optional[str]:
    try:
        from torch_tpu import _plugin_state

        return _plugin_state.get("kind")
    except Exception:  # noqa: BLE001 - before torch_tpu finished importing
        return None


def get_tpu_device_count() -> int:
    r"""Number of devices the tpu backend drives on this host (see the module docstring); never starts the
    runtime."""
    from torch_tpu import _plugin_state, device as _dev

    if _dev.is_initialized():
        return _dev.device_count()
    kind = _plugin_state.get("kind")
    if kind is None:
        return 0
    if kind == "tpu":
        return len(_pci_tpus())
    options = _plugin_state.get("options") or {}
    if kind == "cpu":
        return int(options.get("cpu_device_count", 1))
    if kind == "cuda":
        visible = options.get("visible_devices")
        if visible:
            return len(list(visible))
        return len([p for p in glob.glob("/dev/nvidia[0-9]*") if p[len("/dev/nvidia"):].isdigit()])
    return _dev.device_count()  # another plugin: only it knows


def get_tpu_device_name() -> str:
    r"""``"TPU v6e"``-style name of the host's TPU chips; for other plugins the platform they drive
    (``"cpu"``, ``"cuda"``), and ``"TPU"`` for an unrecognized TPU."""
    kind = _plugin_kind()
    if kind == "tpu" or kind is None:
        chips = _pci_tpus()
        return chips[0] if chips else "TPU"
    return str(kind)


def get_tpu_version() -> TpuVersion:
    r"""The :class:`TpuVersion` of the host's chips (UNKNOWN without a recognized TPU)."""
    try:
        return TpuVersion(get_tpu_device_name())
    except ValueError:
        return TpuVersion.UNKNOWN


def get_tpu_topology(world_size: Optional[int] = None) -> Optional[str]:
    r"""The chip grid (``"2,2,1"``) for ``world_size`` chips (default: all of the host's) of the host's TPU
    generation; None without TPU chips. RuntimeError when the generation has no grid of that size."""
    chips = _pci_tpus()
    if not chips:
        return None
    n = world_size if world_size is not None else len(chips)
    grids = _TOPOLOGIES.get(chips[0], {})
    if n not in grids:
        raise RuntimeError(f"No TPU topology found for count: {n} ({chips[0]} hosts have {sorted(grids)})")
    return grids[n]


def has_nvidia_gpu() -> bool:
    r"""Whether the host exposes an NVIDIA GPU device node."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or any(os.path.exists(p) for p in _NVIDIA_NODES)
