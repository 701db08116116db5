"""Hugging Face Transformers (5.x, with accelerate) on tpu, checked against the CPU run of the same weights.

Every model is built from its config with random weights, saved with ``save_pretrained`` and loaded back with
``from_pretrained(dir, device_map="tpu", dtype=...)`` (no hub access needed). Covered:

* tiny Qwen3, Llama and Gemma3-text causal LMs in float32 and bfloat16: ``generate()`` greedy with the default
  dynamic cache and with ``cache_implementation="static"`` (eager), identical tokens in float32, logits within
  tolerance in bfloat16;
* sampling (top_k=1 equals greedy; a seeded sample is reproducible);
* compiled: static-cache generation with Transformers' auto-compile (which picks backend "tpu" on tpu), with an
  explicit ``CompileConfig(backend="tpu", fullgraph=True)``, and ``model.forward = torch.compile(..., backend="tpu")``;
  after warm-up a second generate compiles nothing;
* ``is_torch_tpu_available()``, ``caching_allocator_warmup``, a short ``Trainer`` run, a BERT text-classification
  and a ViT image-classification pipeline.

Ops that fall back to the CPU are recorded, not hidden (``KNOWN_FALLBACKS``, now empty): generate, sampling
included, must run with zero fallbacks.

Kept small for CI (hidden 32, 2 layers, a 6-token prompt, 6 new tokens): XLA compiles are CPU-heavy.
"""

from __future__ import annotations

import os

import pytest
import torch

import torch_tpu

import accelerate  # noqa: E402,F401  (installed by scripts/setup.sh: a missing package fails, never skips)
import transformers  # noqa: E402

from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    BertConfig,
    BertTokenizer,
    CompileConfig,
    Gemma3TextConfig,
    LlamaConfig,
    Qwen3Config,
    ViTConfig,
    ViTImageProcessor,
    pipeline,
)

# Ops generate() may run on the CPU fallback (no tpu lowering); none left: sampling (multinomial) and the
# special-token checks (isin) run on the device.
KNOWN_FALLBACKS: set = set()

_COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
CONFIGS = {
    "qwen3": lambda: Qwen3Config(**_COMMON),
    "llama": lambda: LlamaConfig(**_COMMON),
    # Gemma3 text: sliding-window layers (window 4 < prompt + new tokens), logit soft-capping, gemma norms.
    "gemma3": lambda: Gemma3TextConfig(**_COMMON, sliding_window=4),
}
PROMPT = torch.tensor([[1, 5, 9, 3, 7, 2]])
NEW_TOKENS = 6
BF16_ATOL = 2e-2  # bf16 logits (values of order 1); observed max |tpu - cpu| about 2e-3


def _unexpected_fallbacks():
    return {k: v for k, v in torch_tpu._C._fallback_counts().items() if k not in KNOWN_FALLBACKS}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """name -> directory of a saved tiny model (random weights, seed 0)."""
    out = {}
    for name, make in CONFIGS.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(make())
        d = tmp_path_factory.mktemp(name)
        model.save_pretrained(d)
        out[name] = str(d)
    return out


def _load(path, device, dtype):
    if device == "cpu":
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return AutoModelForCausalLM.from_pretrained(path, device_map=device, dtype=dtype)


def _generate(model, **kw):
    out = model.generate(PROMPT.to(model.device), max_new_tokens=NEW_TOKENS, output_logits=True,
                         return_dict_in_generate=True, **kw)
    return out.sequences.cpu(), [l.float().cpu() for l in out.logits]


def _assert_matches_cpu(cpu, tpu, dtype):
    (seq_c, logits_c), (seq_t, logits_t) = cpu, tpu
    if dtype == torch.float32:
        assert seq_t.tolist() == seq_c.tolist()
        for a, b in zip(logits_c, logits_t):
            torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
        return
    # bfloat16: logits close at every step up to the first token where the runs may part (a near-tie only).
    n = seq_c.shape[1] - PROMPT.shape[1]
    for i in range(n):
        torch.testing.assert_close(logits_t[i], logits_c[i], atol=BF16_ATOL, rtol=0)
        if seq_t[0, PROMPT.shape[1] + i] != seq_c[0, PROMPT.shape[1] + i]:
            top2 = logits_c[i][0].topk(2).values
            assert (top2[0] - top2[1]).item() < 2 * BF16_ATOL, f"step {i}: tokens differ without a near-tie"
            return


def test_is_torch_tpu_available():
    from transformers.utils import is_torch_tpu_available

    assert is_torch_tpu_available()
    model = AutoModelForSequenceClassification.from_config(
        BertConfig(vocab_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64))
    assert model.to("tpu").device.type == "tpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_generate_greedy_eager_matches_cpu(checkpoints, name, dtype):
    ref = _load(checkpoints[name], "cpu", dtype)
    model = _load(checkpoints[name], "tpu", dtype)
    assert model.device.type == "tpu" and model.dtype == dtype
    torch_tpu.reset_fallback_counts()
    for cache in (None, "static"):
        # disable_compile: Transformers auto-compiles static-cache decoding on tpu; this test is the eager path.
        kw = dict(do_sample=False, cache_implementation=cache, disable_compile=True)
        _assert_matches_cpu(_generate(ref, **kw), _generate(model, **kw), dtype)
    assert _unexpected_fallbacks() == {}


def test_generate_sampling(checkpoints):
    ref = _load(checkpoints["llama"], "cpu", torch.float32)
    model = _load(checkpoints["llama"], "tpu", torch.float32)
    greedy = _generate(ref, do_sample=False)[0]
    torch_tpu.reset_fallback_counts()
    # top_k=1 sampling is greedy whatever the random stream.
    assert _generate(model, do_sample=True, top_k=1)[0].tolist() == greedy.tolist()
    # The tpu generator (not CPU's) drives sampling: same seed, same tokens; tokens in the vocabulary.
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        runs.append(_generate(model, do_sample=True, top_k=20, temperature=1.5)[0])
    assert runs[0].tolist() == runs[1].tolist()
    assert runs[0].shape == greedy.shape and 0 <= int(runs[0].min()) and int(runs[0].max()) < 128
    assert _unexpected_fallbacks() == {}


def _compile_counts():
    s = torch_tpu._dynamo_backend.compile_stats()
    return {k: s[k] for k in ("graphs", "compiles", "runs", "fallback_nodes", "eager_graphs", "partitioned_graphs")}


@pytest.mark.parametrize(
    "name,dtype",
    [("qwen3", torch.float32), ("llama", torch.float32), ("gemma3", torch.float32), ("qwen3", torch.bfloat16)],
    ids=["qwen3-f32", "llama-f32", "gemma3-f32", "qwen3-bf16"],
)
def test_generate_static_cache_compiled(checkpoints, fresh_dynamo, name, dtype):
    """Transformers' auto-compile of static-cache decoding (backend "tpu" on tpu): matches CPU; after warm-up a
    second generate compiles nothing (no dynamo graph, no XLA compile)."""
    ref = _load(checkpoints[name], "cpu", dtype)
    model = _load(checkpoints[name], "tpu", dtype)
    assert model._default_compile_config().backend == "tpu"
    cpu = _generate(ref, do_sample=False, cache_implementation="static", disable_compile=True)
    torch_tpu.reset_fallback_counts()
    torch_tpu._dynamo_backend.reset_compile_stats()
    _assert_matches_cpu(cpu, _generate(model, do_sample=False, cache_implementation="static"), dtype)
    warm = _compile_counts()
    assert warm["graphs"] >= 1 and warm["runs"] >= NEW_TOKENS - 1, warm  # decoding really ran compiled
    assert warm["fallback_nodes"] == 0 and warm["eager_graphs"] == 0, warm
    torch_tpu._dynamo_backend.reset_compile_stats()
    _assert_matches_cpu(cpu, _generate(model, do_sample=False, cache_implementation="static"), dtype)
    again = _compile_counts()
    assert again["graphs"] == 0 and again["compiles"] == 0, again  # no recompiles after warm-up
    assert again["runs"] == warm["runs"]
    assert _unexpected_fallbacks() == {}


def test_generate_static_cache_fullgraph_compile_config(checkpoints, fresh_dynamo):
    ref = _load(checkpoints["llama"], "cpu", torch.float32)
    model = _load(checkpoints["llama"], "tpu", torch.float32)
    cc = CompileConfig(backend="tpu", fullgraph=True, dynamic=False, mode="default")
    cpu = _generate(ref, do_sample=False)
    for i in range(2):
        torch_tpu._dynamo_backend.reset_compile_stats()
        _assert_matches_cpu(cpu, _generate(model, do_sample=False, cache_implementation="static", compile_config=cc),
                            torch.float32)
        c = _compile_counts()
        assert c["fallback_nodes"] == 0 and c["eager_graphs"] == 0 and c["runs"] >= NEW_TOKENS - 1, c
    assert c["graphs"] == 0 and c["compiles"] == 0, c


@pytest.mark.parametrize("cache", [None, "static"], ids=["dynamic-cache", "static-cache"])
def test_generate_forward_compiled(checkpoints, fresh_dynamo, cache):
    """The model's forward compiled by the user with backend "tpu" (shapes static; the dynamic cache grows each
    step, so there each step is a new graph)."""
    ref = _load(checkpoints["qwen3"], "cpu", torch.float32)
    model = _load(checkpoints["qwen3"], "tpu", torch.float32)
    model.forward = torch.compile(model.forward, backend="tpu", dynamic=False)
    kw = dict(do_sample=False, cache_implementation=cache, disable_compile=True)
    cpu = _generate(ref, **kw)
    torch_tpu._dynamo_backend.reset_compile_stats()
    _assert_matches_cpu(cpu, _generate(model, **kw), torch.float32)
    c = _compile_counts()
    assert c["graphs"] >= 1 and c["fallback_nodes"] == 0 and c["eager_graphs"] == 0, c
    torch_tpu._dynamo_backend.reset_compile_stats()
    _assert_matches_cpu(cpu, _generate(model, **kw), torch.float32)
    c = _compile_counts()
    assert c["graphs"] == 0 and c["compiles"] == 0 and c["runs"] == NEW_TOKENS, c


def test_caching_allocator_warmup(checkpoints):
    from transformers.modeling_utils import caching_allocator_warmup

    model = AutoModelForCausalLM.from_config(CONFIGS["llama"]())
    before = torch.tpu.memory_allocated()
    caching_allocator_warmup(model, {n: torch.device("tpu") for n in model.state_dict()}, None)
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == before  # the warm-up tensor was temporary
    # And it is what from_pretrained(device_map="tpu") runs: the loaded model works.
    m = _load(checkpoints["llama"], "tpu", torch.float32)
    with torch.no_grad():
        assert torch.isfinite(m(PROMPT.to("tpu")).logits).all().item()


class _LMData(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 128, (16, 12), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def _train(path, device, tmp_path, monkeypatch):
    from transformers import Trainer, TrainingArguments

    # WORKAROUND (HF stack, reported): accelerate 1.15 does not detect torch_tpu (PartialState.default_device
    # knows cuda/xpu/npu/mlu/musa/hpu/neuron/mps only), so without it Accelerator.prepare moves the model back to
    # CPU while Trainer moves batches to args.device == tpu:0. ACCELERATE_TORCH_DEVICE=tpu makes accelerate agree.
    if device == "tpu":
        monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "tpu")
    else:
        monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)
    model = _load(path, device, torch.float32)
    args = TrainingArguments(output_dir=str(tmp_path / device), per_device_train_batch_size=8, max_steps=6,
                             learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no",
                             use_cpu=device == "cpu", seed=0, dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=_LMData())
    assert args.device.type == device
    trainer.train()
    assert next(trainer.model.parameters()).device.type == device
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_trainer_lowers_loss_like_cpu(checkpoints, tmp_path, monkeypatch):
    cpu = _train(checkpoints["llama"], "cpu", tmp_path, monkeypatch)
    torch_tpu.reset_fallback_counts()
    tpu = _train(checkpoints["llama"], "tpu", tmp_path, monkeypatch)
    assert torch_tpu._C._fallback_counts() == {}
    assert len(tpu) == len(cpu) == 6
    assert tpu[-1] < tpu[0]
    for a, b in zip(cpu, tpu):
        assert abs(a - b) < 1e-3, (cpu, tpu)


def _bert_tokenizer(d):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "the a cat dog sat on mat is good bad very movie".split()
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(words) + "\n")
    return BertTokenizer(os.path.join(d, "vocab.txt")), len(words)


def test_bert_text_classification_pipeline(tmp_path):
    tok, vocab = _bert_tokenizer(str(tmp_path))
    cfg = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, num_labels=3)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(cfg).save_pretrained(tmp_path)
    texts = ["the cat sat on the mat", "a very good movie"]
    ref = pipeline("text-classification", model=AutoModelForSequenceClassification.from_pretrained(tmp_path),
                   tokenizer=tok, top_k=None, device="cpu")
    # NOTE (HF stack, reported): pipeline(model=<model loaded with device_map="tpu">) without device= moves the
    # model back to the CPU (Pipeline.__init__ maps device=0 only to cuda/npu/xpu/... and from_pretrained sets
    # no hf_device_map for a single-device map); pass device="tpu".
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path, device_map="tpu")
    pipe = pipeline("text-classification", model=model, tokenizer=tok, top_k=None, device="tpu")
    assert pipe.device.type == "tpu" and pipe.model.device.type == "tpu"
    torch_tpu.reset_fallback_counts()
    got, want = pipe(texts), ref(texts)
    assert torch_tpu._C._fallback_counts() == {}
    for g, w in zip(got, want):
        assert [d["label"] for d in g] == [d["label"] for d in w]
        for a, b in zip(g, w):
            assert abs(a["score"] - b["score"]) < 1e-5
    # The model class directly, with padding and an attention mask.
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        a = ref.model(**enc).logits
        b = model(**{k: v.to("tpu") for k, v in enc.items()}).logits.cpu()
    torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_vit_image_classification_pipeline(tmp_path):
    import numpy as np
    from PIL import Image
    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, num_labels=4)
    torch.manual_seed(0)
    AutoModelForImageClassification.from_config(cfg).save_pretrained(tmp_path)
    proc = ViTImageProcessor(size={"height": 32, "width": 32})
    img = Image.fromarray((np.random.RandomState(0).rand(40, 48, 3) * 255).astype("uint8"))
    ref = pipeline("image-classification", model=AutoModelForImageClassification.from_pretrained(tmp_path),
                   image_processor=proc, top_k=None, device="cpu")
    model = AutoModelForImageClassification.from_pretrained(tmp_path, device_map="tpu")
    pipe = pipeline("image-classification", model=model, image_processor=proc, top_k=None, device="tpu")
    assert pipe.model.device.type == "tpu"
    torch_tpu.reset_fallback_counts()
    got, want = pipe(img), ref(img)
    assert torch_tpu._C._fallback_counts() == {}
    assert [d["label"] for d in got] == [d["label"] for d in want]
    for a, b in zip(got, want):
        assert abs(a["score"] - b["score"]) < 1e-5


_SPEC_CHECK = '''
import torch
from transformers import testing_utils as tu
assert tu.torch_device == "tpu", tu.torch_device
tu.backend_manual_seed("tpu", 0)
tu.backend_empty_cache("tpu")
assert tu.backend_device_count("tpu") >= 1
x = torch.ones(1024, device=tu.torch_device) + 1
tu.backend_synchronize("tpu")
assert tu.backend_memory_allocated("tpu") >= 4096, tu.backend_memory_allocated("tpu")
tu.backend_reset_peak_memory_stats("tpu")
assert tu.backend_torch_accelerator_module("tpu") is torch.tpu
print("SPEC OK")
'''


def test_transformers_test_device_spec(tmp_path):
    """TRANSFORMERS_TEST_DEVICE=tpu / TRANSFORMERS_TEST_BACKEND=torch_tpu / TRANSFORMERS_TEST_DEVICE_SPEC as
    docs/hf_testing.md describes (the spec must be a bare file name in the working directory)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "tests" / "transformers_device_spec.py", tmp_path / "transformers_device_spec.py")
    env = dict(os.environ, TRANSFORMERS_TEST_DEVICE="tpu", TRANSFORMERS_TEST_BACKEND="torch_tpu",
               TRANSFORMERS_TEST_DEVICE_SPEC="transformers_device_spec.py",
               PYTHONPATH=os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-c", _SPEC_CHECK], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "SPEC OK" in proc.stdout, proc.stdout + proc.stderr
