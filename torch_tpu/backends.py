"""``torch.backends.tpu``: build / availability queries for the tpu backend.

Libraries detect the backend through this module (``kernels`` checks ``hasattr(torch.backends, "tpu")``).
"""

from __future__ import annotations

import sys
import types
from typing import Any, Dict

__all__ = ["allow_excess_precision", "is_built", "is_available", "device_count", "plugin_info"]


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


_EXCESS_FLAG = "xla_allow_excess_precision"


def _allow_excess_precision() -> bool:
    from ._compat_env import xla_flag

    v = xla_flag(_EXCESS_FLAG)
    return v is None or v.strip().lower() not in ("false", "0")


def _set_allow_excess_precision(value: bool) -> None:
    from . import _C
    from ._compat_env import set_xla_flag

    value = bool(value)
    if value == _allow_excess_precision():
        return
    if _C._plugin_load_tried():
        raise RuntimeError(
            "torch.backends.tpu.allow_excess_precision can only be changed before the tpu runtime starts: the PJRT "
            "plugin reads its XLA options once, when it loads. Set it at the start of the program (before the first "
            f"tpu tensor), or start the process with XLA_FLAGS=--{_EXCESS_FLAG}={'true' if value else 'false'}."
        )
    set_xla_flag(_EXCESS_FLAG, "true" if value else "false")


class _Module(types.ModuleType):
    r"""``torch.backends.tpu.allow_excess_precision``: whether XLA may keep intermediate results of low-precision
    (bfloat16, float16) computations in higher precision, skipping the rounding between fused ops (XLA's
    ``xla_allow_excess_precision``, on by default). ``False`` makes compiled graphs and fused eager programs round
    every intermediate result to its dtype, as eager mode (one program per op) and the CPU do. It is an XLA option
    of the plugin (``XLA_FLAGS``, part of the disk cache's key), so it can be set only before the runtime starts;
    changing it later raises RuntimeError."""

    @property
    def allow_excess_precision(self) -> bool:
        return _allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: bool) -> None:
        _set_allow_excess_precision(value)


sys.modules[__name__].__class__ = _Module
