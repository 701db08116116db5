"""Helpers for testing ``tpu_dist``: real processes on a 127.0.0.1 store, and a collective-by-collective check
of tpu results against torch's Gloo backend on CPU copies of the same tensors.

* :func:`run_processes` runs ``fn(rank, world_size, *args)`` in ``world_size`` spawned processes that joined a
  process group (``tpu_dist`` by default), bounded by a timeout; returns each rank's result.
* :func:`check_collectives` runs every collective (all dtypes / reduce ops given) on tpu tensors through the
  default group and on CPU copies through a Gloo group, and returns the mismatches.
"""

from __future__ import annotations

import datetime
import os
import queue
import socket
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child(fn, rank, world_size, port, args, backend, timeout, results, env) -> None:
    try:
        os.environ.update(env)
        os.environ.update(
            {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
             "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        )
        import torch_tpu  # noqa: F401

        if backend is not None:
            store = dist.TCPStore("127.0.0.1", port, world_size, rank == 0,
                                  timeout=datetime.timedelta(seconds=timeout))
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                    timeout=datetime.timedelta(seconds=timeout))
        try:
            out = fn(rank, world_size, *args)
        finally:
            if backend is not None and dist.is_initialized():
                dist.destroy_process_group()
        results.put((rank, "ok", out))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_processes(
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any] = (),
    backend: Optional[str] = "tpu_dist",
    timeout: float = 120.0,
    env: Optional[Dict[str, str]] = None,
    allow_failures: Sequence[int] = (),
) -> List[Any]:
    r"""Runs ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes (spawn) joined in a ``backend``
    process group over a TCPStore on 127.0.0.1 (no group if ``backend`` is None). ``fn`` must be importable
    (module level). Returns the per-rank results; raises if a rank fails (unless listed in ``allow_failures``:
    its entry is then the error text, or None if it exited without reporting) or if the ranks do not finish
    within ``timeout`` seconds (stragglers are killed).
    """
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    child_env = {"TORCH_TPU_NUM_DEVICES": "1", **(env or {})}
    procs = [
        ctx.Process(target=_child, args=(fn, r, world_size, port, tuple(args), backend, timeout, results, child_env),
                    daemon=True)
        for r in range(world_size)
    ]
    # The environment a child imports torch with (plugin options are read at import) is the parent's at start.
    saved = {k: os.environ.get(k) for k in child_env}
    os.environ.update(child_env)
    try:
        for p in procs:
            p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out: Dict[int, Any] = {}
    errors: Dict[int, str] = {}
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout + 60)
    while len(out) + len(errors) < world_size:
        left = (deadline - datetime.datetime.now()).total_seconds()
        if left <= 0:
            break
        try:
            rank, status, value = results.get(timeout=min(left, 1.0))
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and results.empty():
                break
            continue
        (out if status == "ok" else errors)[rank] = value
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    missing = [r for r in range(world_size) if r not in out and r not in errors]
    bad = {r: e for r, e in errors.items() if r not in allow_failures}
    if bad:
        r = min(bad)
        others = "".join(f"\n--- rank {q} also failed:\n{bad[q]}" for q in sorted(bad) if q != r)
        others += "".join(
            f"\n(rank {q} exited with code {procs[q].exitcode} without reporting)" for q in missing
            if q not in allow_failures
        )
        raise RuntimeError(f"rank {r} of {world_size} failed:\n{bad[r]}{others}")
    unexpected = [r for r in missing if r not in allow_failures]
    if unexpected:
        codes = ", ".join(f"rank {r}: exit code {procs[r].exitcode}" for r in unexpected)
        raise RuntimeError(f"rank(s) {unexpected} of {world_size} did not report within {timeout} s ({codes})")
    return [out.get(r, errors.get(r)) for r in range(world_size)]


# ---------------------------------------------------------------------------------------------------- checks

_OPS = {
    "SUM": dist.ReduceOp.SUM,
    "AVG": dist.ReduceOp.AVG,
    "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX,
}


def _values(shape, dtype, rank: int, salt: int, op: str = "SUM") -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        if op == "PRODUCT":
            t = 1 + 0.1 * torch.rand(shape, generator=g)
        else:
            t = torch.randn(shape, generator=g)
        return t.to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=torch.int64).to(dtype)


def _close(a: torch.Tensor, b: torch.Tensor, exact: bool) -> Optional[str]:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
    if exact or not a.dtype.is_floating_point:
        return None if torch.equal(a, b) else f"values differ (max abs {(a.double() - b.double()).abs().max().item()})"
    tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(a.dtype, 1e-5)
    if torch.allclose(a.double(), b.double(), rtol=tol, atol=tol):
        return None
    return f"values differ (max abs {(a.double() - b.double()).abs().max().item()})"


def check_collectives(
    rank: int,
    world_size: int,
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16, torch.int64),
    ops: Sequence[str] = ("SUM", "AVG", "PRODUCT", "MIN", "MAX"),
    exact: bool = True,
    group: Optional[dist.ProcessGroup] = None,
    numel: int = 6,
    reference_group: Optional[dist.ProcessGroup] = None,
) -> List[str]:
    r"""Every collective on tpu tensors (through ``group``, the default group if None) against the same collective
    on CPU copies through a Gloo group of the same ranks. Returns the failures (empty when all match).
    ``exact``: results must be bitwise equal (the host transport runs Gloo itself); otherwise floats are
    compared with a dtype tolerance (XLA may sum in another order). With a sub-group, pass the Gloo group of the
    same ranks as ``reference_group`` (groups are created by every rank, in the same order).
    """
    pg = group if group is not None else dist.group.WORLD
    ranks = dist.get_process_group_ranks(pg)
    own_reference = reference_group is None
    if own_reference and group is not None:
        raise ValueError("check_collectives on a sub-group needs its Gloo reference_group")
    gloo = dist.new_group(ranks, backend="gloo") if own_reference else reference_group
    me = dist.get_rank(pg)
    n = dist.get_world_size(pg)
    dev = torch.device("tpu", torch.tpu.current_device())
    failures: List[str] = []
    salt = [0]

    def case(name: str, run: Callable[[torch.device, dist.ProcessGroup], List[torch.Tensor]]) -> None:
        salt[0] += 1
        try:
            got = [t.cpu() for t in run(dev, pg)]
            want = run(torch.device("cpu"), gloo)
            for i, (a, b) in enumerate(zip(got, want)):
                why = _close(a, b, exact)
                if why:
                    failures.append(f"rank {rank}: {name} output {i}: {why}")
        except Exception as e:  # noqa: BLE001 - a failing case is a finding
            failures.append(f"rank {rank}: {name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")

    for dtype in dtypes:
        dn = str(dtype).replace("torch.", "")
        for op in ops:
            if op == "AVG" and not dtype.is_floating_point:
                continue  # Gloo (the reference) has no integer average
            s = salt[0] + 1

            def ar(d, g, dtype=dtype, op=op, s=s):
                t = _values((numel,), dtype, me, s, op).to(d)
                dist.all_reduce(t, op=_OPS[op], group=g)
                return [t]

            case(f"all_reduce {op} {dn}", ar)

            def rs(d, g, dtype=dtype, op=op, s=s):
                x = _values((n * numel,), dtype, me, s, op).to(d)
                out = torch.empty(numel, dtype=dtype, device=d)
                dist.reduce_scatter_tensor(out, x, op=_OPS[op], group=g)
                return [out]

            case(f"reduce_scatter_tensor {op} {dn}", rs)

            if op != "AVG":

                def red(d, g, dtype=dtype, op=op, s=s):
                    t = _values((numel,), dtype, me, s, op).to(d)
                    dist.reduce(t, dst=ranks[n - 1], op=_OPS[op], group=g)
                    return [t] if me == n - 1 else []

                case(f"reduce {op} {dn}", red)

        def bc(d, g, dtype=dtype, s=salt[0] + 1):
            a = _values((2, numel), dtype, me, s).to(d)
            dist.broadcast(a, src=ranks[0], group=g)
            b = _values((numel,), dtype, me, s + 7).to(d)
            dist.broadcast(b, src=ranks[n - 1], group=g)
            return [a, b]

        case(f"broadcast {dn}", bc)

        def ag(d, g, dtype=dtype, s=salt[0] + 1):
            x = _values((2, 3), dtype, me, s).to(d)
            outs = [torch.empty(2, 3, dtype=dtype, device=d) for _ in range(n)]
            dist.all_gather(outs, x, group=g)
            flat = torch.empty(n * 6, dtype=dtype, device=d)
            dist.all_gather_into_tensor(flat, x.reshape(-1), group=g)
            return outs + [flat]

        case(f"all_gather {dn}", ag)

        def rsl(d, g, dtype=dtype, s=salt[0] + 1):
            ins = [_values((numel,), dtype, me, s + j).to(d) for j in range(n)]
            out = torch.empty(numel, dtype=dtype, device=d)
            dist.reduce_scatter(out, ins, group=g)
            return [out]

        case(f"reduce_scatter list {dn}", rsl)

        def a2a(d, g, dtype=dtype, s=salt[0] + 1):
            x = _values((n * 2, 3), dtype, me, s).to(d)
            out = torch.empty_like(x)
            dist.all_to_all_single(out, x, group=g)
            # uneven: rank r sends j+1 rows to rank j; receives r+1 rows from everyone
            ins_split = [j + 1 for j in range(n)]
            y = _values((sum(ins_split), 2), dtype, me, s + 1).to(d)
            out2 = torch.empty((n * (me + 1), 2), dtype=dtype, device=d)
            dist.all_to_all_single(out2, y, [me + 1] * n, ins_split, group=g)
            ins = [_values((2,), dtype, me, s + 2 + j).to(d) for j in range(n)]
            outs = [torch.empty(2, dtype=dtype, device=d) for _ in range(n)]
            dist.all_to_all(outs, ins, group=g)
            return [out, out2] + outs

        case(f"all_to_all {dn}", a2a)

        def gat(d, g, dtype=dtype, s=salt[0] + 1):
            x = _values((numel,), dtype, me, s).to(d)
            root = ranks[n - 1]
            outs = [torch.empty(numel, dtype=dtype, device=d) for _ in range(n)] if me == n - 1 else None
            dist.gather(x, outs, dst=root, group=g)
            y = torch.empty(numel, dtype=dtype, device=d)
            ins = [_values((numel,), dtype, me, s + 1 + j).to(d) for j in range(n)] if me == 0 else None
            dist.scatter(y, ins, src=ranks[0], group=g)
            return (outs or []) + [y]

        case(f"gather/scatter {dn}", gat)

    def views(d, g):
        # a collective on a strided view writes only the view (Gloo itself needs a contiguous copy)
        base = _values((4, 2 * numel), torch.float32, me, 99).to(d)
        v = base[1:3, ::2]
        if d.type == "cpu":
            c = v.contiguous()
            dist.all_reduce(c, group=g)
            v.copy_(c)
        else:
            dist.all_reduce(v, group=g)
        return [base]

    case("all_reduce on a strided view", views)

    def premul(d, g):
        t = _values((numel,), torch.float32, me, 98).to(d)
        if d.type == "cpu":  # Gloo has no PREMUL_SUM: the reference scales first
            t.mul_(0.5)
            dist.all_reduce(t, group=g)
        else:
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5), group=g)
        return [t]

    case("all_reduce PREMUL_SUM", premul)

    def async_future(d, g):
        t = _values((numel,), torch.float32, me, 97).to(d)
        work = dist.all_reduce(t, group=g, async_op=True)
        fut = work.get_future()
        doubled = fut.then(lambda f: f.value()[0] * 2)
        work.wait()
        res = doubled.wait()
        assert work.is_completed()
        return [t, res]

    case("async all_reduce, future callback", async_future)

    def p2p(d, g):
        nxt, prv = ranks[(me + 1) % n], ranks[(me - 1) % n]
        x = _values((numel,), torch.float32, me, 96).to(d)
        y = torch.empty(numel, device=d)
        ops_ = [dist.P2POp(dist.isend, x, nxt, g), dist.P2POp(dist.irecv, y, prv, g)]
        for w in dist.batch_isend_irecv(ops_):
            w.wait()
        z = torch.empty(numel, device=d)
        if me % 2 == 0:
            dist.send(x, nxt, group=g)
            dist.recv(z, prv, group=g)
        else:
            dist.recv(z, prv, group=g)
            dist.send(x, nxt, group=g)
        return [y, z]

    if n > 1:
        case("send/recv, batch_isend_irecv ring", p2p)

    def barrier(d, g):
        dist.barrier(group=g)
        return []

    case("barrier", barrier)
    if own_reference:
        dist.destroy_process_group(gloo)
    return failures
