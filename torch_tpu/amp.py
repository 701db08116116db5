"""``torch.tpu.amp``: automatic mixed precision on the tpu device.

``torch.autocast("tpu", dtype=torch.bfloat16)`` is the primary spelling; :class:`autocast` here is the
``torch.cuda.amp.autocast``-style shorthand, defaulting to bfloat16 (the TPU's native low precision).
"""

from __future__ import annotations

from typing import List, Optional

import torch

__all__ = ["autocast", "GradScaler", "get_amp_supported_dtype"]


def get_amp_supported_dtype() -> List[torch.dtype]:
    r"""Dtypes ``torch.autocast("tpu", dtype=...)`` accepts."""
    return [torch.bfloat16, torch.float16, torch.float32]


class autocast(torch.amp.autocast_mode.autocast):
    r"""``torch.autocast("tpu", ...)`` with bfloat16 as the default dtype."""

    def __init__(
        self,
        enabled: bool = True,
        dtype: Optional[torch.dtype] = torch.bfloat16,
        cache_enabled: bool = True,
    ) -> None:
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    r"""``torch.amp.GradScaler("tpu", ...)`` (only needed for float16; bfloat16 needs no loss scaling)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "tpu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
