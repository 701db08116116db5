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
``$TORCH_TPU_PJRT_OPTIONS="name=value,name=value"`` adds or overrides any option. Options the plugin is known to
take are converted to the type it requires (:data:`KNOWN_OPTIONS`: the CUDA plugin rejects ``memory_fraction=1``
as an integer, so it is sent as the float 1.0); others are read as ints, floats, ``true`` / ``false``, ``1:2:3``
for a list of ints, anything else a string.

Before the CUDA plugin is loaded its CUDA libraries are loaded from the ``nvidia-*`` wheels (``nvidia/cu13/lib``
and friends, as JAX does), since the plugin wheel does not ship them: see :func:`cuda_preload_libraries`.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = [
    "KNOWN_OPTIONS",
    "PluginNotFoundError",
    "coerce_options",
    "cuda_preload_libraries",
    "find_plugin",
    "parse_options",
]

OptionValue = Union[bool, int, float, str, List[int]]

ENV_PLUGIN = "TORCH_TPU_PJRT_PLUGIN"
ENV_OPTIONS = "TORCH_TPU_PJRT_OPTIONS"
ENV_NUM_DEVICES = "TORCH_TPU_NUM_DEVICES"

INSTALL_HINT = (
    "Install a PJRT plugin: `pip install xla-cpu-pjrt` (CPU), `pip install torch-tpu[tpu]` (Cloud TPU: libtpu) or "
    "`pip install torch-tpu[cuda13]` (NVIDIA GPU: jax-cuda13-pjrt and its CUDA libraries); or point "
    "TORCH_TPU_PJRT_PLUGIN at a PJRT plugin .so."
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
    from . import _settings

    return _settings.get(ENV_NUM_DEVICES)  # None when unset; ValueError unless an integer >= 1


# ---------------------------------------------------------------------------------------------------------
# Typed create options
# ---------------------------------------------------------------------------------------------------------

# The PJRT_Client_Create options each known plugin takes, with the PJRT_NamedValue type it requires. A plugin
# rejects an option of the wrong type (the CUDA plugin: "memory_fraction" must be a float), and the CUDA plugin
# rejects names it does not know.
_INTS = "int list"
KNOWN_OPTIONS: Dict[str, Dict[str, Any]] = {
    "cpu": {"cpu_device_count": int},
    "cuda": {
        "platform_name": str,
        "allocator": str,  # default | platform | bfc | cuda_async
        "memory_fraction": float,  # of the device memory the allocator may use, in (0, 1]
        "preallocate": bool,
        "collective_memory_size": int,
        "visible_devices": _INTS,
        "node_id": int,
        "num_nodes": int,
        "enable_mock_nccl": bool,
        "mock_gpu_topology": str,
        "should_stage_host_to_device_transfers": bool,
    },
    # libtpu takes its settings from the environment (LIBTPU_INIT_ARGS, TPU_* variables; see _tpu_env.py).
    "tpu": {},
}
_CUDA_ALLOCATORS = ("default", "platform", "bfc", "cuda_async")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else {bool: "bool", int: "int", float: "float", str: "string"}[t]


def _coerce(kind: str, name: str, value: Any, want: Any) -> OptionValue:
    def bad(extra: str = "") -> ValueError:
        return ValueError(
            f"PJRT option {name!r} of the {kind} plugin must be a {_type_name(want)}, got {value!r}{extra} "
            f"(set through {ENV_OPTIONS} as name=value; lists as 0:1:2)"
        )

    if want is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise bad()
    if want is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip(), 0)
            except ValueError:
                raise bad() from None
        raise bad()
    if want is float:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad() from None
        raise bad()
    if want is str:
        if isinstance(value, (list, tuple)):
            raise bad()
        return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    # int list
    if isinstance(value, bool):
        raise bad()
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        parts = [p for p in value.replace(";", ":").split(":") if p.strip()]
        try:
            return [int(p, 0) for p in parts]
        except ValueError:
            raise bad() from None
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [int(v) for v in value]
    raise bad()


def coerce_options(kind: str, options: Dict[str, Any]) -> Dict[str, OptionValue]:
    """Convert each option the ``kind`` plugin is known to take to the type it requires.

    Raises ``ValueError`` naming the option, the type and the value when a value cannot be converted or is out of
    range. Options the plugin is not known to take keep their type (a plugin version may add options) and draw a
    warning for the CUDA plugin, which rejects names it does not know.
    """
    known = KNOWN_OPTIONS.get(kind, {})
    out: Dict[str, OptionValue] = {}
    for name, value in options.items():
        want = known.get(name)
        if want is None:
            if kind == "cuda":
                import warnings

                warnings.warn(
                    f"torch_tpu: {name!r} is not a create option the CUDA PJRT plugin is known to take "
                    f"(known: {', '.join(sorted(known))}); passing it as {value!r}",
                    stacklevel=3,
                )
            out[name] = value
            continue
        v = _coerce(kind, name, value, want)
        if kind == "cuda" and name == "memory_fraction" and not 0.0 < float(v) <= 1.0:
            raise ValueError(f"PJRT option 'memory_fraction' of the cuda plugin must be in (0, 1], got {v}")
        if kind == "cuda" and name == "allocator" and v not in _CUDA_ALLOCATORS:
            raise ValueError(
                f"PJRT option 'allocator' of the cuda plugin must be one of {', '.join(_CUDA_ALLOCATORS)}, got {v!r}"
            )
        if name in ("cpu_device_count",) and int(v) < 1:  # type: ignore[arg-type]
            raise ValueError(f"PJRT option {name!r} must be >= 1, got {v}")
        out[name] = v
    return out


# ---------------------------------------------------------------------------------------------------------
# CUDA libraries of the nvidia-* wheels
# ---------------------------------------------------------------------------------------------------------

# (nvidia package subdirectory, library soname, the wheel that ships it), in load order (a library before those
# that depend on it). The CUDA 13 wheels put the toolkit libraries in one directory, nvidia/cu13/lib.
_CUDA_LIBRARIES: Dict[str, Tuple[Tuple[str, str, str], ...]] = {
    "13": (
        ("cu13", "libcudart.so.13", "nvidia-cuda-runtime"),
        ("cu13", "libnvrtc.so.13", "nvidia-cuda-nvrtc"),
        ("cu13", "libnvJitLink.so.13", "nvidia-nvjitlink"),
        ("cu13", "libcublasLt.so.13", "nvidia-cublas"),
        ("cu13", "libcublas.so.13", "nvidia-cublas"),
        ("cu13", "libcupti.so.13", "nvidia-cuda-cupti"),
        ("cu13", "libcusparse.so.12", "nvidia-cusparse"),
        ("cu13", "libcufft.so.12", "nvidia-cufft"),
        ("cu13", "libcusolver.so.12", "nvidia-cusolver"),
        ("nccl", "libnccl.so.2", "nvidia-nccl-cu13"),
        ("nvshmem", "libnvshmem_host.so.3", "nvidia-nvshmem-cu13"),
        ("cudnn", "libcudnn.so.9", "nvidia-cudnn-cu13"),
    ),
    "12": (
        ("cuda_runtime", "libcudart.so.12", "nvidia-cuda-runtime-cu12"),
        ("cuda_nvrtc", "libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12"),
        ("nvjitlink", "libnvJitLink.so.12", "nvidia-nvjitlink-cu12"),
        ("cublas", "libcublasLt.so.12", "nvidia-cublas-cu12"),
        ("cublas", "libcublas.so.12", "nvidia-cublas-cu12"),
        ("cuda_cupti", "libcupti.so.12", "nvidia-cuda-cupti-cu12"),
        ("cusparse", "libcusparse.so.12", "nvidia-cusparse-cu12"),
        ("cufft", "libcufft.so.11", "nvidia-cufft-cu12"),
        ("cusolver", "libcusolver.so.11", "nvidia-cusolver-cu12"),
        ("nccl", "libnccl.so.2", "nvidia-nccl-cu12"),
        ("nvshmem", "libnvshmem_host.so.3", "nvidia-nvshmem-cu12"),
        ("cudnn", "libcudnn.so.9", "nvidia-cudnn-cu12"),
    ),
}
# The driver library: never in a wheel; the plugin cannot run without it.
CUDA_DRIVER_LIBRARY = "libcuda.so.1"


def cuda_major_of_plugin(path: str) -> Optional[str]:
    """"13" / "12" for the CUDA plugin at ``path`` (from its package directory), else None."""
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    for major in _CUDA_LIBRARIES:
        if parent == f"xla_cuda{major}":
            return major
    return None


def cuda_data_dir(major: str) -> Optional[str]:
    """The CUDA toolkit directory of the nvidia wheels holding ``nvvm/libdevice`` (ptxas in ``bin``), if any."""
    sub = "cu13" if major == "13" else "cuda_nvcc"
    for d in _package_dirs("nvidia"):
        cand = os.path.join(d, sub)
        if os.path.isdir(os.path.join(cand, "nvvm", "libdevice")):
            return cand
    return None


def cuda_preload_libraries(plugin_path: str) -> List[Tuple[str, bool, str]]:
    """The libraries to load (globally) before the CUDA plugin at ``plugin_path``, in order.

    Each entry is ``(path_or_soname, required, hint)``: the driver (``libcuda.so.1``, required; its absence is
    the error), then each CUDA library from the ``nvidia-*`` wheels' directory if installed there, else by soname
    (found through the system's library path, e.g. a CUDA toolkit on ``LD_LIBRARY_PATH``). ``hint`` names the
    package to install should the library fail to load. Empty for a plugin that is not a CUDA plugin of a known
    CUDA major version.
    """
    major = cuda_major_of_plugin(plugin_path)
    if major is None:
        return []
    dirs = _package_dirs("nvidia")
    out: List[Tuple[str, bool, str]] = [
        (CUDA_DRIVER_LIBRARY, True, "the NVIDIA driver is not installed or not visible (libcuda.so.1 not found)")
    ]
    extra = f"cuda{major}"
    for sub, soname, wheel in _CUDA_LIBRARIES[major]:
        found = None
        for d in dirs:
            cand = os.path.join(d, sub, "lib", soname)
            if os.path.isfile(cand):
                found = cand
                break
        out.append((found or soname, False, f"pip install {wheel} (or torch-tpu[{extra}])"))
    return out


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
    from . import _settings

    env = (_settings.get(ENV_PLUGIN) or "").strip()
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
    options.update(parse_options(_settings.get(ENV_OPTIONS)))
    return path, kind, coerce_options(kind, options)


def prepare_environment(path: str, kind: str) -> Dict[str, str]:
    """Set the environment variables the plugin reads when it starts, unless already set; return those set.

    CUDA: ``XLA_FLAGS`` gains ``--xla_gpu_cuda_data_dir`` pointing at the nvidia wheels' toolkit directory
    (libdevice, ptxas) when it holds one. TPU: the per-process topology of a multi-process run
    (:mod:`torch_tpu._tpu_env`).
    """
    out: Dict[str, str] = {}
    if kind == "cuda":
        major = cuda_major_of_plugin(path)
        data_dir = cuda_data_dir(major) if major else None
        flags = os.environ.get("XLA_FLAGS", "")
        if data_dir and "--xla_gpu_cuda_data_dir" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " if flags else "") + f"--xla_gpu_cuda_data_dir={data_dir}"
            out["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
    elif kind == "tpu":
        from ._tpu_env import apply_libtpu_env

        out.update(apply_libtpu_env())
    return out


ENV_ACCELERATOR = "TORCH_TPU_ACCELERATOR"


def reports_accelerator(kind: Optional[str]) -> bool:
    """Whether torch's accelerator detection should report tpu for a plugin of ``kind``.

    ``$TORCH_TPU_ACCELERATOR``: ``1`` yes, ``0`` no; unset (or ``auto``): yes for TPU, GPU and custom plugins,
    no for the host CPU plugin (its devices are the CPU: library code choosing "the accelerator on this machine"
    for a CPU program must keep choosing the CPU).
    """
    from . import _settings

    on = _settings.get(ENV_ACCELERATOR)  # a switch or auto (None); ValueError otherwise
    return on if on is not None else kind not in (None, "cpu")
