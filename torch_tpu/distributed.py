"""The c10d backend ``tpu_dist`` for the ``tpu`` device.

Importing :mod:`torch_tpu` registers it (``torch.distributed.Backend.register_backend("tpu_dist", ...,
devices=["tpu"])``), so ``init_process_group("tpu_dist")``, ``init_process_group()`` with tpu tensors and
``init_process_group("cpu:gloo,tpu:tpu_dist")`` all work, and with them DDP, FSDP2, DTensor, tensor parallelism
and functional collectives on tpu tensors.

Each process group picks one of two transports when it is created (logged at INFO on the
``torch_tpu.distributed`` logger; :func:`get_transport` tells which):

* ``"xla"`` - every collective is a small StableHLO program (all_reduce, all_gather, reduce_scatter, all_to_all
  with replica groups) compiled once per signature and launched on each rank's device. Chosen when all ranks of
  the group live in this process on distinct devices: ranks as threads, one per chip (``run_ranks_as_threads``;
  with the CPU plugin, ``TORCH_TPU_NUM_DEVICES=N`` virtual chips).
* ``"host"`` - every collective runs as the same operation of torch's ProcessGroupGloo on host mirrors of the
  tensors, asynchronously on two engine threads. Chosen when the ranks are separate processes (``torchrun``).
  On the CPU plugin the mirrors are the device buffers themselves (no copies). When every rank runs on this
  host, an all_reduce of one tensor of 256 KiB or more reads the peers' mirrors directly (cross-memory attach,
  ``process_vm_readv``: a reduce-scatter then an all-gather, no TCP); ``TORCH_TPU_DIST_DIRECT=0`` keeps it on
  Gloo. Where the kernel forbids reading another process's memory (e.g. Yama ptrace_scope >= 1) the group finds
  out once, at its first such all_reduce, and uses Gloo.

``TORCH_TPU_DIST_TRANSPORT=host|xla`` overrides the choice (``xla`` needs all ranks in one process).
Collectives on CPU tensors passed to a ``tpu_dist`` group run on its Gloo backend.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

__all__ = ["BACKEND", "get_transport", "run_ranks_as_threads", "is_registered"]

logger = logging.getLogger("torch_tpu.distributed")

BACKEND = "tpu_dist"
ENV_TRANSPORT = "TORCH_TPU_DIST_TRANSPORT"
_TRANSPORTS = ("host", "xla")


def _C():
    from torch_tpu import _C as C

    return C


def _requested_transport() -> str:
    from . import _settings

    return _settings.get(ENV_TRANSPORT)  # auto, host or xla (ValueError otherwise)


def _choose_transport(infos: List[Dict[str, Any]], rank: int) -> str:
    same_process = all(i["host"] == infos[0]["host"] and i["pid"] == infos[0]["pid"] for i in infos)
    devices = [i["device"] for i in infos]
    distinct = len(set(devices)) == len(devices)
    requested = _requested_transport()
    if requested == "host":
        return "host"
    if requested == "xla":
        if not same_process:
            raise RuntimeError(
                f"{ENV_TRANSPORT}=xla: the ranks of this group are separate processes; the XLA transport of "
                "tpu_dist runs collectives between the devices of one process (ranks as threads). Use the host "
                f"transport ({ENV_TRANSPORT}=host or unset)."
            )
        if not distinct:
            raise RuntimeError(
                f"{ENV_TRANSPORT}=xla: ranks share devices ({devices}); give each rank its own device with "
                "torch.tpu.set_device(rank) before init_process_group"
            )
        return "xla"
    return "xla" if same_process and distinct else "host"


def _create_backend(dist_opts: Any, backend_opts: Any) -> Any:
    """The creator registered for ``tpu_dist`` (c10d's extended API)."""
    store = dist_opts.store
    rank, size = int(dist_opts.group_rank), int(dist_opts.group_size)
    timeout = dist_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    group_id = str(dist_opts.group_id)
    # The group binds this rank to its current device: initialize the runtime now, so that DeviceMesh (which
    # picks a device from LOCAL_RANK only when the runtime is uninitialized) keeps it.
    torch.tpu.init()
    device = int(torch.tpu.current_device())

    # Who is where: (host, pid, device) of every rank decides the transport.
    me = {"host": socket.gethostname(), "pid": os.getpid(), "device": device}
    store.set(f"tpu_dist/rank{rank}", json.dumps(me))
    infos = [json.loads(store.get(f"tpu_dist/rank{r}").decode()) for r in range(size)]
    transport = _choose_transport(infos, rank)

    gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpu_dist/gloo/", store), rank, size, timeout=timeout)
    key = f"{group_id}/{infos[0]['host']}/{infos[0]['pid']}"
    # Ranks all on this host: large all_reduces may read each other's memory directly (see get_transport).
    same_host = all(i["host"] == me["host"] for i in infos)
    pids = [int(i["pid"]) for i in infos] if same_host else []
    backend = _C()._dist.TpuBackend(
        rank, size, timeout.total_seconds(), gloo, transport, key, device, pids
    )
    if rank == 0 or transport == "host":
        logger.info(
            "tpu_dist: group %s (rank %d of %d, tpu:%d) uses the %s transport", group_id, rank, size, device,
            transport,
        )
    return backend


def _register() -> None:
    if BACKEND.upper() in dist.Backend._plugins:
        return
    # tpu tensors, and cpu tensors (through the group's Gloo backend): ``init_process_group("tpu_dist")`` then serves
    # what torch runs on cpu tensors by itself - barrier() when tpu is not torch's accelerator (the CPU plugin),
    # object collectives. cpu stays Gloo's in torch's default map (``init_process_group()``).
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu", "cpu"])
    from .api import _when_imported

    _when_imported("accelerate.big_modeling", _guard_init_on_device,
                   "accelerate's init_on_device kept to its thread while ranks run as threads")


def is_registered() -> bool:
    r"""True once ``tpu_dist`` is registered with torch.distributed (importing torch_tpu does it)."""
    return BACKEND.upper() in dist.Backend._plugins


def get_transport(group: Optional[dist.ProcessGroup] = None) -> str:
    r"""The transport of ``group``'s ``tpu_dist`` backend (the default group if None): ``"xla"`` or ``"host"``."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("tpu"))
    transport = getattr(backend, "transport", None)
    if transport is None:
        raise RuntimeError(f"the process group's tpu backend is {type(backend).__name__}, not tpu_dist")
    return str(transport)


# ---------------------------------------------------------------------------------------------------- threads


class _ThreadLocalWorld(dist.distributed_c10d._World):
    """torch.distributed's process-group bookkeeping, one copy per thread (ranks as threads)."""

    _tls = threading.local()

    def _state(self) -> Dict[str, Any]:
        s = getattr(self._tls, "state", None)
        if s is None:
            s = self._tls.state = {
                "default_pg": None,
                "pg_map": {},
                "pg_names": {},
                "pg_group_ranks": {},
                "pg_backend_config": {},
                "group_count": 0,
                "tags_to_pg": {},
                "pg_to_tag": {},
                "pg_coalesce_state": {},
                "comms": [],
            }
        return s

    default_pg = property(lambda self: self._state()["default_pg"],
                          lambda self, v: self._state().__setitem__("default_pg", v))
    pg_map = property(lambda self: self._state()["pg_map"])
    pg_names = property(lambda self: self._state()["pg_names"])
    pg_group_ranks = property(lambda self: self._state()["pg_group_ranks"])
    pg_backend_config = property(lambda self: self._state()["pg_backend_config"])
    group_count = property(lambda self: self._state()["group_count"],
                           lambda self, v: self._state().__setitem__("group_count", v))
    tags_to_pg = property(lambda self: self._state()["tags_to_pg"])
    pg_to_tag = property(lambda self: self._state()["pg_to_tag"])
    pg_coalesce_state = property(lambda self: self._state()["pg_coalesce_state"])
    comms = property(lambda self: self._state()["comms"])


_threads_lock = threading.Lock()


_rank_threads_running = 0  # run_ranks_as_threads calls in progress (under _threads_lock)


def _guard_init_on_device(big_modeling: Any) -> None:
    r"""Wraps accelerate's ``init_on_device`` (behind ``init_empty_weights``, which every Hugging Face
    ``from_pretrained`` enters) so that, while ranks run as threads, its patch stays with the thread that entered it.

    The context manager patches ``torch.nn.Module.register_parameter`` (a class attribute, so every thread) while it
    builds a model on the meta device, and restores what it found on exit. With ranks as threads, another rank
    registering parameters meanwhile went through the patch (a sharded ``DTensor`` parameter then fails in
    ``_dtensor__new__``), and two overlapping contexts could leave the patch installed for good. While
    :func:`run_ranks_as_threads` runs, the contexts run one at a time and, inside one, the patched function applies
    only to the thread that entered it; the others get the original ``register_parameter``. Otherwise the wrapper
    only calls accelerate's. Installed when accelerate's module is imported (torch_tpu does not import it).
    """
    original = big_modeling.init_on_device
    if getattr(original, "_torch_tpu_guard", False):
        return
    import contextlib

    lock = threading.RLock()

    @contextlib.contextmanager
    def init_on_device(device, include_buffers=None):
        if not _rank_threads_running:
            with original(device, include_buffers=include_buffers) as value:
                yield value
            return
        with lock:
            plain = torch.nn.Module.register_parameter
            with original(device, include_buffers=include_buffers) as value:
                patched = torch.nn.Module.register_parameter
                if patched is plain:  # nothing patched (include_buffers: a device context, which is per thread)
                    yield value
                    return
                owner = threading.get_ident()

                def register_parameter(module, name, param):
                    fn = patched if threading.get_ident() == owner else plain
                    return fn(module, name, param)

                torch.nn.Module.register_parameter = register_parameter
                try:
                    yield value
                finally:
                    torch.nn.Module.register_parameter = patched  # accelerate restores `plain` on its exit

    init_on_device._torch_tpu_guard = True
    init_on_device.__wrapped__ = original
    big_modeling.init_on_device = init_on_device


def run_ranks_as_threads(
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any] = (),
    backend: str = BACKEND,
    timeout: float = 300.0,
) -> List[Any]:
    r"""Runs ``fn(rank, world_size, *args)`` on ``world_size`` threads of this process, one rank per thread.

    Each thread gets its own torch.distributed state, uses device ``tpu:rank`` (``torch.tpu.set_device``) and
    joins a ``backend`` process group of ``world_size`` ranks before ``fn`` runs; the group is destroyed after.
    With ``tpu_dist`` the group uses the XLA transport: collectives are XLA programs across the devices. Needs
    ``torch.tpu.device_count() >= world_size`` (``TORCH_TPU_NUM_DEVICES`` for the CPU plugin). Autograd runs on
    the calling thread of each rank (as torch's threaded process groups require). Returns each rank's result;
    the first exception of any rank is raised (with its rank) once every thread has ended. ``timeout`` is the
    process group's timeout (a rank missing from a collective is an error after it); a thread still running a
    minute after it is an error too. The threads see the caller's torch config overrides (``torch._dynamo.config``
    and the like are per thread).
    """
    if world_size < 1:
        raise ValueError("world_size must be >= 1")
    n = torch.tpu.device_count()
    if backend == BACKEND and n < world_size:
        raise RuntimeError(
            f"run_ranks_as_threads: {world_size} ranks need {world_size} tpu devices, this process has {n} "
            "(set TORCH_TPU_NUM_DEVICES before importing torch for the CPU plugin)"
        )
    results: List[Any] = [None] * world_size
    errors: List[Optional[BaseException]] = [None] * world_size
    store = dist.HashStore()
    c10d = dist.distributed_c10d

    def body(rank: int) -> None:
        try:
            torch.tpu.set_device(rank)
            with torch.autograd.set_multithreading_enabled(False):
                dist.init_process_group(
                    backend, store=store, rank=rank, world_size=world_size,
                    timeout=datetime.timedelta(seconds=timeout),
                )
                try:
                    results[rank] = fn(rank, world_size, *args)
                finally:
                    dist.destroy_process_group()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[rank] = e

    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    with _threads_lock:
        old_world = c10d._world
        c10d._world = _ThreadLocalWorld()
        torch._C._distributed_c10d._set_thread_isolation_mode(True)
        # DTensor's sharding propagation enters a fake-tensor mode per call: one thread at a time, and without
        # the fake-tensor dispatch cache, whose keys see device "tpu" but not which tpu each thread uses.
        old_fake_lock = ShardingPropagator._fake_mode_lock
        ShardingPropagator._fake_mode_lock = threading.Lock()
        import torch._dynamo.config as dynamo_config

        old_fake_cache = dynamo_config.fake_tensor_cache_enabled
        dynamo_config.fake_tensor_cache_enabled = False
        # Fake tensors for "tpu" land on the calling rank's device (torch may hand a fake-tensor factory another
        # thread's device index).
        from torch._subclasses.fake_tensor import FakeTensor

        old_normalize = FakeTensor.__dict__["_normalize_fake_device"]

        def _normalize(device: torch.device) -> torch.device:
            if device.type == "tpu":
                return torch.device("tpu", torch.tpu.current_device())
            return old_normalize.__func__(device)

        FakeTensor._normalize_fake_device = staticmethod(_normalize)
        global _rank_threads_running
        _rank_threads_running += 1
        try:
            # Each thread runs in a copy of the caller's context: torch's config overrides (dynamo's among them,
            # e.g. trace_autograd_ops, and the fake-tensor cache switched off above) are context variables.
            threads = [threading.Thread(target=contextvars.copy_context().run, args=(body, r),
                                        name=f"tpu_dist-rank{r}", daemon=True)
                       for r in range(world_size)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + timeout + 60  # the group timeout first reports a missing rank
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            stuck = [r for r, t in enumerate(threads) if t.is_alive()]
        finally:
            # DDP remembers the module in forward in a class attribute, saved and restored per call: threads
            # interleaving their forwards can leave a finished rank's module behind (dynamo would then compile
            # later graphs for DDP).
            from torch.nn.parallel import DistributedDataParallel

            DistributedDataParallel._active_ddp_module = None
            _rank_threads_running -= 1
            FakeTensor._normalize_fake_device = old_normalize
            dynamo_config.fake_tensor_cache_enabled = old_fake_cache
            ShardingPropagator._fake_mode_lock = old_fake_lock
            torch._C._distributed_c10d._set_thread_isolation_mode(False)
            c10d._world = old_world
    if stuck:
        raise RuntimeError(f"run_ranks_as_threads: rank(s) {stuck} still running after {timeout} s")
    for r, e in enumerate(errors):
        if e is not None:
            raise RuntimeError(f"rank {r} failed: {type(e).__name__}: {e}") from e
    return results
