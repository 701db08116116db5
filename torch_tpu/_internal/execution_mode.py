"""``torch_tpu._internal.execution_mode``: TorchTPU's eager-mode API over this package's eager modes.

=====================================  ===========================================================================
TorchTPU                               here
=====================================  ===========================================================================
``EagerMode.DEFER_NEVER`` (default)    strict eager mode: every op launched when called, asynchronously
``EagerMode.DEFER_NEVER_AND_LAUNCH_    strict eager mode, every launch waiting for its results (what
BLOCKING``                             ``TORCH_TPU_LAUNCH_BLOCKING=1`` does): errors surface at the failing op
``EagerMode.DEFER_AND_FUSE``           fused eager mode: ops recorded and launched as one cached program at the next
                                       synchronization point (``torch_tpu.set_eager_mode("fused")``)
``EagerMode.INTERNAL_DEFER_ALL``       fused eager mode as well (every op with a lowering is deferred there)
=====================================  ===========================================================================

``set_eager_mode(mode)`` switches the mode for the process; used as a context manager (``with
set_eager_mode(mode): ...``) it restores the previous mode on exit, as does ``eager_mode(mode)``. Assigning
``execution_mode.eager_mode = EagerMode.X`` switches globally. Switching launches whatever was recorded.
``cpu_fallback_mode(False)`` makes an op without a lowering raise instead of running on the CPU (our
``TORCH_TPU_FALLBACK_STRICT``). The older names ``DeferMode`` / ``defer_mode`` / ``set_defer_mode`` are aliases.
"""

from __future__ import annotations

import contextlib
import enum
import sys
import types
from typing import Any, Iterator, Union

__all__ = [
    "DeferMode",
    "EagerMode",
    "cpu_fallback_mode",
    "defer_mode",
    "eager_mode",
    "enable_cpu_fallback",
    "get_defer_mode",
    "get_eager_mode",
    "is_cpu_fallback_enabled",
    "set_defer_mode",
    "set_eager_mode",
]


class EagerMode(enum.Enum):
    r"""TorchTPU's execution modes (see the module docstring for what each one is here)."""

    DEFER_AND_FUSE = "DEFER_AND_FUSE"
    INTERNAL_DEFER_ALL = "INTERNAL_DEFER_ALL"
    DEFER_NEVER = "DEFER_NEVER"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "DEFER_NEVER_AND_LAUNCH_BLOCKING"


DeferMode = EagerMode

_OURS = {
    EagerMode.DEFER_NEVER: ("strict", False),
    EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING: ("strict", True),
    EagerMode.DEFER_AND_FUSE: ("fused", False),
    EagerMode.INTERNAL_DEFER_ALL: ("fused", False),
}


def _C() -> Any:
    from torch_tpu import _C as C

    return C


def _coerce(mode: Union[EagerMode, str]) -> EagerMode:
    if isinstance(mode, EagerMode):
        return mode
    if isinstance(mode, str):
        key = mode.strip()
        if key.upper() in EagerMode.__members__:
            return EagerMode[key.upper()]
        if key.lower() == "strict":
            return EagerMode.DEFER_NEVER
        if key.lower() == "fused":
            return EagerMode.DEFER_AND_FUSE
    name = getattr(mode, "name", None)  # another library's enum with the same member names
    if isinstance(name, str) and name in EagerMode.__members__:
        return EagerMode[name]
    raise ValueError(
        f"eager mode must be one of {[m.name for m in EagerMode]} (or 'strict' / 'fused'), got {mode!r}"
    )


_requested: Union[EagerMode, None] = None  # the mode last set here (INTERNAL_DEFER_ALL and DEFER_AND_FUSE share ours)


def get_eager_mode() -> EagerMode:
    r"""The current mode: the one last set through this module while it is still in force, else DEFER_AND_FUSE
    (fused), DEFER_NEVER_AND_LAUNCH_BLOCKING (strict, launches waiting) or DEFER_NEVER (strict)."""
    C = _C()
    ours = (str(C._eager_mode()), bool(C._launch_blocking()) and str(C._eager_mode()) == "strict")
    if _requested is not None and _OURS[_requested] == ours:
        return _requested
    if ours[0] == "fused":
        return EagerMode.DEFER_AND_FUSE
    return EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING if ours[1] else EagerMode.DEFER_NEVER


def _apply(mode: EagerMode) -> None:
    global _requested
    ours, blocking = _OURS[mode]
    C = _C()
    C._set_eager_mode(ours)  # launches what was recorded when it switches
    C._set_launch_blocking(blocking)
    _requested = mode


class _ModeSwitch:
    r"""What :func:`set_eager_mode` returns: the switch is already done; as a context manager it restores the
    previous mode on exit."""

    def __init__(self, previous: EagerMode, mode: EagerMode) -> None:
        self.previous = previous
        self.mode = mode

    def __enter__(self) -> EagerMode:
        return self.mode

    def __exit__(self, *exc: Any) -> bool:
        _apply(self.previous)
        return False

    def __repr__(self) -> str:
        return f"<eager mode {self.mode.name} (was {self.previous.name})>"


def set_eager_mode(eager_mode: Union[EagerMode, str]) -> _ModeSwitch:
    r"""Switch the eager mode now; ``with set_eager_mode(m): ...`` restores the previous mode after the block."""
    mode = _coerce(eager_mode)
    previous = get_eager_mode()
    _apply(mode)
    return _ModeSwitch(previous, mode)


@contextlib.contextmanager
def _eager_mode_context(mode: Union[EagerMode, str]) -> Iterator[EagerMode]:
    r"""``with eager_mode(EagerMode.DEFER_AND_FUSE): ...``: the mode for the block, the previous one after it."""
    target = _coerce(mode)
    previous = get_eager_mode()
    _apply(target)
    try:
        yield target
    finally:
        _apply(previous)


defer_mode = _eager_mode_context
set_defer_mode = set_eager_mode
get_defer_mode = get_eager_mode


def enable_cpu_fallback(enabled: bool) -> None:
    r"""False: an op without a tpu lowering raises instead of running on the CPU (``torch_tpu.set_fallback_strict``)."""
    _C()._set_fallback_strict(not bool(enabled))


def is_cpu_fallback_enabled() -> bool:
    r"""Whether ops without a tpu lowering run on the CPU (True) or raise (False)."""
    return not bool(_C()._fallback_strict())


@contextlib.contextmanager
def cpu_fallback_mode(enabled: bool) -> Iterator[None]:
    r"""CPU fallback on (True) or off (False: such ops raise) for the block."""
    previous = is_cpu_fallback_enabled()
    enable_cpu_fallback(enabled)
    try:
        yield
    finally:
        enable_cpu_fallback(previous)


class _Module(types.ModuleType):
    r"""Makes ``execution_mode.eager_mode = EagerMode.X`` switch the mode (TorchTPU's global form), while
    ``execution_mode.eager_mode(EagerMode.X)`` stays the context manager."""

    @property
    def eager_mode(self) -> Any:
        return _eager_mode_context

    @eager_mode.setter
    def eager_mode(self, mode: Union[EagerMode, str]) -> None:
        set_eager_mode(mode)


sys.modules[__name__].__class__ = _Module
