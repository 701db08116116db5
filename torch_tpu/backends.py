"""``torch.backends.tpu``: build / availability queries for the tpu backend.

Libraries detect the backend through this module (``kernels`` checks ``hasattr(torch.backends, "tpu")``).
"""

from __future__ import annotations

from typing import Any, Dict

__all__ = ["is_built", "is_available", "device_count", "plugin_info"]


def is_built() -> bool:
    r"""True: torch_tpu (and so the tpu backend) is installed."""
    return True


def is_available() -> bool:
    r"""Whether a PJRT plugin is configured and has at least one device."""
    from . import device

    return device.is_available()


def device_count() -> int:
    r"""Number of tpu devices (0 without a usable plugin)."""
    from . import device

    return device.device_count()


def plugin_info() -> Dict[str, Any]:
    r"""The PJRT plugin in use: path, kind, options, api_version, platform_name, platform_version, attributes."""
    from . import _plugin_state, device

    info: Dict[str, Any] = {
        "path": _plugin_state.get("path"),
        "kind": _plugin_state.get("kind"),
        "options": dict(_plugin_state.get("options") or {}),
    }
    if device._plugin_error is not None:
        info["error"] = device._plugin_error
        return info
    from . import _C

    if device.device_count() == 0:  # the plugin failed to start (or has no devices): say why instead of raising
        info["error"] = device._unavailable_message()
        return info
    info.update(dict(_C._plugin_info()))
    return info
