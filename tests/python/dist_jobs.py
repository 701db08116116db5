"""Per-rank jobs of the tpu_dist tests (tests/python/test_distributed*.py).

They run in spawned processes (torch_tpu.testing.dist.run_processes: host transport) or on threads of one process
(torch_tpu.distributed.run_ranks_as_threads: XLA transport), so they live at module level and build everything
they need (models from tests/python/models.py, seeded; data from a fixed generator).
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch._dynamo
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from models import DecoderConfig, Qwen3Decoder, RMSNorm, seeded

_LOCK = threading.Lock()  # model construction seeds the global RNG: one rank thread at a time

CFG = DecoderConfig(vocab=64, hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate=64)


def _device() -> torch.device:
    return torch.device("tpu", torch.tpu.current_device())


# ---------------------------------------------------------------------------------------------------- collectives


def collectives_job(rank: int, world: int, exact: bool = True, subgroups: bool = False) -> Dict[str, Any]:
    from torch_tpu.distributed import get_transport
    from torch_tpu.testing.dist import check_collectives

    out: Dict[str, Any] = {"transport": get_transport(), "failures": check_collectives(rank, world, exact=exact)}
    if subgroups:
        out["failures"] += subgroup_checks(rank, world, exact)
    return out


def subgroup_checks(rank: int, world: int, exact: bool) -> List[str]:
    """new_group of every other rank, and the rows / columns of a 2-D device mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    from torch_tpu.testing.dist import check_collectives

    failures: List[str] = []
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    gloo_evens, gloo_odds = dist.new_group([0, 2], backend="gloo"), dist.new_group([1, 3], backend="gloo")
    mine, ref = (evens, gloo_evens) if rank % 2 == 0 else (odds, gloo_odds)
    failures += [f"new_group: {f}" for f in check_collectives(
        rank, world, dtypes=(torch.float32,), ops=("SUM", "MAX"), exact=exact, group=mine, reference_group=ref)]
    mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):
        g = mesh.get_group(dim)
        t = torch.full((3,), float(rank + 1), device=_device())
        dist.all_reduce(t, group=g)
        want = float(sum(r + 1 for r in dist.get_process_group_ranks(g)))
        if t.cpu().tolist() != [want] * 3:
            failures.append(f"rank {rank}: mesh dim {dim}: all_reduce gave {t.cpu().tolist()}, want {want}")
    for g in (evens, odds, gloo_evens, gloo_odds):
        if g != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(g)
    return failures


def init_variants_job(rank: int, world: int, port: int, variants: Sequence[str]) -> Dict[str, Any]:
    """Each way to initialize runs an all_reduce of tpu tensors (and barrier): "tpu_dist", "None" (no backend:
    torch picks its accelerator's), "device_id" (no backend, the group bound to a tpu device) and
    "cpu:gloo,tpu:tpu_dist" (which also reduces cpu tensors)."""
    from torch_tpu.distributed import get_transport

    res = {}
    for i, variant in enumerate(variants):
        store = dist.TCPStore("127.0.0.1", port + i, world, rank == 0, timeout=datetime.timedelta(seconds=60))
        kwargs: Dict[str, Any] = {}
        if variant == "device_id":
            kwargs["device_id"] = _device()
        elif variant != "None":
            kwargs["backend"] = variant
        dist.init_process_group(store=store, rank=rank, world_size=world, **kwargs)
        t = torch.ones(2, device=_device()) * (rank + 1)
        dist.all_reduce(t)
        dist.barrier()
        entry = {"backend": dist.get_backend(), "transport": get_transport(), "value": t.cpu().tolist()}
        if variant.startswith("cpu:"):
            c = torch.ones(2) * (rank + 1)
            dist.all_reduce(c)
            entry["cpu_value"] = c.tolist()
        res[variant] = entry
        dist.destroy_process_group()
    return res


def dies_job(rank: int, world: int) -> Optional[str]:
    """Rank 1 exits in the middle; the others must get an error (not hang)."""
    t = torch.ones(4, device=_device())
    dist.all_reduce(t)
    t.cpu()
    if rank == 1:
        os._exit(3)
    t0 = time.time()
    try:
        dist.all_reduce(t)
        t.cpu()
        return None
    except Exception as e:  # noqa: BLE001 - the error is the result
        return f"{time.time() - t0:.1f}s {type(e).__name__}: {e}"


def mismatch_job(rank: int, world: int, numel: int = 4) -> Optional[str]:
    """Ranks pass all_reduce tensors of different sizes (numel, 2 * numel): every rank must get a clear error."""
    t = torch.ones(numel if rank == 0 else 2 * numel, device=_device())
    t0 = time.time()
    try:
        dist.all_reduce(t)
        t.cpu()
        return None
    except Exception as e:  # noqa: BLE001 - the error is the result
        return f"{time.time() - t0:.1f}s {type(e).__name__}: {e}"


_DIRECT_CASES = [  # (dtype, op, numel): numels split unevenly over 2 and 3 ranks and over 256 KiB pieces
    (torch.float32, "SUM", 300_007),
    (torch.bfloat16, "SUM", 200_003),
    (torch.float16, "MAX", 170_001),
    (torch.int64, "MIN", 70_001),
    (torch.int32, "PRODUCT", 90_011),
    (torch.int64, "BXOR", 65_539),
    (torch.uint8, "BAND", 300_001),
    (torch.float64, "SUM", 40_000),
    (torch.float32, "AVG", 100_003),
    (torch.bfloat16, "AVG", 150_001),
]


def _direct_input(rank: int, dtype: torch.dtype, op: str, numel: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + numel)
    if op == "PRODUCT":
        return torch.randint(1, 3, (numel,), generator=g).to(dtype)
    if op in ("BXOR", "BAND"):
        return torch.randint(0, 256, (numel,), generator=g).to(dtype)
    if dtype in (torch.float32, torch.float64):
        return torch.randn(numel, generator=g, dtype=dtype)
    return torch.randint(-8, 9, (numel,), generator=g).to(dtype)


def _direct_expected(world: int, dtype: torch.dtype, op: str, numel: int) -> torch.Tensor:
    ins = [_direct_input(r, dtype, op, numel) for r in range(world)]
    out = ins[0].clone()
    for t in ins[1:]:
        if op in ("SUM", "AVG"):
            out = out + t
        elif op == "PRODUCT":
            out = out * t
        elif op == "MAX":
            out = torch.maximum(out, t)
        elif op == "MIN":
            out = torch.minimum(out, t)
        elif op == "BXOR":
            out = out ^ t
        elif op == "BAND":
            out = out & t
    return out / world if op == "AVG" else out


def direct_allreduce_job(rank: int, world: int) -> Dict[str, Any]:
    """Large all_reduces (the same-host direct path unless TORCH_TPU_DIST_DIRECT=0) against the reduction of
    every rank's input on CPU; a small one and a strided view; how many took the direct path; a digest of each
    result (ranks must agree bitwise)."""
    import hashlib

    dev = _device()
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("tpu"))
    failures, digests, direct = [], [], []

    def run(name: str, x: torch.Tensor, want: torch.Tensor, op: str) -> None:
        before = backend.direct_allreduces
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
        got = x.cpu()
        direct.append(backend.direct_allreduces - before)
        digests.append(hashlib.sha1(got.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest())
        exact = not (op in ("SUM", "AVG") and want.dtype in (torch.float32, torch.float64))
        ok = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        if not ok:
            failures.append(f"{name}: max diff {(got.double() - want.double()).abs().max().item()}")

    for dtype, op, numel in _DIRECT_CASES:
        x = _direct_input(rank, dtype, op, numel).to(dev)
        run(f"{dtype} {op} [{numel}]", x, _direct_expected(world, dtype, op, numel), op)
    # Small: Gloo.
    run("small", _direct_input(rank, torch.float32, "SUM", 1000).to(dev), _direct_expected(world, torch.float32, "SUM", 1000), "SUM")
    # A strided view of a larger tensor: the rest of the tensor is left alone.
    base = torch.full((2, 150_001), -1.0)  # row 0: 600 KB
    base[0] = _direct_input(rank, torch.float32, "MAX", 150_001)
    x = base.to(dev)
    view = x[0]
    run("row view", view, _direct_expected(world, torch.float32, "MAX", 150_001), "MAX")
    if not bool((x[1].cpu() == -1.0).all()):
        failures.append("row view: the other row changed")
    return {"failures": failures, "digests": digests, "direct": direct}


# ---------------------------------------------------------------------------------------------------- training


def _build(factory, *args):
    with _LOCK:
        return seeded(0, factory, *args)


def _batches(world: int, steps: int, per_rank: int = 2, seq: int = 8) -> List[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, CFG.vocab, (world * per_rank, seq + 1), generator=g) for _ in range(steps)]


def _loss(model: nn.Module, b: torch.Tensor) -> torch.Tensor:
    logits = model(b[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), b[:, 1:].reshape(-1))


def _train(model: nn.Module, batches: List[torch.Tensor], mean_over_ranks: bool, foreach: Optional[bool] = None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=foreach)
    out = []
    for b in batches:
        loss = _loss(model, b.to(_device()))
        opt.zero_grad()
        loss.backward()
        opt.step()
        l = loss.detach().clone()
        if mean_over_ranks:
            dist.all_reduce(l, op=dist.ReduceOp.AVG)
        out.append(l.item())
    return out


class _TPBlock(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.norm = RMSNorm(d)
        self.up = nn.Linear(d, h)
        self.down = nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TPNet(nn.Module):
    """Embedding, residual blocks (RMSNorm, up, down) and a head: a plan exercising Colwise, Rowwise and
    SequenceParallel (all-gather and reduce-scatter along the sequence)."""

    def __init__(self, vocab: int = 64, d: int = 32, h: int = 64, n: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_TPBlock(d, h) for _ in range(n))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.norm(x))


def _tp_plan(model: TPNet) -> Dict[str, Any]:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    plan: Dict[str, Any] = {
        "blocks.0": PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),),
                                       use_local_output=True),
        "norm": SequenceParallel(use_local_output=True),
        "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }
    for i in range(len(model.blocks)):
        plan[f"blocks.{i}.norm"] = SequenceParallel(use_local_output=True)
        plan[f"blocks.{i}.up"] = ColwiseParallel(input_layouts=Shard(1))
        plan[f"blocks.{i}.down"] = RowwiseParallel(output_layouts=Shard(1))
    return plan


def training_job(rank: int, world: int, modes=("ddp", "fsdp2", "tp"), steps: int = 10) -> Dict[str, Any]:
    """Losses of 10 training steps under each parallelism; rank 0 adds the single-device references (the
    decoder on the concatenated batch; TPNet on the same batch)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.nn.parallel import DistributedDataParallel as DDP

    res: Dict[str, Any] = {}
    batches = _batches(world, steps)
    local = [b.chunk(world)[rank] for b in batches]
    if "ddp" in modes:
        model = DDP(_build(Qwen3Decoder, CFG).to(_device()), bucket_cap_mb=0.01)
        res["ddp"] = _train(model, local, mean_over_ranks=True)
    if "fsdp2" in modes:
        # The mesh is explicit: fully_shard's default mesh is torch's accelerator's (cpu on the CPU plugin unless
        # TORCH_TPU_ACCELERATOR=1).
        mesh = init_device_mesh("tpu", (world,))
        model = _build(Qwen3Decoder, CFG).to(_device())
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        res["fsdp2"] = _train(model, local, mean_over_ranks=True)
    if "tp" in modes:
        mesh = init_device_mesh("tpu", (world,))
        model = _build(TPNet).to(_device())
        parallelize_module(model, mesh, _tp_plan(model))
        # Not every parameter is a DTensor (the embedding is replicated as a plain tensor): no foreach steps.
        res["tp"] = _train(model, _batches(1, steps), mean_over_ranks=False, foreach=False)
    if rank == 0:
        if "ddp" in modes or "fsdp2" in modes:
            res["reference"] = _train(_build(Qwen3Decoder, CFG).to(_device()), batches, mean_over_ranks=False)
        if "tp" in modes:
            res["tp_reference"] = _train(_build(TPNet).to(_device()), _batches(1, steps), mean_over_ranks=False)
    return res


def compile_job(rank: int, world: int) -> Dict[str, Any]:
    """Functional collectives inside torch.compile(backend="tpu") graphs (also fullgraph=True) match eager."""
    import torch.distributed._functional_collectives as funcol

    import torch_tpu

    group = dist.group.WORLD

    def f(x, w):
        y = (x @ w).relu()
        y = funcol.all_reduce(y, "sum", group)
        z = funcol.all_gather_tensor(y * 2, 0, group)
        return z.sum(0) + 1

    dev = _device()
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank)).to(dev)
    w = torch.randn(8, 8, generator=torch.Generator().manual_seed(9)).to(dev)
    before = dict(torch_tpu.compile_stats())
    diffs = []
    for fullgraph in (False, True):
        cf = torch.compile(f, backend="tpu", fullgraph=fullgraph)
        for xi in (x, x + 1):
            diffs.append((f(xi, w).cpu() - cf(xi, w).cpu()).abs().max().item())
    after = torch_tpu.compile_stats()
    return {"diffs": diffs, "collective_nodes": after["collective_nodes"] - before["collective_nodes"],
            "program_collectives": after["program_collectives"] - before["program_collectives"],
            "fallback_nodes": after["fallback_nodes"] - before["fallback_nodes"]}


def ddp_features_job(rank: int, world: int) -> Dict[str, Any]:
    """DDP communication hooks (futures) and no_sync: a Python allreduce hook gives the default hook's losses;
    inside no_sync gradients stay local, the next synchronized backward averages them."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    batches = [b.chunk(world)[rank] for b in _batches(world, 3)]
    plain = _train(DDP(_build(Qwen3Decoder, CFG).to(_device()), bucket_cap_mb=0.01), batches, True)
    hooked_model = DDP(_build(Qwen3Decoder, CFG).to(_device()), bucket_cap_mb=0.01)
    hooked_model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    hooked = _train(hooked_model, batches, True)

    model = DDP(_build(Qwen3Decoder, CFG).to(_device()))
    p = model.module.lm_head.weight
    with model.no_sync():
        _loss(model, batches[0].to(_device())).backward()
    local = p.grad.detach().clone()
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    differ_in_no_sync = not all(torch.equal(gathered[0].cpu(), g.cpu()) for g in gathered[1:])
    _loss(model, batches[1].to(_device())).backward()  # synchronizes the accumulated gradients
    synced = p.grad.detach().clone()
    dist.all_gather(gathered, synced)
    equal_after = all(torch.equal(gathered[0].cpu(), g.cpu()) for g in gathered[1:])
    return {"plain": plain, "hooked": hooked, "differ_in_no_sync": differ_in_no_sync, "equal_after": equal_after}


# ---------------------------------------------------------------------------------------------------- compiled TP


class _CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all_reduce of the gradient backward (functional collectives)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        import torch.distributed._functional_collectives as funcol

        return funcol.all_reduce(g, "sum", dist.group.WORLD)


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all_reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        import torch.distributed._functional_collectives as funcol

        return funcol.all_reduce(x, "sum", dist.group.WORLD)

    @staticmethod
    def backward(ctx, g):
        return g


class TPMLP(nn.Module):
    """A replicated input projection, a tensor-parallel MLP (up split by rows, down by columns, Megatron style with
    functional collectives) and a replicated head: an all_reduce in the forward and one in the backward."""

    def __init__(self, d: int = 16, h: int = 32, rank: int = 0, world: int = 1) -> None:
        super().__init__()
        self.inp = nn.Linear(d, d)
        full_up, full_down = nn.Linear(d, h), nn.Linear(h, d)
        self.head = nn.Linear(d, 4)
        k = h // world
        self.up_w = nn.Parameter(full_up.weight.detach()[rank * k:(rank + 1) * k].clone())
        self.up_b = nn.Parameter(full_up.bias.detach()[rank * k:(rank + 1) * k].clone())
        self.down_w = nn.Parameter(full_down.weight.detach()[:, rank * k:(rank + 1) * k].clone())
        self.down_b = nn.Parameter(full_down.bias.detach().clone())
        self.world = world

    def forward(self, x):
        x = self.inp(x)
        h = _CopyToTP.apply(x) if self.world > 1 else x
        y = F.gelu(h @ self.up_w.T + self.up_b) @ self.down_w.T
        if self.world > 1:
            y = _ReduceFromTP.apply(y)
        return self.head(x + y + self.down_b)


def _launches() -> int:
    import torch_tpu

    torch.tpu.synchronize()
    return torch_tpu.launch_count()


def _mlp_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(model(x), y)


def _sgd_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float = 0.1) -> torch.Tensor:
    """A whole training step: forward, loss.backward() and an SGD update (compiled: one graph with
    torch._dynamo.config.trace_autograd_ops, see docs/distributed.md)."""
    loss = F.mse_loss(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)
            p.grad = None
    return loss.detach()


def compiled_tp_training_job(rank: int, world: int, steps: int = 3) -> Dict[str, Any]:
    """A compiled tensor-parallel MLP training step (fullgraph): launches of its forward and of its backward per
    step (backward by autograd), then of the whole step compiled as one function (backward and update inside), and
    their losses and final weights next to the same training on one device."""

    import torch_tpu

    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(steps)]
    model = _build(TPMLP, 16, 32, rank, world).to(_device())
    step_fn = torch.compile(_mlp_loss, backend="tpu", fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = dict(torch_tpu.compile_stats())
    seed = torch.ones((), device=_device())
    losses, fw_launches, bw_launches = [], [], []
    for x, y in data:
        x, y = x.to(_device()), y.to(_device())
        opt.zero_grad()
        n0 = _launches()
        loss = step_fn(model, x, y)
        n1 = _launches()
        loss.backward(seed)
        n2 = _launches()
        opt.step()
        fw_launches.append(n1 - n0)
        bw_launches.append(n2 - n1)
        losses.append(loss.item())
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items() if not k.startswith(("up_", "down_w"))}
    # The whole step (forward, loss.backward(), the update) inside the compiled function: one graph.
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        model = _build(TPMLP, 16, 32, rank, world).to(_device())
        whole = torch.compile(_sgd_step, backend="tpu", fullgraph=True, dynamic=False)
        step_losses, step_launches = [], []
        for x, y in data:
            x, y = x.to(_device()), y.to(_device())
            n0 = _launches()
            loss = whole(model, x, y)
            step_launches.append(_launches() - n0)
            step_losses.append(loss.item())
    after = torch_tpu.compile_stats()
    res: Dict[str, Any] = {
        "losses": losses, "fw_launches": fw_launches, "bw_launches": bw_launches, "weights": weights,
        "step_losses": step_losses, "step_launches": step_launches,
        "step_weights": {k: v.detach().cpu() for k, v in model.state_dict().items()
                         if not k.startswith(("up_", "down_w"))},
        "program_collectives": after["program_collectives"] - before["program_collectives"],
        "collective_nodes": after["collective_nodes"] - before["collective_nodes"],
    }
    if rank == 0:
        ref = _build(TPMLP, 16, 32, 0, 1).to(_device())
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        ref_losses = []
        for x, y in data:
            ref_opt.zero_grad()
            loss = _mlp_loss(ref, x.to(_device()), y.to(_device()))
            loss.backward()
            ref_opt.step()
            ref_losses.append(loss.item())
        res["ref_losses"] = ref_losses
        res["ref_weights"] = {k: v.detach().cpu() for k, v in ref.state_dict().items()
                              if not k.startswith(("up_", "down_w"))}
    return res


class TPDecoder(nn.Module):
    """A small decoder for one-token decode steps: embedding, layers of attention over a fixed-size KV cache and an
    MLP, a replicated head; with world > 1 tensor-parallel (q/k/v/up split by heads/rows, o/down by columns, an
    all_reduce after each)."""

    def __init__(self, vocab: int = 32, d: int = 16, heads: int = 4, h: int = 32, layers: int = 2,
                 cache: int = 8, rank: int = 0, world: int = 1) -> None:
        super().__init__()
        self.world = world
        self.down_module = False
        self.heads, self.hd, self.cache_len = heads, d // heads, cache
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            layer = nn.Module()
            layer.norm1, layer.norm2 = RMSNorm(d), RMSNorm(d)
            layer.q, layer.k, layer.v, layer.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            layer.up, layer.down = nn.Linear(d, h), nn.Linear(h, d)
            self.layers.append(layer)
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if world > 1:  # Megatron-style shards: q/k/v/up by output rows (heads), o/down by input columns
            with torch.no_grad():
                for layer in self.layers:
                    for n in ("q", "k", "v", "up"):
                        lin = getattr(layer, n)
                        k = lin.out_features // world
                        lin.weight = nn.Parameter(lin.weight[rank * k:(rank + 1) * k].clone())
                        if lin.bias is not None:
                            lin.bias = nn.Parameter(lin.bias[rank * k:(rank + 1) * k].clone())
                    for n in ("o", "down"):
                        lin = getattr(layer, n)
                        k = lin.in_features // world
                        lin.weight = nn.Parameter(lin.weight[:, rank * k:(rank + 1) * k].clone())

    def _reduce(self, y):
        return _ReduceFromTP.apply(y) if self.world > 1 else y

    def _down(self, layer, a):
        if self.down_module:  # parallelize_module's RowwiseParallel reduces inside the module
            return layer.down(a)
        return self._reduce(F.linear(a, layer.down.weight)) + layer.down.bias

    def forward(self, tok, pos, k_cache, v_cache):
        # tok [B], pos [cache] one-hot float mask of the current position, caches [layers, B, cache, d_local]
        x = self.embed(tok)
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            h = layer.norm1(x)
            q, k, v = layer.q(h), layer.k(h), layer.v(h)
            heads = q.shape[-1] // self.hd  # this rank's heads
            kc = k_cache[i] * (1 - pos)[None, :, None] + k[:, None, :] * pos[None, :, None]
            vc = v_cache[i] * (1 - pos)[None, :, None] + v[:, None, :] * pos[None, :, None]
            new_k.append(kc)
            new_v.append(vc)
            qh = q.view(q.shape[0], heads, 1, self.hd)
            kh = kc.view(kc.shape[0], self.cache_len, heads, self.hd).transpose(1, 2)
            vh = vc.view(vc.shape[0], self.cache_len, heads, self.hd).transpose(1, 2)
            valid = torch.cumsum(pos.flip(0), 0).flip(0)  # positions up to the current one
            scores = (qh @ kh.transpose(-1, -2)) / self.hd ** 0.5 + (valid - 1)[None, None, None, :] * 1e9
            att = (scores.softmax(-1) @ vh).reshape(q.shape[0], heads * self.hd)
            x = x + self._reduce(layer.o(att))
            x = x + self._down(layer, F.gelu(layer.up(layer.norm2(x))))
        return self.head(self.norm(x)), torch.stack(new_k), torch.stack(new_v)


def dtensor_decoder(world: int, **cfg: int) -> TPDecoder:
    """TPDecoder with full weights on this rank's device, tensor-parallel through parallelize_module (q/k/v/up
    ColwiseParallel, o/down RowwiseParallel: DTensor weights, the all_reduces from DTensor's redistribution)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    model = _build(TPDecoder, *[cfg[k] for k in ("vocab", "d", "heads", "h", "layers", "cache")]).to(_device())
    model.down_module = True
    plan: Dict[str, Any] = {}
    for i in range(len(model.layers)):
        plan.update({f"layers.{i}.{n}": ColwiseParallel() for n in ("q", "k", "v", "up")})
        plan.update({f"layers.{i}.{n}": RowwiseParallel() for n in ("o", "down")})
    parallelize_module(model, init_device_mesh("tpu", (world,)), plan)
    return model


def _decode(step, tok: torch.Tensor, model: TPDecoder, d_local: int, steps: int, count: bool):
    dev = tok.device
    layers = len(model.layers)
    k = torch.zeros(layers, tok.shape[0], model.cache_len, d_local, device=dev)
    v = torch.zeros_like(k)
    toks, launches = [], []
    for p in range(steps):
        pos = torch.zeros(model.cache_len, device=dev)
        pos[p] = 1.0
        n0 = _launches() if count else 0
        logits, k, v = step(tok, pos, k, v)
        if count:
            launches.append(_launches() - n0)
        tok = logits.argmax(-1)
        toks.append(tok.cpu().tolist())
    return toks, launches, logits.detach().cpu()


def compiled_tp_decode_job(rank: int, world: int, steps: int = 5) -> Dict[str, Any]:
    """Greedy decode steps of a tensor-parallel decoder compiled with fullgraph: launches per step, tokens and
    last logits next to the same model on one device."""

    import torch_tpu

    model = _build(TPDecoder, 32, 16, 4, 32, 2, 8, rank, world).to(_device())
    d = model.embed.embedding_dim
    tok = torch.tensor([1, 7], device=_device())
    before = dict(torch_tpu.compile_stats())
    with torch.no_grad():
        step = torch.compile(model, backend="tpu", fullgraph=True)
        toks, launches, logits = _decode(step, tok, model, d // world, steps, count=True)
    after = torch_tpu.compile_stats()
    res: Dict[str, Any] = {
        "tokens": toks, "launches": launches, "logits": logits,
        "program_collectives": after["program_collectives"] - before["program_collectives"],
        "collective_nodes": after["collective_nodes"] - before["collective_nodes"],
    }
    if rank == 0:
        ref = _build(TPDecoder).to(_device())
        with torch.no_grad():
            res["ref_tokens"], _, res["ref_logits"] = _decode(ref, tok, ref, d, steps, count=False)
    return res


# ---------------------------------------------------------------------------------------------------- compiled DTensor


class DTMLP(nn.Module):
    """An MLP for parallelize_module: up ColwiseParallel, down RowwiseParallel (DTensor weights; the forward's
    all_reduce comes from DTensor's redistribution), a replicated head."""

    def __init__(self, d: int = 8, h: int = 16) -> None:
        super().__init__()
        self.up = nn.Linear(d, h)
        self.down = nn.Linear(h, d)
        self.head = nn.Linear(d, 4)

    def forward(self, x):
        return self.head(x + self.down(F.gelu(self.up(x))))


def _dt_model(world: int) -> nn.Module:
    model = _build(DTMLP).to(_device())
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("tpu", (world,))
        parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    return model


def _full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().cpu()


def _dt_data(steps: int):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)) for _ in range(steps)]


def compiled_dtensor_job(rank: int, world: int, steps: int = 3) -> Dict[str, Any]:
    """A parallelize_module MLP compiled with fullgraph: launches per inference step, per whole training step
    (backward and update inside the compiled function) and per forward / backward of a step whose backward runs
    outside; outputs, losses and weights next to the same model on one device (rank 0 adds the references)."""
    import torch_tpu

    data = _dt_data(steps)
    dev = _device()
    before = dict(torch_tpu.compile_stats())
    res: Dict[str, Any] = {}

    # Inference.
    model = _dt_model(world)
    fwd = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    outs, launches = [], []
    with torch.no_grad():
        for x, _ in data:
            x = x.to(dev)
            n0 = _launches()
            out = fwd(x)
            launches.append(_launches() - n0)
            outs.append(out.cpu())
    res["infer_launches"], res["infer_outs"] = launches, outs

    # A whole training step in one graph.
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        model = _dt_model(world)
        # (dynamic=False: other jobs compile _sgd_step with other shapes; dynamo's recompiles with symbolic sizes
        # of a parallelized module fail in its guards when ranks are threads)
        step = torch.compile(_sgd_step, backend="tpu", fullgraph=True, dynamic=False)
        losses, launches = [], []
        for x, y in data:
            x, y = x.to(dev), y.to(dev)
            n0 = _launches()
            loss = step(model, x, y)
            launches.append(_launches() - n0)
            losses.append(loss.item())
    res["step_launches"], res["step_losses"] = launches, losses
    res["step_weights"] = {k: _full(v) for k, v in model.state_dict().items()}

    # Forward compiled, backward by autograd (AOTAutograd's two graphs).
    model = _dt_model(world)
    loss_fn = torch.compile(lambda m, x, y: F.mse_loss(m(x), y), backend="tpu", fullgraph=True, dynamic=False)
    seed = torch.ones((), device=dev)
    fw, bw = [], []
    for x, y in data:
        x, y = x.to(dev), y.to(dev)
        n0 = _launches()
        loss = loss_fn(model, x, y)
        n1 = _launches()
        loss.backward(seed)
        fw.append(n1 - n0)
        bw.append(_launches() - n1)
        model.zero_grad(set_to_none=True)
    res["fw_launches"], res["bw_launches"] = fw, bw

    after = torch_tpu.compile_stats()
    res["program_collectives"] = after["program_collectives"] - before["program_collectives"]
    res["collective_nodes"] = after["collective_nodes"] - before["collective_nodes"]
    if rank == 0:
        ref = _dt_model(1)
        with torch.no_grad():
            res["ref_outs"] = [ref(x.to(dev)).cpu() for x, _ in data]
        ref_losses = [_sgd_step(ref, x.to(dev), y.to(dev)).item() for x, y in data]
        res["ref_losses"] = ref_losses
        res["ref_weights"] = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
    return res


def compiled_dtensor_trace_job(rank: int, world: int, barrier: threading.Barrier) -> Dict[str, Any]:
    """One warm step of a parallelize_module MLP compiled with fullgraph (inference, then a whole training step
    with its backward and update inside), for a profiler trace the caller opens around it: ``barrier`` has
    ``world + 1`` parties, the caller waits with the ranks when they are warm (then starts its profile), when they
    may step, and when the step is done on every device (then stops it). Returns the launches each rank counted on
    its device in each step, and the step's result (rank 0 adds one device's)."""
    import torch_tpu

    data = _dt_data(3)
    dev = _device()
    res: Dict[str, Any] = {}

    def traced(step: Any, name: str) -> None:
        for args in data[:2]:  # compiled, then warm
            step(*args)
        torch.tpu.synchronize()
        barrier.wait()  # warm: the caller starts its profile
        barrier.wait()  # profiling
        n0 = torch_tpu.launch_count()
        out = step(*data[2])
        torch.tpu.synchronize()
        res[name + "_launches"] = torch_tpu.launch_count() - n0
        res[name + "_out"] = out.detach().cpu()
        barrier.wait()  # done on every device: the caller stops its profile
        barrier.wait()

    model = _dt_model(world)
    fwd = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        traced(lambda x, _y: fwd(x.to(dev)), "infer")
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        model = _dt_model(world)
        whole = torch.compile(_sgd_step, backend="tpu", fullgraph=True, dynamic=False)
        traced(lambda x, y: whole(model, x.to(dev), y.to(dev)), "step")
    if rank == 0:
        ref = _dt_model(1)
        with torch.no_grad():
            res["ref_infer"] = ref(data[2][0].to(dev)).cpu()
        res["ref_step"] = [_sgd_step(ref, x.to(dev), y.to(dev)).item() for x, y in data][-1]
    return res


def group_input_job(rank: int, world: int) -> Dict[str, Any]:
    """An ATen graph that takes its process group as an input (an opaque object; dynamo itself puts group names into
    graphs): compiled with the group as a constant of the program, run with it, then called with another group."""
    import torch.fx as fx

    from torch_tpu._dynamo_backend import _compile_aten_graph

    dev = _device()
    group = dist.group.WORLD
    other = dist.new_group(list(range(world)))
    x = torch.full((4,), float(rank + 1), device=dev)
    g = fx.Graph()
    px, pg = g.placeholder("x"), g.placeholder("group")
    px.meta["val"], pg.meta["val"] = x, group
    red = g.call_function(torch.ops._c10d_functional.all_reduce.default, (px, "sum", pg))
    red.meta["val"] = x
    out = g.call_function(torch.ops._c10d_functional.wait_tensor.default, (red,))
    out.meta["val"] = x
    g.output((out, pg))
    runner = _compile_aten_graph(fx.GraphModule(torch.nn.Module(), g), [x, group], f"group_input{rank}", True)
    n0 = _launches()
    y, handed = runner([x, group])
    res: Dict[str, Any] = {"value": y.cpu().tolist(), "launches": _launches() - n0, "handed": handed is group}
    try:
        runner([x, other])
        res["other"] = None
    except RuntimeError as e:
        res["other"] = str(e)
    dist.destroy_process_group(other)
    return res
