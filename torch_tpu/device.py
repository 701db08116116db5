"""``torch.tpu``: the device module of the tpu backend (the counterpart of ``torch.cuda``).

Registered with ``torch._register_device_module("tpu", ...)`` when ``torch_tpu`` is imported. The PJRT
client is created lazily: importing is cheap, and the first device use (a tensor on "tpu", or a call here
that needs the runtime) runs :func:`_lazy_init`.
"""

from __future__ import annotations

import datetime
import enum
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch._utils import _LazySeedTracker

from . import amp
from ._streams import (
    Device,
    Event,
    Stream,
    StreamContext,
    _device_index,
    _set_stream_by_id,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

__all__ = [
    "Event",
    "Precision",
    "Stream",
    "StreamContext",
    "amp",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "get_local_device_attributes",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "precision",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
    "topology_aware_mesh",
]


def _C():
    from torch_tpu import _C as C

    return C


# ---------------------------------------------------------------------------------------------------------
# Plugin / initialization state
# ---------------------------------------------------------------------------------------------------------

# Set by torch_tpu/__init__.py: why no plugin could be configured (None if one was).
_plugin_error: Optional[str] = None

_initialized = False
_init_lock = threading.RLock()
_tls = threading.local()
_queued_calls: List[Tuple[Callable[[], None], List[str]]] = []
_lazy_seed_tracker = _LazySeedTracker()
_default_generators: Optional[Tuple[torch.Generator, ...]] = None


def _set_plugin_error(msg: Optional[str]) -> None:
    global _plugin_error
    _plugin_error = msg


def _is_in_bad_fork() -> bool:
    r"""True in a child forked from a process whose tpu runtime had started: the runtime cannot be used there.

    The C++ runtime records the fork (a ``pthread_atfork`` handler, which also makes PyTorch call
    :func:`_lazy_init` again before it creates a tpu tensor); any tpu use in the child raises
    "cannot re-initialize tpu in a forked subprocess; use the 'spawn' start method". CPU work is unaffected.
    """
    try:
        return bool(_C()._is_in_bad_fork())
    except Exception:
        return False


def is_initialized() -> bool:
    r"""Whether the tpu runtime has been initialized in this process."""
    return _initialized and not _is_in_bad_fork()


def _unavailable_message() -> str:
    if _plugin_error is not None:
        return _plugin_error
    from ._plugin import INSTALL_HINT

    err = _C()._init_error()
    if err:
        return f"torch_tpu: the PJRT plugin failed to initialize: {err}"
    return f"torch_tpu: the PJRT plugin reports no devices. {INSTALL_HINT}"


def _lazy_call(callable: Callable[[], None], **kwargs: Any) -> None:
    if is_initialized() or getattr(_tls, "initializing", False):
        callable()
    elif kwargs.get("seed_all", False):
        _lazy_seed_tracker.queue_seed_all(callable, traceback.format_stack())
    elif kwargs.get("seed", False):
        _lazy_seed_tracker.queue_seed(callable, traceback.format_stack())
    else:
        _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init() -> None:
    r"""Create the PJRT client (if needed) and run calls queued before it existed (e.g. seeding).

    Raises ``RuntimeError`` if no plugin is configured or it has no devices. Called by PyTorch before the
    first tpu tensor is created.
    """
    global _initialized, _default_generators
    if is_initialized() or getattr(_tls, "initializing", False):
        return
    if _is_in_bad_fork():  # before the lock: another thread of the parent may have held it at the fork
        raise RuntimeError(str(_C()._bad_fork_message()))
    with _init_lock:
        if is_initialized():
            return
        if _plugin_error is not None:
            raise RuntimeError(_plugin_error)
        n = int(_C()._device_count())
        if n <= 0:
            raise RuntimeError(_unavailable_message())
        _tls.initializing = True
        try:
            _default_generators = tuple(_C()._default_generator(i) for i in range(n))
            calls = [c for c in _lazy_seed_tracker.get_calls() if c] + list(_queued_calls)
            for fn, origin in calls:
                try:
                    fn()
                except Exception as e:
                    raise RuntimeError(
                        "tpu call failed lazily at initialization with error: "
                        f"{e}\n\ntpu call was originally invoked at:\n\n{''.join(origin)}"
                    ) from e
            _queued_calls.clear()
            _initialized = True
        finally:
            _tls.initializing = False


def init() -> None:
    r"""Initialize the tpu runtime now (it is otherwise initialized on first use)."""
    _lazy_init()


def is_available() -> bool:
    r"""Whether a PJRT plugin is configured and reports at least one device (loads the plugin)."""
    return device_count() > 0


def device_count() -> int:
    r"""Number of tpu devices (addressable PJRT devices); 0 if the plugin is missing or fails to load."""
    if _plugin_error is not None or _is_in_bad_fork():
        return 0
    try:
        return int(_C()._device_count())
    except Exception:
        return 0


def current_device() -> int:
    r"""Index of the currently selected tpu device."""
    return int(_C()._get_device())


def set_device(device: Device) -> None:
    r"""Select the current tpu device (a negative index is a no-op)."""
    idx = _device_index(device)
    if idx >= 0:
        _C()._set_device(idx)


def _exchange_device(idx: int) -> int:
    if idx < 0:
        return -1
    prev = current_device()
    if prev != idx:
        _C()._set_device(idx)
    return prev


_maybe_exchange_device = _exchange_device


class device:
    r"""Context manager that selects a tpu device for its block (like ``torch.cuda.device``).

    Args:
        device: index, "tpu:i" or torch.device; ``None`` or a negative index makes it a no-op.
    """

    def __init__(self, device: Any) -> None:
        if device is None:
            self.idx = -1
        elif isinstance(device, torch.device) and device.type == "tpu" and device.index is None:
            self.idx = -1
        else:
            self.idx = _device_index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        if self.prev_idx >= 0 and self.prev_idx != self.idx:
            _C()._set_device(self.prev_idx)
        return False


class device_of(device):
    r"""Context manager selecting the device of tensor ``obj`` (no-op for non-tpu tensors)."""

    def __init__(self, obj: torch.Tensor) -> None:
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def synchronize(device: Device = None) -> None:
    r"""Wait for all work issued so far on ``device`` (the current device if None) to finish."""
    _lazy_init()
    _C()._synchronize(_device_index(device))


# ---------------------------------------------------------------------------------------------------------
# Random number generation
# ---------------------------------------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        # One torch.Generator per device (like torch.cuda.default_generators); () without a usable plugin.
        if _default_generators is None and device_count() == 0:
            return ()
        _lazy_init()
        return _default_generators
    raise AttributeError(f"module 'torch.tpu' has no attribute {name!r}")


def _generator(device: Device) -> torch.Generator:
    _lazy_init()
    assert _default_generators is not None
    idx = _device_index(device)
    if not 0 <= idx < len(_default_generators):
        raise IndexError(f"tpu device index {idx} out of range (device_count={len(_default_generators)})")
    return _default_generators[idx]


def get_rng_state(device: Device = "tpu") -> torch.Tensor:
    r"""The random number generator state of ``device`` as a ByteTensor."""
    return _generator(device).get_state()


def get_rng_state_all() -> List[torch.Tensor]:
    r"""The random number generator states of all devices."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: Device = "tpu") -> None:
    r"""Set the random number generator state of ``device``."""
    state = new_state.detach().to("cpu", torch.uint8).clone(memory_format=torch.contiguous_format)

    def cb() -> None:
        _generator(device).set_state(state)

    _lazy_call(cb)


def set_rng_state_all(new_states: List[torch.Tensor]) -> None:
    r"""Set the random number generator states of all devices (one state per device)."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    r"""Seed the random number generator of the current device."""
    seed = int(seed)

    def cb() -> None:
        _generator(None).manual_seed(seed)

    _lazy_call(cb, seed=True)


def manual_seed_all(seed: int) -> None:
    r"""Seed the random number generators of all devices."""
    seed = int(seed)

    def cb() -> None:
        for g in _default_generators or ():
            g.manual_seed(seed)

    _lazy_call(cb, seed_all=True)


def seed() -> None:
    r"""Seed the current device's generator with a non-deterministic random number."""

    def cb() -> None:
        _generator(None).seed()

    _lazy_call(cb)


def seed_all() -> None:
    r"""Seed all devices' generators with one non-deterministic random number."""

    def cb() -> None:
        gens = _default_generators or ()
        if not gens:
            return
        s = gens[0].seed()
        for g in gens[1:]:
            g.manual_seed(s)

    _lazy_call(cb, seed_all=True)


def initial_seed() -> int:
    r"""The initial seed of the current device's generator."""
    return int(_generator(None).initial_seed())


# ---------------------------------------------------------------------------------------------------------
# Device properties and memory
# ---------------------------------------------------------------------------------------------------------


class _TpuDeviceProperties:
    r"""Properties of a tpu device (see :func:`get_device_properties`)."""

    def __init__(self, index: int) -> None:
        C = _C()
        info: Dict[str, Any] = dict(C._plugin_info())
        stats: Dict[str, Any] = dict(C._memory_stats(index))
        self.index = index
        self.type = "tpu"
        self.name: str = str(C._device_kind(index))
        self.platform_name: str = str(info.get("platform_name", ""))
        self.platform_version: str = str(info.get("platform_version", ""))
        self.api_version: str = str(info.get("api_version", ""))
        self.plugin_path: str = str(info.get("path", ""))
        self.attributes: Dict[str, Any] = dict(info.get("attributes", {}) or {})
        self.total_memory: int = max(int(stats.get("total", 0) or 0), 0)
        self.multi_processor_count = 1

    def __repr__(self) -> str:
        return (
            f"_TpuDeviceProperties(name='{self.name}', index={self.index}, platform='{self.platform_name}', "
            f"platform_version='{self.platform_version}', total_memory={self.total_memory // (1024 * 1024)}MB)"
        )


_properties_cache: Dict[int, _TpuDeviceProperties] = {}


def get_device_properties(device: Device = None) -> _TpuDeviceProperties:
    r"""Properties of ``device``: name, total_memory, platform_name, platform_version, api_version, ..."""
    _lazy_init()
    idx = _device_index(device)
    n = device_count()
    if not 0 <= idx < n:
        raise AssertionError(f"Invalid tpu device index {idx} (device_count={n})")
    props = _properties_cache.get(idx)
    if props is None:
        props = _properties_cache[idx] = _TpuDeviceProperties(idx)
    return props


def get_local_device_attributes(device: Device = None) -> Dict[str, Any]:
    r"""The PJRT attributes of ``device`` (default: the current one): ``id`` (global device id), ``process_index``,
    ``device_kind``, ``coords`` / ``core_on_chip`` / ``slice_index`` (TPU plugins; ``coords`` None elsewhere)."""
    from ._topology import local_device_attributes

    return local_device_attributes(device)


def topology_aware_mesh(mesh_shape: Any, *, topology: str = "single_slice", dcn_mesh_shape: Any = None,
                        process_is_granule: bool = False, allow_split_physical_axes: bool = False,
                        contiguous_submeshes: bool = False) -> torch.Tensor:
    r"""TorchTPU's topology-aware rank layout: an int64 tensor of global ranks of shape ``mesh_shape`` (for
    ``topology="multi_slice"``, ``dcn_mesh_shape * mesh_shape`` elementwise), the same on every rank, to pass as
    ``DeviceMesh("tpu", mesh=...)``. Needs an initialized process group. See :mod:`torch_tpu._topology`."""
    from ._topology import topology_aware_mesh as impl

    return impl(mesh_shape, topology=topology, dcn_mesh_shape=dcn_mesh_shape, process_is_granule=process_is_granule,
                allow_split_physical_axes=allow_split_physical_axes, contiguous_submeshes=contiguous_submeshes)


def get_device_name(device: Device = None) -> str:
    r"""The device kind reported by the plugin (e.g. "TPU v5 lite", "cpu")."""
    return get_device_properties(device).name


def get_device_capability(device: Device = None) -> Tuple[int, int]:
    r"""Always ``(0, 0)``: tpu devices have no CUDA-style compute capability."""
    return (0, 0)


def _raw_memory_stats(device: Device) -> Dict[str, Any]:
    _lazy_init()
    return dict(_C()._memory_stats(_device_index(device)))


def memory_stats(device: Device = None) -> Dict[str, Any]:
    r"""Memory statistics of ``device`` (``torch.cuda.memory_stats``-style keys plus the raw counters)."""
    raw = _raw_memory_stats(device)
    allocated = int(raw.get("allocated", 0))
    peak = int(raw.get("peak_allocated", allocated))
    reserved = int(raw.get("reserved", allocated))
    limit = int(raw.get("limit", 0) or 0)
    out: Dict[str, Any] = {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": peak,
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": max(reserved, int(raw.get("peak_reserved", peak))),
        "bytes_limit": max(limit, 0),
        "from_plugin": bool(raw.get("from_plugin", False)),
    }
    for k, v in raw.items():
        out.setdefault(k, v)
    return out


def memory_allocated(device: Device = None) -> int:
    r"""Bytes of device memory currently held by tpu tensors on ``device``."""
    return int(_raw_memory_stats(device).get("allocated", 0))


def max_memory_allocated(device: Device = None) -> int:
    r"""Peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return int(_raw_memory_stats(device).get("peak_allocated", 0))


def memory_reserved(device: Device = None) -> int:
    r"""Bytes of device memory held by torch_tpu on ``device`` (allocated plus cached)."""
    raw = _raw_memory_stats(device)
    return int(raw.get("reserved", raw.get("allocated", 0)))


def max_memory_reserved(device: Device = None) -> int:
    r"""Peak of :func:`memory_reserved` (at least the allocation peak)."""
    return int(memory_stats(device)["reserved_bytes.all.peak"])


def reset_peak_memory_stats(device: Device = None) -> None:
    r"""Reset the peak counters of ``device``."""
    _lazy_init()
    _C()._reset_peak_memory_stats(_device_index(device))


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache() -> None:
    r"""Release cached, unused device memory back to the plugin (no-op before initialization)."""
    if is_initialized():
        _C()._empty_cache()


def mem_get_info(device: Device = None) -> Tuple[int, int]:
    r"""``(free, total)`` bytes of ``device``.

    ``total`` is the device's memory limit: ``TORCH_TPU_MEMORY_LIMIT`` if set, else the plugin's, else (CPU
    plugin) the host's memory; ``free`` is what is left of it (for the CPU plugin, at most the host's available
    memory). An allocation larger than what is left raises ``torch.OutOfMemoryError``.
    """
    raw = _raw_memory_stats(device)
    return int(raw["free"]), int(raw["total"])


# ---------------------------------------------------------------------------------------------------------
# Precision
# ---------------------------------------------------------------------------------------------------------


def is_bf16_supported(including_emulation: bool = True) -> bool:
    r"""Always True: bfloat16 is native on every PJRT backend torch_tpu targets."""
    return True


get_amp_supported_dtype = amp.get_amp_supported_dtype


# ---------------------------------------------------------------------------------------------------------------
# Matmul precision (TorchTPU's torch.tpu.precision) -- one mechanism: PyTorch's float32 matmul precision
# ---------------------------------------------------------------------------------------------------------------


class Precision(enum.Enum):
    r"""TorchTPU's float32 matmul precisions (StableHLO's dot precision config), each the
    ``torch.set_float32_matmul_precision`` setting that means the same here:

    - ``DEFAULT``: one bfloat16 pass (``"medium"``);
    - ``HIGH``: three bfloat16 passes, about 16 bits of mantissa (``"high"``);
    - ``HIGHEST``: full float32 (``"highest"``, PyTorch's default).
    """

    DEFAULT = "medium"
    HIGH = "high"
    HIGHEST = "highest"


class precision:
    r"""``with torch.tpu.precision(torch.tpu.Precision.HIGHEST): c = a @ b`` -- the float32 matmul precision of
    float32 products and convolutions for the block, restored on exit (also when the block raises).

    It sets PyTorch's own ``torch.set_float32_matmul_precision`` (one mechanism, read by the tpu lowering of
    every float32 dot and convolution, and part of their programs' cache keys), so ``torch.backends`` settings and
    this context agree. Accepts a :class:`Precision` or PyTorch's names ``"medium"``, ``"high"``, ``"highest"``.
    """

    def __init__(self, mode: Any) -> None:
        if isinstance(mode, Precision):
            self.value = mode.value
        elif isinstance(mode, str) and mode in ("medium", "high", "highest"):
            self.value = mode
        elif isinstance(mode, str) and mode.upper() in Precision.__members__:
            self.value = Precision[mode.upper()].value
        else:
            name = getattr(mode, "name", None)  # another library's enum with the same member names
            if isinstance(name, str) and name in Precision.__members__:
                self.value = Precision[name].value
            else:
                raise ValueError(
                    "expected one of torch.tpu.Precision.DEFAULT, .HIGH, .HIGHEST (or 'medium', 'high', "
                    f"'highest'), got {mode!r}"
                )
        self._previous: List[str] = []

    def __enter__(self) -> "precision":
        self._previous.append(torch.get_float32_matmul_precision())
        torch.set_float32_matmul_precision(self.value)
        return self

    def __exit__(self, *exc: Any) -> bool:
        torch.set_float32_matmul_precision(self._previous.pop())
        return False

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with precision(self.value):
                return fn(*args, **kwargs)

        return wrapper


# ---------------------------------------------------------------------------------------------------------------
# TorchTPU's telemetry names (torch.tpu._get_cache_stats() etc.), from this package's caches and memory accounting
# ---------------------------------------------------------------------------------------------------------------


class CacheEntryStats:
    r"""One program the process holds, in ``torch.tpu._get_cache_stats().per_entry_stats`` (TorchTPU's fields):
    ``read_count`` (launches of the program), ``last_read`` (local time of the latest launch, a
    ``datetime.datetime``; ``None`` before the first), ``compilation_duration`` (a ``datetime.timedelta``: the XLA
    compile; zero when the program was loaded from the disk cache). Also ``source`` (``"compiled"`` or ``"disk"``) and
    ``key`` (a hash of the program text, stable for the same program across processes)."""

    __slots__ = ("key", "read_count", "last_read", "compilation_duration", "source")

    def __init__(self, key_hash: int, read_count: int, last_read_ns: int, compile_seconds: float,
                 from_disk: bool) -> None:
        self.key = f"{key_hash:016x}"
        self.read_count = int(read_count)
        self.last_read = datetime.datetime.fromtimestamp(last_read_ns / 1e9) if last_read_ns else None
        self.compilation_duration = datetime.timedelta(seconds=float(compile_seconds))
        self.source = "disk" if from_disk else "compiled"

    def __repr__(self) -> str:
        last = self.last_read.isoformat(sep=" ", timespec="milliseconds") if self.last_read else None
        return (f"CacheEntryStats(key={self.key}, read_count={self.read_count}, last_read={last}, "
                f"compilation_duration={self.compilation_duration}, source={self.source})")


class CacheStats:
    r"""What ``torch.tpu._get_cache_stats()`` returns: the program caches' counters.

    TorchTPU's fields: ``num_cache_reqs`` (op calls and compiled-graph runs looking up a program),
    ``num_cache_hits`` (served by a cached program: the process cache, or the disk cache instead of compiling),
    ``num_cache_misses`` (programs compiled), ``per_entry_stats`` (one :class:`CacheEntryStats` per program the
    process's caches hold, in the order they were made). Also ``compile_seconds``, and the full counters as
    ``eager`` (``torch_tpu.cache_stats()``) and ``compiled`` (``torch_tpu.compile_stats()``); ``stats["name"]``
    reads ``eager`` entries.
    """

    def __init__(self, eager: Dict[str, Any], compiled: Dict[str, Any],
                 entries: Optional[List[Tuple[int, int, int, float, bool]]] = None) -> None:
        self.eager = eager
        self.compiled = compiled
        fused = eager.get("fused", {}) or {}
        self.num_cache_reqs = int(eager.get("requests", 0)) + int(compiled.get("runs", 0))
        self.num_cache_misses = (int(eager.get("compiles", 0)) + int(fused.get("compiles", 0))
                                 + int(compiled.get("compiles", 0)))
        self.num_cache_hits = max(self.num_cache_reqs - int(eager.get("compiles", 0)) - int(compiled.get("compiles", 0)), 0)
        self.compile_seconds = float(eager.get("compile_seconds", 0.0)) + float(compiled.get("compile_seconds", 0.0))
        self.per_entry_stats: List[CacheEntryStats] = [CacheEntryStats(*e) for e in (entries or [])]

    def __getitem__(self, key: str) -> Any:
        return self.eager[key]

    def __repr__(self) -> str:
        return (f"CacheStats(num_cache_reqs={self.num_cache_reqs}, num_cache_hits={self.num_cache_hits}, "
                f"num_cache_misses={self.num_cache_misses}, compile_seconds={self.compile_seconds:.3f})")


def _get_cache_stats() -> CacheStats:
    r"""TorchTPU's cache statistics call (see :class:`CacheStats`)."""
    from torch_tpu import cache_stats, compile_stats

    return CacheStats(cache_stats(), compile_stats(), _C()._executable_entries())


def _get_cache_requests() -> int:
    return _get_cache_stats().num_cache_reqs


def _get_cache_hits() -> int:
    return _get_cache_stats().num_cache_hits


def _get_cache_misses() -> int:
    return _get_cache_stats().num_cache_misses


def _clear_cache() -> None:
    r"""Drop the in-process program caches (eager, fused eager, compiled graphs); the next call of each op or graph
    builds its program again (from the disk cache when it has it). Pending fused work is launched first."""
    C = _C()
    if is_initialized():
        C._fused_flush()
    C._clear_cache()
    C._clear_fused_cache()
    C._compile_clear_cache()


def _hbm_usage_summary() -> str:
    r"""Device memory per initialized tpu device: in use, peak, limit and free (this package's accounting,
    ``torch.tpu.memory_stats``), and the number of programs cached in the process."""
    if not is_initialized():
        return "tpu: runtime not started (no device memory in use)"
    from torch_tpu import cache_stats

    def gib(n: int) -> str:
        return f"{n / 2**30:.3f} GiB"

    lines = []
    for d in range(device_count()):
        raw = _raw_memory_stats(d)
        lines.append(
            f"tpu:{d}: in use {gib(int(raw.get('allocated', 0)))}, peak {gib(int(raw.get('peak_allocated', 0)))}, "
            f"limit {gib(int(raw.get('total', raw.get('limit', 0)) or 0))}, free {gib(int(raw.get('free', 0)))}"
        )
    st = cache_stats()
    lines.append(f"cached programs: {st.get('entries', 0)} eager, {st.get('fused', {}).get('entries', 0)} fused")
    return "\n".join(lines)


def _get_autocast_dtype() -> torch.dtype:
    r"""``torch.get_autocast_dtype("tpu")`` (bfloat16 by default)."""
    return torch.get_autocast_dtype("tpu")


def _set_autocast_dtype(dtype: torch.dtype) -> None:
    if dtype not in amp.get_amp_supported_dtype():
        raise ValueError(f"Unsupported dtype {dtype} for AMP on tpu; supported: {amp.get_amp_supported_dtype()}")
    torch.set_autocast_dtype("tpu", dtype)


def _is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("tpu")


def _set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("tpu", bool(enabled))
