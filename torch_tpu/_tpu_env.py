"""The environment libtpu needs in each process of a multi-process run on a TPU VM.

libtpu reads its process topology from environment variables when the plugin is created, so they must be set
before it loads. One process per host (a plain ``python train.py`` on each host) needs nothing beyond the
host's own settings. Several processes per host (``torchrun --nproc-per-node=4`` on a 4-chip host, one chip per
process) and several hosts need, per process:

- ``TPU_VISIBLE_CHIPS``: the chip this process drives (its ``LOCAL_RANK``);
- ``TPU_CHIPS_PER_PROCESS_BOUNDS`` (``1,1,1``: one chip) and ``TPU_PROCESS_BOUNDS`` (the grid of processes:
  the host's chip grid times the grid of hosts);
- ``TPU_PROCESS_PORT`` (``base port + LOCAL_RANK``) and ``TPU_PROCESS_ADDRESSES`` (``host:port`` of every
  process, in rank order), through which the processes' runtimes find each other;
- ``CLOUD_TPU_TASK_ID`` (the process's index in that list, its ``RANK``), ``TPU_WORKER_ID`` (the host's index)
  and ``TPU_WORKER_HOSTNAMES`` (every host).

They are derived from ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` (set by ``torchrun``).
The hosts' addresses come from ``TORCH_TPU_HOST_ADDRESSES`` (``addr0,addr1,...`` in host order) if set, else,
with several hosts, each host's first process publishes its address in the c10d store at
``MASTER_ADDR:MASTER_PORT`` (torchrun's) and every process reads them all. A variable already set is never
overridden. Geometry: ``TORCH_TPU_CHIPS_PER_HOST_BOUNDS`` (default from ``LOCAL_WORLD_SIZE``: 1 -> ``1,1,1``,
2 -> ``1,2,1``, 4 -> ``2,2,1``, 8 -> ``2,4,1``) and ``TORCH_TPU_HOST_BOUNDS`` (default ``1,1,<hosts>``); the
base port is ``TORCH_TPU_PROCESS_BASE_PORT`` (default 8476). ``TORCH_TPU_LIBTPU_ENV=0`` turns all of this off.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, MutableMapping, Optional, Sequence, Tuple

__all__ = ["apply_libtpu_env", "exchange_host_addresses", "libtpu_env"]

DEFAULT_BASE_PORT = 8476
_CHIPS_PER_HOST_BY_PROCESSES = {1: (1, 1, 1), 2: (1, 2, 1), 4: (2, 2, 1), 8: (2, 4, 1)}
_STORE_PREFIX = "torch_tpu/libtpu/host_address/"

Bounds = Tuple[int, int, int]


def _bounds(text: str, what: str) -> Bounds:
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise ValueError(f"{what} must be three comma-separated integers like 2,2,1, got {text!r}") from None
    if len(parts) != 3 or min(parts) < 1:
        raise ValueError(f"{what} must be three comma-separated positive integers like 2,2,1, got {text!r}")
    return parts  # type: ignore[return-value]


def _fmt(b: Sequence[int]) -> str:
    return ",".join(str(int(v)) for v in b)


def _prod(b: Sequence[int]) -> int:
    n = 1
    for v in b:
        n *= int(v)
    return n


def libtpu_env(
    rank: int,
    local_rank: int,
    world_size: int,
    local_world_size: int,
    host_addresses: Sequence[str],
    base_port: int = DEFAULT_BASE_PORT,
    chips_per_host_bounds: Optional[Bounds] = None,
    host_bounds: Optional[Bounds] = None,
) -> Dict[str, str]:
    """The libtpu variables for process ``rank`` (pure function of its arguments; see the module docstring).

    ``host_addresses`` lists every host's address in host order (host ``i`` runs ranks
    ``i * local_world_size ... (i + 1) * local_world_size - 1``). Returns ``{}`` for a single process.
    """
    if world_size < 1 or local_world_size < 1:
        raise ValueError(f"WORLD_SIZE ({world_size}) and LOCAL_WORLD_SIZE ({local_world_size}) must be >= 1")
    if world_size % local_world_size:
        raise ValueError(
            f"WORLD_SIZE ({world_size}) must be a multiple of LOCAL_WORLD_SIZE ({local_world_size}): every host "
            "runs the same number of processes"
        )
    if not 0 <= rank < world_size or not 0 <= local_rank < local_world_size:
        raise ValueError(
            f"RANK ({rank}) / LOCAL_RANK ({local_rank}) out of range for WORLD_SIZE {world_size} / "
            f"LOCAL_WORLD_SIZE {local_world_size}"
        )
    num_hosts = world_size // local_world_size
    host = rank // local_world_size
    if rank % local_world_size != local_rank:
        raise ValueError(
            f"RANK {rank} and LOCAL_RANK {local_rank} disagree: ranks must be numbered host by host "
            f"(LOCAL_WORLD_SIZE {local_world_size})"
        )
    if world_size == 1:
        return {}
    if len(host_addresses) != num_hosts:
        raise ValueError(f"{len(host_addresses)} host addresses for {num_hosts} hosts: {list(host_addresses)}")
    env: Dict[str, str] = {}
    if local_world_size > 1:
        # One chip per process: the process grid is the hosts' grid times each host's chip grid.
        if chips_per_host_bounds is None:
            if local_world_size not in _CHIPS_PER_HOST_BY_PROCESSES:
                raise ValueError(
                    f"LOCAL_WORLD_SIZE {local_world_size}: set TORCH_TPU_CHIPS_PER_HOST_BOUNDS (e.g. 2,2,1) to "
                    "describe the host's chip grid"
                )
            chips_per_host_bounds = _CHIPS_PER_HOST_BY_PROCESSES[local_world_size]
        if _prod(chips_per_host_bounds) != local_world_size:
            raise ValueError(
                f"{local_world_size} processes per host for a host of {_fmt(chips_per_host_bounds)} chips: run one "
                "process per chip (LOCAL_WORLD_SIZE = chips per host) or one process per host"
            )
        hb = host_bounds if host_bounds is not None else (1, 1, num_hosts)
        if _prod(hb) != num_hosts:
            raise ValueError(f"host bounds {_fmt(hb)} do not describe {num_hosts} hosts")
        env["TPU_CHIPS_PER_PROCESS_BOUNDS"] = "1,1,1"
        env["TPU_PROCESS_BOUNDS"] = _fmt(h * c for h, c in zip(hb, chips_per_host_bounds))
        env["TPU_VISIBLE_CHIPS"] = str(local_rank)
    elif host_bounds is not None:
        if _prod(host_bounds) != num_hosts:
            raise ValueError(f"host bounds {_fmt(host_bounds)} do not describe {num_hosts} hosts")
        env["TPU_PROCESS_BOUNDS"] = _fmt(host_bounds)
        if chips_per_host_bounds is not None:
            env["TPU_CHIPS_PER_PROCESS_BOUNDS"] = _fmt(chips_per_host_bounds)
    ports = [base_port + i for i in range(local_world_size)]
    env["TPU_PROCESS_PORT"] = str(base_port + local_rank)
    env["TPU_PROCESS_ADDRESSES"] = ",".join(f"{h}:{p}" for h in host_addresses for p in ports)
    env["CLOUD_TPU_TASK_ID"] = str(rank)
    env["TPU_WORKER_ID"] = str(host)
    env["TPU_WORKER_HOSTNAMES"] = ",".join(host_addresses)
    return env


def _own_address(master_addr: str, master_port: int) -> str:
    """This host's address as the others reach it: the interface that routes to the master."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master_addr, master_port))  # UDP connect: chooses a route, sends nothing
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def exchange_host_addresses(
    store: Any, host: int, num_hosts: int, own_address: Optional[str], timeout_s: float = 300.0
) -> List[str]:
    """Publish this host's address (when ``own_address`` is given) and read every host's, through a c10d store.

    Each host's first process publishes; every process reads all ``num_hosts`` entries (waiting for them).
    """
    import datetime

    if own_address is not None:
        store.set(f"{_STORE_PREFIX}{host}", own_address)
    keys = [f"{_STORE_PREFIX}{i}" for i in range(num_hosts)]
    store.wait(keys, datetime.timedelta(seconds=timeout_s))
    return [store.get(k).decode() for k in keys]


def _int_env(environ: MutableMapping[str, str], name: str) -> Optional[int]:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def apply_libtpu_env(environ: Optional[MutableMapping[str, str]] = None, store: Any = None) -> Dict[str, str]:
    """Derive the libtpu variables from ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``LOCAL_WORLD_SIZE`` in
    ``environ`` (default ``os.environ``) and set those not already set. Returns the variables it set.

    ``store`` (a c10d Store) is used to exchange the hosts' addresses when there are several hosts and
    ``TORCH_TPU_HOST_ADDRESSES`` is not set; by default a client of the store at ``MASTER_ADDR:MASTER_PORT``.
    """
    env = os.environ if environ is None else environ
    from . import _settings

    if not _settings.get("TORCH_TPU_LIBTPU_ENV", env):
        return {}
    world_size = _int_env(env, "WORLD_SIZE")
    if world_size is None or world_size <= 1:
        return {}
    rank = _int_env(env, "RANK") or 0
    local_world_size = _int_env(env, "LOCAL_WORLD_SIZE")
    local_rank = _int_env(env, "LOCAL_RANK")
    if local_world_size is None:
        local_world_size = world_size  # one host
    if local_rank is None:
        local_rank = rank % local_world_size
    num_hosts = world_size // max(local_world_size, 1)
    base_port = _settings.get("TORCH_TPU_PROCESS_BASE_PORT", env)
    chb = env.get("TORCH_TPU_CHIPS_PER_HOST_BOUNDS")
    hb = env.get("TORCH_TPU_HOST_BOUNDS")
    chips = _bounds(chb, "TORCH_TPU_CHIPS_PER_HOST_BOUNDS") if chb else None
    hosts_b = _bounds(hb, "TORCH_TPU_HOST_BOUNDS") if hb else None

    given = env.get("TORCH_TPU_HOST_ADDRESSES", "").strip()
    if given:
        addresses = [a.strip() for a in given.split(",") if a.strip()]
    elif num_hosts == 1:
        addresses = ["localhost"]
    else:
        master_addr = env.get("MASTER_ADDR")
        master_port = _int_env(env, "MASTER_PORT")
        if store is None:
            if not master_addr or master_port is None:
                raise ValueError(
                    f"{num_hosts} hosts: set TORCH_TPU_HOST_ADDRESSES (every host's address, in host order) or run "
                    "under torchrun (MASTER_ADDR/MASTER_PORT name the store through which hosts exchange addresses)"
                )
            import datetime

            from torch.distributed import TCPStore

            store = TCPStore(master_addr, master_port, is_master=False, timeout=datetime.timedelta(seconds=300))
        host = rank // local_world_size
        own = None
        if local_rank == 0:
            own = env.get("TORCH_TPU_HOST_ADDRESS") or _own_address(master_addr or "127.0.0.1", master_port or 1)
        addresses = exchange_host_addresses(store, host, num_hosts, own)

    wanted = libtpu_env(rank, local_rank, world_size, local_world_size, addresses, base_port, chips, hosts_b)
    applied: Dict[str, str] = {}
    for k, v in wanted.items():
        if k not in env:
            env[k] = v
            applied[k] = v
    return applied
