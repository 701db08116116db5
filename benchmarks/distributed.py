"""tpu_dist benchmarks: all_reduce bus bandwidth and DDP step time.

    python benchmarks/distributed.py                      # everything below, default sizes
    python benchmarks/distributed.py --section allreduce --ranks 2 4 --max-mib 256
    python benchmarks/distributed.py --section xla        # XLA transport vs host transport, ranks as threads
    python benchmarks/distributed.py --section ddp        # DDP step time at 1, 2, 4 ranks
    python benchmarks/distributed.py --section compiled   # compiled TP decode step: one program vs split
    python benchmarks/distributed.py --section compiled --ranks 2 4 --models dtensor --repeats 3

* allreduce: ranks are processes (torchrun-style, TCPStore on 127.0.0.1). In the same processes and the same
  run, each size is reduced (float32 SUM) on tpu tensors through tpu_dist (host transport), on CPU tensors
  through torch's Gloo backend, and on tpu tensors through a tpu_dist group with its same-host direct path off
  (TORCH_TPU_DIST_DIRECT=0: Gloo on the device buffers); the three alternate so machine load hits all alike. Bus bandwidth =
  bytes * 2 (n - 1) / n / time, the median of --repeats timings of --iters back-to-back all_reduces.
* xla: ranks are threads of one process, one virtual device each (TORCH_TPU_NUM_DEVICES), with the XLA transport
  (collective programs) and then the host transport (Gloo between the threads).
Every all_reduce size is checked once (ones summed over n ranks give n); a wrong result exits 1.

* compiled: a tensor-parallel decoder (attention over a KV cache, MLP; Megatron-style shards, an all_reduce
  after attention and after the MLP of every layer, as functional collectives) compiled with
  torch.compile(backend="tpu", fullgraph=True), ranks as threads on the XLA transport. Each greedy decode step
  runs once as ONE program per rank with the all_reduces inside, and once split at its collectives
  (options={"collectives_in_program": False}: compiled partitions, each collective its own program through the
  process group). The two alternate step by step in the same run; programs launched per step are counted
  (torch_tpu.launch_count) and the tokens and logits of both must be equal. The same decoder made
  tensor-parallel by parallelize_module (DTensor weights: ColwiseParallel q/k/v/up, RowwiseParallel o/down, the
  all_reduces from DTensor's redistribution) is the "DTensor" row.

* ddp: a Qwen3-style decoder trained with DDP (AdamW) at 1, 2 and 4 processes, a fixed batch per rank (weak
  scaling); median step time after warm-up. Every process competes for the same cores: on a 2-core machine the
  step time grows with the number of ranks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))  # models.py
sys.path.insert(0, os.path.join(HERE, ".."))


def _bus_bw(nbytes: int, n: int, seconds: float) -> float:
    return nbytes * 2 * (n - 1) / n / seconds / 1e9


def _time_allreduce(t, group, iters: int, sync) -> float:
    import torch.distributed as dist

    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    sync(t)
    return (time.perf_counter() - t0) / iters


def allreduce_job(rank: int, world: int, sizes_mib: List[float], iters: int, repeats: int) -> List[Dict[str, Any]]:
    import torch
    import torch.distributed as dist

    gloo = dist.new_group(backend="gloo")
    # The same backend with its same-host direct path off (all_reduce through Gloo on the device buffers).
    os.environ["TORCH_TPU_DIST_DIRECT"] = "0"
    try:
        via_gloo = dist.new_group(backend="tpu_dist")
    finally:
        os.environ.pop("TORCH_TPU_DIST_DIRECT")
    dev = torch.device("tpu", torch.tpu.current_device())
    out = []
    for mib in sizes_mib:
        numel = int(mib * (1 << 20)) // 4
        x = torch.ones(numel, device=dev)
        y = torch.ones(numel, device=dev)
        c = torch.ones(numel)
        tpu_sync = lambda t: t[:1].cpu()  # noqa: E731 - waits for the last collective's output
        cpu_sync = lambda t: None  # noqa: E731
        _time_allreduce(x, None, 1, tpu_sync)  # warm-up (compiles, connections), checked
        _time_allreduce(y, via_gloo, 1, tpu_sync)
        _time_allreduce(c, gloo, 1, cpu_sync)
        ok = bool((x.cpu() == world).all()) and bool((y.cpu() == world).all()) and bool((c == world).all())
        tpu_t, cpu_t, via_t = [], [], []
        for _ in range(repeats):
            tpu_t.append(_time_allreduce(x, None, iters, tpu_sync))
            cpu_t.append(_time_allreduce(c, gloo, iters, cpu_sync))
            via_t.append(_time_allreduce(y, via_gloo, iters, tpu_sync))
        out.append({"mib": mib, "tpu_s": statistics.median(tpu_t), "gloo_s": statistics.median(cpu_t),
                    "via_gloo_s": statistics.median(via_t), "ok": ok})
        del x, y, c
    dist.destroy_process_group(via_gloo)
    dist.destroy_process_group(gloo)
    return out


def _bandwidth_table(title: str, names: Tuple[str, str], ranks: List[int],
                     measure: Callable[[int], Optional[List[Tuple[float, float, float, bool]]]]) -> bool:
    """Prints one all_reduce bandwidth table: per rank count, `measure(n)` gives (MiB, seconds of the first
    variant, seconds of the second, results right) per size, or None when it cannot run."""
    print(f"\n## {title}\n")
    print(f"| ranks | size | {names[0]} GB/s | {names[1]} GB/s | ratio |")
    print("|---:|---:|---:|---:|---:|")
    ok = True
    for n in ranks:
        rows = measure(n)
        if rows is None:
            print(f"| {n} | (needs TORCH_TPU_NUM_DEVICES >= {n}) | | | |")
            continue
        for mib, s_a, s_b, right in rows:
            ok &= right
            nbytes = int(mib * (1 << 20))
            a, b = _bus_bw(nbytes, n, s_a), _bus_bw(nbytes, n, s_b)
            print(f"| {n} | {mib:g} MiB | {a:.3f} | {b:.3f} | {a / b:.2f} |", flush=True)
    return ok


def run_allreduce(ranks: List[int], sizes: List[float], iters: int, repeats: int) -> bool:
    from torch_tpu.testing.dist import run_processes

    print("\n## all_reduce bus bandwidth, host transport (processes): tpu_dist on tpu tensors vs Gloo on CPU "
          "tensors\n")
    print("| ranks | size | tpu_dist GB/s | Gloo GB/s | ratio | tpu_dist, direct path off GB/s | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for n in ranks:
        res = run_processes(allreduce_job, n, args=(sizes, iters, repeats), timeout=3600)
        for k, row in enumerate(res[0]):
            ok &= all(r[k]["ok"] for r in res)
            nbytes = int(row["mib"] * (1 << 20))
            a, b, c = (_bus_bw(nbytes, n, row[key]) for key in ("tpu_s", "gloo_s", "via_gloo_s"))
            print(f"| {n} | {row['mib']:g} MiB | {a:.3f} | {b:.3f} | {a / b:.2f} | {c:.3f} | {c / b:.2f} |",
                  flush=True)
    return ok


def xla_job(rank: int, world: int, sizes_mib: List[float], iters: int, repeats: int) -> List[Dict[str, Any]]:
    import torch

    from torch_tpu.distributed import get_transport

    dev = torch.device("tpu", rank)
    out = []
    for mib in sizes_mib:
        x = torch.ones(int(mib * (1 << 20)) // 4, device=dev)
        sync = lambda t: t[:1].cpu()  # noqa: E731
        _time_allreduce(x, None, 1, sync)
        ok = bool((x.cpu() == world).all())
        ts = [_time_allreduce(x, None, iters, sync) for _ in range(repeats)]
        out.append({"mib": mib, "s": statistics.median(ts), "transport": get_transport(), "ok": ok})
    return out


def run_xla(ranks: List[int], sizes: List[float], iters: int, repeats: int) -> bool:
    import torch

    from torch_tpu.distributed import run_ranks_as_threads

    def measure(n: int) -> Optional[List[Tuple[float, float, float, bool]]]:
        if torch.tpu.device_count() < n:
            return None
        results = {}
        for transport in ("xla", "host"):
            os.environ["TORCH_TPU_DIST_TRANSPORT"] = transport
            try:
                results[transport] = run_ranks_as_threads(xla_job, n, args=(sizes, iters, repeats), timeout=3600)[0]
            finally:
                os.environ.pop("TORCH_TPU_DIST_TRANSPORT", None)
        assert all(r["transport"] == t for t, rows in results.items() for r in rows)
        return [(rx["mib"], rx["s"], rh["s"], rx["ok"] and rh["ok"]) for rx, rh in zip(results["xla"], results["host"])]

    return _bandwidth_table("all_reduce bus bandwidth, ranks as threads (one virtual device each): XLA vs host "
                            "transport", ("XLA", "host"), ranks, measure)


def compiled_job(rank: int, world: int, cfg: Dict[str, int], batch: int, steps: int, repeats: int,
                 kind: str) -> Dict[str, Any]:
    import torch
    import torch._dynamo

    import dist_jobs
    import torch_tpu

    dev = torch.device("tpu", rank)
    # Every rank and mode compiles the decoder's forward once more (dynamo's config is per thread).
    torch._dynamo.config.recompile_limit = 64
    if kind == "dtensor":
        model = dist_jobs.dtensor_decoder(world, **cfg)
    else:
        sizes = [cfg[k] for k in ("vocab", "d", "heads", "h", "layers", "cache")]
        model = dist_jobs._build(dist_jobs.TPDecoder, *sizes, rank, world).to(dev)
    d_local = cfg["d"] // world
    modes = {
        "program": torch.compile(model, backend="tpu", fullgraph=True, options={"collectives_in_program": True}),
        "split": torch.compile(model, backend="tpu", fullgraph=True, options={"collectives_in_program": False}),
    }
    positions = []
    for p in range(cfg["cache"]):
        pos = torch.zeros(cfg["cache"], device=dev)
        pos[p] = 1.0
        positions.append(pos)

    def decode(step, n: int):
        k = torch.zeros(cfg["layers"], batch, cfg["cache"], d_local, device=dev)
        v = torch.zeros_like(k)
        tok = torch.arange(batch, device=dev) % cfg["vocab"]
        toks, launches = [], 0
        torch.tpu.synchronize()
        t0 = time.perf_counter()
        for p in range(n):
            n0 = torch_tpu.launch_count(dev)
            logits, k, v = step(tok, positions[p], k, v)
            launches += torch_tpu.launch_count(dev) - n0
            tok = logits.argmax(-1)
            toks.append(tok)
        last = logits.cpu()
        seconds = time.perf_counter() - t0
        return seconds / n, launches / n, [t.cpu().tolist() for t in toks], last

    times: Dict[str, List[float]] = {m: [] for m in modes}
    out: Dict[str, Any] = {}
    with torch.no_grad():
        for m, fn in modes.items():  # warm-up: compiles
            decode(fn, steps)
        for _ in range(repeats):
            for m, fn in modes.items():
                s, launches, toks, logits = decode(fn, steps)
                times[m].append(s)
                out[m] = {"launches": launches, "tokens": toks, "logits": logits}
    for m in modes:
        out[m]["s"] = statistics.median(times[m])
    out["equal"] = out["program"]["tokens"] == out["split"]["tokens"] and bool(
        (out["program"]["logits"] - out["split"]["logits"]).abs().max() <= 1e-5)
    return out


_KINDS = {"functional": "functional collectives (Megatron-style)", "dtensor": "DTensor (parallelize_module)"}


def run_compiled(ranks: List[int], cfg: Dict[str, int], batch: int, steps: int, repeats: int,
                 kinds: List[str]) -> bool:
    import torch

    from torch_tpu.distributed import run_ranks_as_threads

    print(f"\n## Compiled tensor-parallel decode step (ranks as threads, XLA transport): one program vs split at "
          f"collectives\n\ndecoder {cfg}, batch {batch}; median over {repeats} runs of {steps} greedy steps\n")
    print("| model | ranks | programs/step, one program | programs/step, split | ms/step, one program | "
          "ms/step, split | split / one program | results equal |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|")
    ok = True
    for kind in kinds:
        for n in ranks:
            if torch.tpu.device_count() < n:
                print(f"| {_KINDS[kind]} | {n} | (needs TORCH_TPU_NUM_DEVICES >= {n}) | | | | | |")
                continue
            res = run_ranks_as_threads(compiled_job, n, args=(cfg, batch, steps, repeats, kind), timeout=3600)
            r = res[0]
            equal = all(x["equal"] for x in res) and all(x["program"]["tokens"] == r["program"]["tokens"]
                                                         for x in res)
            ok &= equal
            a, b = r["program"]["s"] * 1e3, r["split"]["s"] * 1e3
            print(f"| {_KINDS[kind]} | {n} | {r['program']['launches']:g} | {r['split']['launches']:g} | {a:.2f} | "
                  f"{b:.2f} | {b / a:.2f} | {'yes' if equal else 'NO'} |", flush=True)
    return ok


def ddp_job(rank: int, world: int, steps: int, warmup: int, hidden: int, layers: int, batch: int,
            seq: int) -> Dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from models import DecoderConfig, Qwen3Decoder, seeded

    cfg = DecoderConfig(vocab=512, hidden=hidden, layers=layers, heads=8, kv_heads=4, head_dim=hidden // 8,
                        intermediate=4 * hidden)
    dev = torch.device("tpu", torch.tpu.current_device())
    model = seeded(0, Qwen3Decoder, cfg).to(dev)
    if world > 1:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    data = torch.randint(0, cfg.vocab, (batch, seq + 1), generator=g).to(dev)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    params = sum(p.numel() for p in model.parameters())
    return {"step_s": statistics.median(times), "params": params}


def run_ddp(ranks: List[int], steps: int, hidden: int, layers: int, batch: int, seq: int) -> None:
    from torch_tpu.testing.dist import run_processes

    print(f"\n## DDP step time (decoder hidden {hidden}, {layers} layers, batch {batch} x {seq} tokens per rank)\n")
    print("| ranks | params | step time | tokens/s (all ranks) | scaling vs 1 rank |")
    print("|---:|---:|---:|---:|---:|")
    base = None
    for n in ranks:
        backend = None if n == 1 else "tpu_dist"
        res = run_processes(ddp_job, n, args=(steps, 3, hidden, layers, batch, seq), backend=backend, timeout=3600)
        step = max(r["step_s"] for r in res)
        tps = n * batch * seq / step
        base = base or tps
        print(f"| {n} | {res[0]['params'] / 1e6:.2f} M | {step * 1000:.1f} ms | {tps:.0f} | {tps / base:.2f}x |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--section", choices=["all", "allreduce", "xla", "ddp", "compiled"], default="all")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--min-mib", type=float, default=1)
    ap.add_argument("--max-mib", type=float, default=256)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ddp-ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--ddp-steps", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--decode-batch", type=int, default=4)
    ap.add_argument("--models", nargs="+", choices=sorted(_KINDS), default=["functional", "dtensor"],
                    help="compiled section: tensor parallelism by functional collectives and/or DTensor")
    a = ap.parse_args()
    sizes = []
    s = a.min_mib
    while s <= a.max_mib:
        sizes.append(s)
        s *= 4
    os.environ.setdefault("TORCH_TPU_NUM_DEVICES", str(max(a.ranks)))
    import torch  # noqa: F401  (imports torch_tpu with the device count above)
    import torch_tpu  # noqa: F401

    print(f"# tpu_dist benchmarks ({os.cpu_count()} cores)")
    ok = True
    if a.section in ("all", "allreduce"):
        ok &= run_allreduce(a.ranks, sizes, a.iters, a.repeats)
    if a.section in ("all", "xla"):
        ok &= run_xla(a.ranks, [x for x in sizes if x <= 64], a.iters, a.repeats)
    if a.section in ("all", "compiled"):
        cfg = dict(vocab=512, d=256, heads=8, h=1024, layers=4, cache=a.decode_steps)
        ok &= run_compiled(a.ranks, cfg, a.decode_batch, a.decode_steps, a.repeats, a.models)
    if a.section in ("all", "ddp"):
        run_ddp(a.ddp_ranks, a.ddp_steps, a.hidden, a.layers, a.batch, a.seq)
    if not ok:
        print("FAILED: a result was wrong")
        sys.exit(1)


if __name__ == "__main__":
    main()
