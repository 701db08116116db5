"""torch-tpu demo: PyTorch and Hugging Face models on `tpu`, each checked against the same run on the CPU.

1. A small transformer-style model, forward and training (the backend's own checks).
2. A tiny causal LM (Qwen3 config, random weights, saved and loaded with `from_pretrained(device_map="tpu")`):
   greedy generation eager, then with Transformers' static-cache auto-compile (backend "tpu"); timings,
   compile counts, recompiles after warm-up, and whether the tokens equal the CPU's.
3. A tiny SD3-style diffusion pipeline (Diffusers, random weights): `pipe.to("tpu")`, eager then with
   `pipe.transformer.compile(backend="tpu")`; latents compared with the CPU.

`--profile trace.json`: part 2's warm compiled generate runs once more under torch.profiler (host and device
activity); the device programs are printed and the Chrome trace written (open it in https://ui.perfetto.dev).

Runs on whichever PJRT plugin torch_tpu finds (by default OpenXLA's CPU plugin, `pip install xla-cpu-pjrt`).
Exits non-zero if any tpu result does not match the CPU. Parts 2-3 need transformers/diffusers (scripts/setup.sh
installs them); without them they are skipped with a message.
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


def part_pytorch():
    print("== 1. PyTorch model: forward and training ==")
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
        tpu_model(ids.to("tpu")).cpu()
        second = time.perf_counter() - t0
    err = (out_cpu - ref).abs().max().item()
    print(f"forward: max |tpu - cpu| = {err:.2e}  (first call {first:.2f} s incl. compiles, "
          f"second {second * 1e3:.1f} ms)")

    cpu_losses, cpu_s, _ = train(copy.deepcopy(model), "cpu")
    tpu_losses, tpu_s, _ = train(copy.deepcopy(model), "tpu")
    print("training losses (cpu):", " ".join(f"{v:.4f}" for v in cpu_losses))
    print("training losses (tpu):", " ".join(f"{v:.4f}" for v in tpu_losses))
    loss_err = max(abs(a - b) for a, b in zip(cpu_losses, tpu_losses))
    ok = err < 1e-3 and loss_err < 1e-3
    print("part 1 tpu matches cpu:", "YES" if ok else f"NO (forward {err:.2e}, losses {loss_err:.2e})")
    return ok


def _compile_counts():
    """(dynamo graphs traced, XLA programs built or read from the disk cache, XLA compile seconds)."""
    s = torch_tpu._dynamo_backend.compile_stats()
    return s["graphs"], s["compiles"] + s["disk_hits"], s["compile_seconds"]


def profile_generate(model, prompt, gen, path):
    """The warm compiled generate under torch.profiler: device programs with their device time, Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        model.generate(prompt.to("tpu"), **gen).cpu()
    prof.export_chrome_trace(path)
    programs = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.PrivateUse1:
            n, us = programs.get(e.name, (0, 0.0))
            programs[e.name] = (n + 1, us + e.device_time_total)
    total = sum(us for _, us in programs.values())
    print(f"  profiled compiled generate: {sum(n for n, _ in programs.values())} device programs, "
          f"{total / 1e3:.1f} ms device time; trace written to {path}")
    for name, (n, us) in sorted(programs.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"    {us / 1e3:8.2f} ms  {n:4d} x  {name}")
    return bool(programs) and total > 0


def part_causal_lm(tmp, profile_path=None):
    print("\n== 2. Transformers: tiny Qwen3 causal LM, generate() greedy ==")
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp)
    ref = AutoModelForCausalLM.from_pretrained(tmp)
    model = AutoModelForCausalLM.from_pretrained(tmp, device_map="tpu")
    prompt = torch.tensor([[1, 17, 42, 99, 7, 3, 250, 8]])
    gen = dict(max_new_tokens=16, do_sample=False, cache_implementation="static")
    want = ref.generate(prompt, disable_compile=True, **gen)
    ok = True
    for label, extra in (("eager   ", dict(disable_compile=True)), ("compiled", {})):
        for run in ("first", "second"):
            torch_tpu._dynamo_backend.reset_compile_stats()
            t0 = time.perf_counter()
            got = model.generate(prompt.to("tpu"), **gen, **extra).cpu()
            dt = time.perf_counter() - t0
            graphs, compiles, csec = _compile_counts()
            match = got.tolist() == want.tolist()
            ok &= match
            note = f"dynamo graphs {graphs}, XLA programs {compiles} ({csec:.1f} s)" if extra == {} else ""
            if run == "second" and extra == {} and (graphs or compiles):
                ok = False
                note += "  <- recompiled after warm-up!"
            print(f"  {label} {run:6s}: {dt:6.2f} s, {16 / dt:7.1f} tok/s, tokens match cpu: {match}  {note}")
    if profile_path:
        ok &= profile_generate(model, prompt, gen, profile_path)
    print("  tokens:", want[0, prompt.shape[1]:].tolist())
    print("part 2 tpu matches cpu:", "YES" if ok else "NO")
    return ok


def _tiny_sd3(d):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection, T5Config, T5EncoderModel

    from torch_tpu.testing.hf import char_clip_tokenizer

    tok = char_clip_tokenizer(d)
    clip = dict(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=60, hidden_size=32, intermediate_size=37,
                num_attention_heads=4, num_hidden_layers=1, max_position_embeddings=16, projection_dim=32)
    torch.manual_seed(0)
    return StableDiffusion3Pipeline(
        transformer=SD3Transformer2DModel(sample_size=8, patch_size=1, in_channels=4, num_layers=1,
                                          attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32,
                                          joint_attention_dim=32, pooled_projection_dim=64, out_channels=4),
        text_encoder=CLIPTextModelWithProjection(CLIPTextConfig(**clip)),
        text_encoder_2=CLIPTextModelWithProjection(CLIPTextConfig(**clip)),
        text_encoder_3=T5EncoderModel(T5Config(vocab_size=60, d_model=32, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                                               relative_attention_num_buckets=8)),
        tokenizer=tok, tokenizer_2=tok, tokenizer_3=tok,
        vae=AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(4, 8), layers_per_block=1,
                          latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 2,
                          up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=1, use_quant_conv=False,
                          use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035),
        scheduler=FlowMatchEulerDiscreteScheduler())


def part_diffusion(tmp):
    print("\n== 3. Diffusers: tiny SD3-style pipeline, 16x16 image, 2 steps ==")
    from diffusers import StableDiffusion3Pipeline

    _tiny_sd3(tmp).save_pretrained(tmp)

    def run(pipe):
        pipe.set_progress_bar_config(disable=True)
        t0 = time.perf_counter()
        out = pipe("a cat", num_inference_steps=2, height=16, width=16, output_type="latent",
                   generator=torch.Generator().manual_seed(0)).images.cpu()
        return out, time.perf_counter() - t0

    want, cpu_s = run(StableDiffusion3Pipeline.from_pretrained(tmp))
    pipe = StableDiffusion3Pipeline.from_pretrained(tmp).to("tpu")
    ok = True
    print(f"  cpu              : {cpu_s:6.2f} s")
    for label in ("eager", "compiled"):
        if label == "compiled":
            pipe.transformer.compile(backend="tpu", dynamic=False)
        for rnd in ("first", "second"):
            torch_tpu._dynamo_backend.reset_compile_stats()
            got, dt = run(pipe)
            graphs, compiles, _ = _compile_counts()
            err = (got - want).abs().max().item()
            ok &= err < 1e-4
            note = f"dynamo graphs {graphs}, XLA programs {compiles}" if label == "compiled" else ""
            if label == "compiled" and rnd == "second" and (graphs or compiles):
                ok = False
                note += "  <- recompiled!"
            print(f"  {label:8s} {rnd:6s}  : {dt:6.2f} s, max |latents - cpu| = {err:.1e}  {note}")
    print("part 3 tpu matches cpu:", "YES" if ok else "NO")
    return ok


def main():
    import argparse
    import functools
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", metavar="TRACE_JSON", help="profile part 2's compiled generate into this Chrome trace")
    args = ap.parse_args()

    info = torch_tpu._C._plugin_info()
    print(f"torch {torch.__version__}; tpu devices: {torch.tpu.device_count()} "
          f"(PJRT plugin {info['path'].split('/')[-1]}, API {info['api_version']}, platform {info['platform_name']})")
    results = {"pytorch": part_pytorch()}
    for name, part, mods in (("causal-lm", functools.partial(part_causal_lm, profile_path=args.profile),
                              ("transformers", "accelerate")),
                             ("diffusion", part_diffusion, ("diffusers", "transformers"))):
        try:
            for m in mods:
                __import__(m)
        except ImportError as e:
            print(f"\n(skipping {name}: {e}; run scripts/setup.sh)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            results[name] = part(tmp)
    stats = torch_tpu.cache_stats()
    print(f"\neager programs compiled: {stats['compiles']} in {stats['compile_seconds']:.1f} s, "
          f"read from the disk cache: {stats['disk_hits']} in {stats['disk_seconds']:.1f} s; "
          f"built (meta + lowering) {stats['misses']} in {stats['lower_seconds']:.1f} s; "
          f"cache hits {stats['hits']}/{stats['requests']}")
    print(f"ops that fell back to CPU: {torch_tpu._C._fallback_counts() or 'none'}")
    ok = all(results.values())
    print("tpu matches cpu:", "YES" if ok else "NO (" + ", ".join(k for k, v in results.items() if not v) + ")")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("transformers", "diffusers", "accelerate", "torch._dynamo"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        from diffusers.utils import logging as df_logging

        df_logging.disable_progress_bar()
        df_logging.set_verbosity_error()
    except ImportError:
        pass
    main()
