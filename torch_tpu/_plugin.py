"""PJRT plugin discovery.

Finds the PJRT plugin (a shared library exporting ``GetPjrtApi``) that torch-tpu runs on, and the
``PJRT_Client_Create`` options to pass it. Nothing here imports the plugin packages themselves: their
location is found with :func:`importlib.util.find_spec`, which does not execute them.

Order:

1. ``$TORCH_TPU_PJRT_PLUGIN`` -- a path to a plugin ``.so`` (an error if it does not exist). The words
   ``tpu``, ``cuda`` and ``cpu`` select that installed plugin instead of a path.
2. ``libtpu`` (``libtpu/libtpu.so``).
3. ``jax-cuda13-pjrt``, then ``jax-cuda12-pjrt`` (``jax_plugins/xla_cuda1X/xla_cuda_plugin.so``).
4. ``xla-cpu-pjrt`` (``xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so``).

Options: the CPU plugin gets ``cpu_device_count = $TORCH_TPU_NUM_DEVICES`` (default 1); the CUDA plugin gets
``preallocate = False`` (and ``visible_devices = [0..n-1]`` when ``$TORCH_TPU_NUM_DEVICES`` is set);
``$TORCH_TPU_PJRT_OPTIONS="name=value,name=value"`` adds or overrides any option (ints, floats, ``true`` /
``false``, ``1:2:3`` for a list of ints, anything else a string).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Dict, List, Optional, Tuple, Union

__all__ = ["PluginNotFoundError", "find_plugin", "parse_options"]

OptionValue = Union[bool, int, float, str, List[int]]

ENV_PLUGIN = "TORCH_TPU_PJRT_PLUGIN"
ENV_OPTIONS = "TORCH_TPU_PJRT_OPTIONS"
ENV_NUM_DEVICES = "TORCH_TPU_NUM_DEVICES"

INSTALL_HINT = (
    "Install a PJRT plugin: `pip install xla-cpu-pjrt` (CPU), `pip install libtpu` (Cloud TPU) or "
    "`pip install jax-cuda13-pjrt` (NVIDIA GPU); or point TORCH_TPU_PJRT_PLUGIN at a PJRT plugin .so."
)

# (kind, top-level package, path of the .so inside the package directory), in order of preference.
_KNOWN: Tuple[Tuple[str, str, str], ...] = (
    ("tpu", "libtpu", "libtpu.so"),
    ("cuda", "jax_plugins", os.path.join("xla_cuda13", "xla_cuda_plugin.so")),
    ("cuda", "jax_plugins", os.path.join("xla_cuda12", "xla_cuda_plugin.so")),
    ("cpu", "xla_plugins", os.path.join("xla_cpu_pjrt", "xla_cpu_pjrt.so")),
)


class PluginNotFoundError(RuntimeError):
    """No usable PJRT plugin was found (or ``$TORCH_TPU_PJRT_PLUGIN`` names a missing file)."""


def _package_dirs(package: str) -> List[str]:
    """Directories of a top-level (possibly namespace) package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [str(p) for p in spec.submodule_search_locations]


def _find_known(kinds: Optional[Tuple[str, ...]] = None) -> Optional[Tuple[str, str]]:
    for kind, package, rel in _KNOWN:
        if kinds is not None and kind not in kinds:
            continue
        for d in _package_dirs(package):
            path = os.path.join(d, rel)
            if os.path.isfile(path):
                return path, kind
    return None


def _kind_of_path(path: str) -> str:
    """Best guess at what an explicitly named plugin is, from its file name (decides default options)."""
    name = os.path.basename(path).lower()
    if name == "libtpu.so" or name.startswith("libtpu"):
        return "tpu"
    if name in ("xla_cpu_pjrt.so", "pjrt_c_api_cpu_plugin.so", "libpjrt_cpu.so"):
        return "cpu"
    if name in ("xla_cuda_plugin.so", "pjrt_c_api_gpu_plugin.so", "libpjrt_cuda.so"):
        return "cuda"
    return "custom"


def _parse_value(text: str) -> OptionValue:
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if ":" in s:
        parts = s.split(":")
        try:
            return [int(p) for p in parts]
        except ValueError:
            return s
    try:
        return int(s)
    except ValueError:
        pass
    if low.startswith(("0x", "-0x")):
        try:
            return int(s, 16)
        except ValueError:
            return s
    try:
        return float(s)
    except ValueError:
        return s


def parse_options(text: Optional[str]) -> Dict[str, OptionValue]:
    """Parse ``"name=value,name=value"`` into a dict (see the module docstring for value types)."""
    out: Dict[str, OptionValue] = {}
    if not text:
        return out
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"{ENV_OPTIONS}: expected name=value, got {item!r}")
        name, value = item.split("=", 1)
        name = name.strip()
        if not name:
            raise ValueError(f"{ENV_OPTIONS}: empty option name in {item!r}")
        out[name] = _parse_value(value)
    return out


def _num_devices_env() -> Optional[int]:
    raw = os.environ.get(ENV_NUM_DEVICES)
    if raw is None or raw.strip() == "":
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_NUM_DEVICES} must be an integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"{ENV_NUM_DEVICES} must be >= 1, got {n}")
    return n


def default_options(kind: str) -> Dict[str, OptionValue]:
    opts: Dict[str, OptionValue] = {}
    n = _num_devices_env()
    if kind == "cpu":
        opts["cpu_device_count"] = n if n is not None else 1
    elif kind == "cuda":
        opts["preallocate"] = False
        if n is not None:
            opts["visible_devices"] = list(range(n))
    return opts


def find_plugin() -> Tuple[str, str, Dict[str, OptionValue]]:
    """Return ``(path, kind, options)`` for the plugin to use; kind is tpu, cuda, cpu or custom.

    Raises :class:`PluginNotFoundError` when there is none, and ``ValueError`` for malformed settings.
    """
    env = os.environ.get(ENV_PLUGIN, "").strip()
    if env:
        if env.lower() in ("tpu", "cuda", "cpu"):
            found = _find_known((env.lower(),))
            if found is None:
                raise PluginNotFoundError(
                    f"{ENV_PLUGIN}={env} but no {env} PJRT plugin is installed. {INSTALL_HINT}"
                )
            path, kind = found
        else:
            path = os.path.abspath(os.path.expanduser(env))
            if not os.path.isfile(path):
                raise PluginNotFoundError(
                    f"{ENV_PLUGIN}={env}: no such file. Unset it to use an installed plugin. {INSTALL_HINT}"
                )
            kind = _kind_of_path(path)
    else:
        found = _find_known()
        if found is None:
            raise PluginNotFoundError(f"torch_tpu found no PJRT plugin. {INSTALL_HINT}")
        path, kind = found
    options = default_options(kind)
    options.update(parse_options(os.environ.get(ENV_OPTIONS)))
    return path, kind, options
