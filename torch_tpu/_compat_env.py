"""TorchTPU's environment variables, read as aliases of this package's own.

Code and launch scripts written for Google's TorchTPU set its variables; each is mapped onto the setting of this
package that does the same thing. ONE precedence rule: **this package's own variable wins** when both are set (a
warning names both when they disagree); otherwise the TorchTPU variable sets ours (in ``os.environ``, before the
C++ runtime or the PJRT plugin reads anything). A variable with no equivalent here is named in a warning.

=====================================================  ===========================================================
TorchTPU                                               here
=====================================================  ===========================================================
``TPU_LAUNCH_BLOCKING=1``                              ``TORCH_TPU_LAUNCH_BLOCKING=1``
``TORCH_TPU_DEFER_AND_FUSE=1`` / ``TPU_DEFER_AND_FUSE``  ``TORCH_TPU_EAGER_MODE=fused`` (``0``: ``strict``)
``TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT=<dir>``       ``TORCH_TPU_CACHE_DIR=<dir>`` (a ``gs://``-style URL: warning,
                                                       no remote cache here)
``TORCH_TPU_TIER2_COMPILATION_CACHE=<name>``           ``TORCH_TPU_CACHE_DIR=/dev/shm/torch_tpu_cache/<name>`` when
                                                       no tier-3 root is set (one disk tier here: with both, tier 3
                                                       is used and a warning says tier 2 is not)
``TORCH_TPU_INTERNAL_XLA_OPTIONS=name=value,...``      ``XLA_FLAGS`` entries ``--name=value`` (``xla_optimization_level
                                                       =O<n>`` -> ``--xla_backend_optimization_level=<n>``); a name
                                                       the plugin does not know is dropped with a warning
=====================================================  ===========================================================
"""

from __future__ import annotations

import mmap
import os
import re
import warnings
from typing import Dict, List, MutableMapping, Optional, Tuple

__all__ = ["apply", "apply_xla_options", "TIER2_ROOT"]

TIER2_ROOT = "/dev/shm/torch_tpu_cache"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _warn(msg: str) -> None:
    warnings.warn("torch_tpu: " + msg, UserWarning, stacklevel=3)


def _alias(env: MutableMapping[str, str], theirs: str, ours: str, value: str, applied: Dict[str, str]) -> None:
    r"""Set ``ours`` to ``value`` (derived from ``theirs``) unless ``ours`` is set: then ours wins."""
    current = env.get(ours)
    if current is not None and current != "":
        if current != value:
            _warn(f"{theirs}={env.get(theirs)!r} is ignored: {ours}={current!r} is set and takes precedence")
        return
    env[ours] = value
    applied[ours] = value


def _flag(env: MutableMapping[str, str], name: str) -> Optional[bool]:
    raw = env.get(name)
    if raw is None:
        return None
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    _warn(f"{name}={raw!r} is not a boolean (1/0, true/false); ignored")
    return None


def apply(environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, str]:
    r"""Map TorchTPU's variables in ``environ`` (default ``os.environ``) onto ours; returns what it set.

    Called by ``import torch_tpu`` before the extension or the plugin reads its settings.
    """
    env = os.environ if environ is None else environ
    applied: Dict[str, str] = {}

    blocking = _flag(env, "TPU_LAUNCH_BLOCKING")
    if blocking is not None:
        _alias(env, "TPU_LAUNCH_BLOCKING", "TORCH_TPU_LAUNCH_BLOCKING", "1" if blocking else "0", applied)

    for name in ("TORCH_TPU_DEFER_AND_FUSE", "TPU_DEFER_AND_FUSE"):
        fuse = _flag(env, name)
        if fuse is not None:
            _alias(env, name, "TORCH_TPU_EAGER_MODE", "fused" if fuse else "strict", applied)
            break

    tier3 = env.get("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", "").strip()
    tier2 = env.get("TORCH_TPU_TIER2_COMPILATION_CACHE", "").strip()
    cache_dir: Optional[Tuple[str, str]] = None  # (their variable, directory)
    if tier3:
        if tier3.startswith("file://"):
            tier3 = tier3[len("file://"):]
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", tier3):
            _warn(
                f"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT={tier3!r}: a remote compilation cache has no equivalent "
                "here (the disk cache is a local or mounted directory, TORCH_TPU_CACHE_DIR); the default cache "
                "directory is used"
            )
        else:
            cache_dir = ("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", tier3)
    if tier2:
        tier2_dir = tier2 if os.path.isabs(tier2) else os.path.join(TIER2_ROOT, tier2)
        if cache_dir is None:
            cache_dir = ("TORCH_TPU_TIER2_COMPILATION_CACHE", tier2_dir)
        else:
            _warn(
                f"TORCH_TPU_TIER2_COMPILATION_CACHE={tier2!r} is not used: torch_tpu has one disk cache tier, and "
                f"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT ({cache_dir[1]}) is it"
            )
    if cache_dir is not None:
        _alias(env, cache_dir[0], "TORCH_TPU_CACHE_DIR", cache_dir[1], applied)
    return applied


def _plugin_knows(plugin_path: Optional[str], names: List[str]) -> Dict[str, bool]:
    r"""Whether the plugin binary defines each XLA flag name (its flag table holds the names as C strings).

    Unknown names in ``XLA_FLAGS`` abort the process inside XLA, so they are checked before they are passed on.
    Without a readable plugin every name counts as known.
    """
    if not plugin_path or not os.path.isfile(plugin_path):
        return {n: True for n in names}
    try:
        with open(plugin_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return {n: m.find(n.encode() + b"\0") >= 0 for n in names}
    except (OSError, ValueError):
        return {n: True for n in names}


def _xla_flag_names(flags: str) -> Dict[str, str]:
    out = {}
    for tok in flags.split():
        if tok.startswith("--"):
            k, _, v = tok[2:].partition("=")
            out[k] = v
    return out


def parse_xla_options(text: str) -> List[Tuple[str, str]]:
    r"""``name=value`` entries of ``TORCH_TPU_INTERNAL_XLA_OPTIONS`` (separated by commas or spaces; a leading
    ``--`` is allowed), in order. ``xla_optimization_level=O<n>`` becomes ``xla_backend_optimization_level=<n>``."""
    entries: List[Tuple[str, str]] = []
    for tok in re.split(r"[,\s]+", text.strip()):
        if not tok:
            continue
        tok = tok[2:] if tok.startswith("--") else tok
        name, sep, value = tok.partition("=")
        if not sep:
            value = "true"
        if name == "xla_optimization_level":
            m = re.fullmatch(r"[oO]?([0-3])", value)
            if not m:
                raise ValueError(f"xla_optimization_level must be O0..O3, got {value!r}")
            name, value = "xla_backend_optimization_level", m.group(1)
        entries.append((name, value))
    return entries


def apply_xla_options(plugin_path: Optional[str], environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, str]:
    r"""``TORCH_TPU_INTERNAL_XLA_OPTIONS`` as ``XLA_FLAGS`` entries (before the plugin loads; ``XLA_FLAGS`` is part
    of the disk cache's key). An entry ``XLA_FLAGS`` already sets keeps its ``XLA_FLAGS`` value (ours wins)."""
    env = os.environ if environ is None else environ
    text = env.get("TORCH_TPU_INTERNAL_XLA_OPTIONS", "")
    if not text.strip():
        return {}
    try:
        entries = parse_xla_options(text)
    except ValueError as e:
        _warn(f"TORCH_TPU_INTERNAL_XLA_OPTIONS={text!r} ignored: {e}")
        return {}
    known = _plugin_knows(plugin_path, [n for n, _ in entries])
    flags = env.get("XLA_FLAGS", "")
    present = _xla_flag_names(flags)
    added: Dict[str, str] = {}
    for name, value in entries:
        if not known.get(name, False):
            _warn(
                f"TORCH_TPU_INTERNAL_XLA_OPTIONS: the PJRT plugin ({plugin_path}) has no XLA option {name!r}; "
                "it is ignored"
            )
            continue
        if name in present:
            if present[name] != value:
                _warn(f"TORCH_TPU_INTERNAL_XLA_OPTIONS: {name}={value} is ignored: XLA_FLAGS sets "
                      f"--{name}={present[name]} and takes precedence")
            continue
        added[name] = value
        present[name] = value
    if added:
        extra = " ".join(f"--{k}={v}" for k, v in added.items())
        env["XLA_FLAGS"] = (flags + " " + extra).strip()
    return added


def xla_flag(name: str, environ: Optional[MutableMapping[str, str]] = None) -> Optional[str]:
    r"""The value ``XLA_FLAGS`` gives flag ``name`` (None if unset)."""
    env = os.environ if environ is None else environ
    return _xla_flag_names(env.get("XLA_FLAGS", "")).get(name)


def set_xla_flag(name: str, value: str, environ: Optional[MutableMapping[str, str]] = None) -> None:
    r"""Set ``--name=value`` in ``XLA_FLAGS`` (replacing an earlier value of the same flag)."""
    env = os.environ if environ is None else environ
    toks = [t for t in env.get("XLA_FLAGS", "").split() if not (t == f"--{name}" or t.startswith(f"--{name}="))]
    toks.append(f"--{name}={value}")
    env["XLA_FLAGS"] = " ".join(toks)
