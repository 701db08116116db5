"""torch-tpu demo: a small transformer-style model on `tpu` and on CPU, forward and training, side by side.

Runs on whichever PJRT plugin torch_tpu finds (by default OpenXLA's CPU plugin, `pip install xla-cpu-pjrt`).
"""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=100, d=64, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def train(model, device, steps=10):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    t0 = time.perf_counter()
    for _ in range(steps):
        ids = torch.randint(0, 100, (4, 16), generator=g).to(device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 100), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, time.perf_counter() - t0, model


def main():
    info = torch_tpu._C._plugin_info()
    print(f"torch {torch.__version__}; tpu devices: {torch.tpu.device_count()} "
          f"(PJRT plugin {info['path'].split('/')[-1]}, API {info['api_version']}, platform {info['platform_name']})")
    torch.manual_seed(0)
    model = TinyLM()
    ids = torch.randint(0, 100, (2, 12))

    with torch.no_grad():
        ref = model(ids)
        tpu_model = copy.deepcopy(model).to("tpu")
        t0 = time.perf_counter()
        out = tpu_model(ids.to("tpu"))
        out_cpu = out.cpu()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        out2 = tpu_model(ids.to("tpu")).cpu()
        second = time.perf_counter() - t0
    err = (out_cpu - ref).abs().max().item()
    print(f"forward: max |tpu - cpu| = {err:.2e}  (first call {first:.2f} s incl. compiles, "
          f"second {second * 1e3:.1f} ms)")

    cpu_losses, cpu_s, _ = train(copy.deepcopy(model), "cpu")
    tpu_losses, tpu_s, _ = train(copy.deepcopy(model), "tpu")
    print("training losses (cpu):", " ".join(f"{v:.4f}" for v in cpu_losses))
    print("training losses (tpu):", " ".join(f"{v:.4f}" for v in tpu_losses))
    loss_err = max(abs(a - b) for a, b in zip(cpu_losses, tpu_losses))
    stats = torch_tpu.cache_stats()
    print(f"programs compiled: {stats['compiles']} in {stats['compile_seconds']:.1f} s; "
          f"cache hits {stats['hits']}/{stats['requests']}")
    print(f"ops that fell back to CPU: {torch_tpu._C._fallback_counts() or 'none'}")
    ok = err < 1e-3 and loss_err < 1e-3
    print("tpu matches cpu:", "YES" if ok else f"NO (forward {err:.2e}, losses {loss_err:.2e})")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
