"""Mixture-of-experts layers on tpu: ``aten::_grouped_mm`` (``F.grouped_mm``) and Transformers' MoE models.

* ``_grouped_mm`` in the forms Transformers and autograd use (2-D x 3-D with offsets forward; 2-D x 2-D and
  2-D x 3-D backward; also 3-D x 2-D and 3-D x 3-D), float32 and bfloat16, uneven groups, empty groups and rows
  past the last group, against PyTorch's CPU kernel: eager (one program per call, no CPU fallback) and inside
  ``torch.compile(backend="tpu", fullgraph=True)``, forward and backward; PyTorch's errors for bad input.
* integer ``histc`` (the token count per expert Transformers computes on tpu) against the float count on CPU.
* Qwen3-MoE and Mixtral built from configs (random weights, ``save_pretrained``, ``from_pretrained``) with each
  ``experts_implementation`` ("eager", "batched_mm", "grouped_mm"), eager and compiled, against the CPU run;
  one training step of the grouped_mm path.
* torch-tpu's fused layers for the ``kernels`` library (``torch_tpu/hub_kernels.py``): ``kernelize(model,
  device="tpu")`` with no user mapping and no hub access replaces Transformers' RMSNorm, MLP and experts modules
  (declared with ``use_kernel_forward_from_hub`` here: Transformers 5.24 leaves its own layers undecorated with
  kernels 0.17.2), eager and compiled, inference and training, against the CPU.

The CPU plugin runs the tiled-loop form of the grouped matmul (csrc/lowering/rules/grouped.cpp).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.testing.tolerances import tight_tol


def _offsets(sizes):
    return torch.tensor(sizes, dtype=torch.int32).cumsum(0, dtype=torch.int32)


# (group sizes, rows): an empty group first, uneven groups, an empty group inside, and rows past the last group.
CASES = {
    "uneven": ([0, 5, 1, 0, 9, 3], 24),
    "one_group": ([16], 16),
    "all_empty": ([0, 0, 0], 8),
    # One group far above the average: its rows past the first window go through the loop.
    "skewed": ([40, 1, 0, 2, 3], 50),
    # Many more groups than rows: no batched first window, every window in the loop.
    "few_rows": ([0, 1, 0, 0, 2, 0, 0, 1] * 4, 20),
}


def _ref_rows(x, w, sizes):
    """Per-group x_g @ w[g] in float64 (rows past the last group: zero)."""
    out = torch.zeros(x.shape[0], w.shape[-1], dtype=torch.float64)
    s = 0
    for g, n in enumerate(sizes):
        out[s:s + n] = x[s:s + n].double() @ w[g].double()
        s += n
    return out


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_grouped_mm_forward_backward_matches_cpu(case, dtype):
    sizes, L = CASES[case]
    G, K, N = len(sizes), 16, 24
    used = sum(sizes)
    torch.manual_seed(0)
    x = torch.randn(L, K, dtype=dtype)
    w = torch.randn(G, N, K, dtype=dtype)  # nn.Linear layout per expert, passed transposed (as Transformers does)
    offs = _offsets(sizes)
    grad = torch.randn(L, N, dtype=dtype)

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    yc = F.grouped_mm(xc, wc.transpose(-2, -1), offs=offs)
    yc.backward(grad)

    xt, wt = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
    torch_tpu.reset_fallback_counts()
    before = torch_tpu.cache_stats()["requests"]
    yt = F.grouped_mm(xt, wt.transpose(-2, -1), offs=offs.to("tpu"))
    assert torch_tpu.cache_stats()["requests"] - before == 1  # one program
    yt.backward(grad.to("tpu"))
    assert torch_tpu.fallback_counts() == {}

    tol = tight_tol(dtype)
    y = yt.detach().cpu()
    # Rows of a group: as the CPU kernel; rows past the last group: zero (the CPU kernel leaves them unset).
    torch.testing.assert_close(y[:used], yc.detach()[:used], **tol)
    assert (y[used:] == 0).all()
    torch.testing.assert_close(y.double(), _ref_rows(x, w.transpose(-2, -1), sizes), **tol, check_dtype=False)
    torch.testing.assert_close(xt.grad.cpu()[:used], xc.grad[:used], **tol)
    assert (xt.grad.cpu()[used:] == 0).all()
    # Weight gradient (the 2-D x 2-D form): empty groups get zero.
    ref_gw = torch.zeros(G, N, K, dtype=torch.float64)
    s = 0
    for g, n in enumerate(sizes):
        ref_gw[g] = grad[s:s + n].double().T @ x[s:s + n].double()
        s += n
    torch.testing.assert_close(wt.grad.cpu().double(), ref_gw, **tol)
    if used:
        torch.testing.assert_close(wt.grad.cpu()[torch.tensor(sizes) > 0], wc.grad[torch.tensor(sizes) > 0], **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_grouped_mm_other_forms_match_cpu(dtype):
    torch.manual_seed(1)
    sizes = [3, 0, 7, 4]
    offs = _offsets(sizes)
    G, M, K, N = 4, 8, 16, 8
    # 3-D x 2-D: the columns of b are grouped.
    a = torch.randn(G, M, K, dtype=dtype)
    b = torch.randn(K, 16, dtype=dtype)
    ref = torch._grouped_mm(a, b, offs)
    got = torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs.to("tpu")).cpu()
    torch.testing.assert_close(got[:, :14], ref[:, :14], **tight_tol(dtype))
    # 3-D x 3-D: a batched matmul (no offsets).
    b3 = torch.randn(G, K, N, dtype=dtype)
    torch.testing.assert_close(torch._grouped_mm(a.to("tpu"), b3.to("tpu")).cpu(), torch._grouped_mm(a, b3),
                               **tight_tol(dtype))
    # 2-D x 2-D: the contraction is grouped (autograd's weight gradient).
    p = torch.randn(M, 16, dtype=dtype)
    q = torch.randn(16, N, dtype=dtype)
    ref2 = torch.stack([p[:, s:e].double() @ q[s:e].double()
                        for s, e in zip([0] + offs.tolist()[:-1], offs.tolist())])
    got2 = torch._grouped_mm(p.to("tpu"), q.to("tpu"), offs.to("tpu")).cpu()
    torch.testing.assert_close(got2.double(), ref2, **tight_tol(dtype))


def test_grouped_mm_many_groups_and_rows():
    """Several tiles per group and several groups per tile (64 experts, 512 rows: a decode step's shape)."""
    torch.manual_seed(2)
    G, L, K, N = 64, 512, 32, 16
    ids = torch.randint(0, G, (L,)).sort().values
    sizes = torch.bincount(ids, minlength=G).tolist()
    x, w = torch.randn(L, K), torch.randn(G, K, N)
    got = F.grouped_mm(x.to("tpu"), w.to("tpu"), offs=_offsets(sizes).to("tpu")).cpu()
    torch.testing.assert_close(got, F.grouped_mm(x, w, offs=_offsets(sizes)), atol=1e-4, rtol=1e-4)


def test_grouped_mm_compiled_training_matches_cpu():
    torch.manual_seed(3)
    sizes, L = [2, 0, 6, 5], 16
    G, K, N = 4, 16, 8
    offs = _offsets(sizes)
    x, w = torch.randn(L, K), torch.randn(G, N, K)

    def step(x, w, offs):
        y = F.grouped_mm(x, w.transpose(-2, -1), offs=offs)
        return (y[:13] ** 2).sum()

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    step(xc, wc, offs).backward()
    xt, wt = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
    torch_tpu._dynamo_backend.reset_compile_stats()
    loss = torch.compile(step, backend="tpu", fullgraph=True)(xt, wt, offs.to("tpu"))
    loss.backward()
    s = torch_tpu.compile_stats()
    assert s["partitioned_graphs"] == 0 and s["eager_graphs"] == 0 and s["fallback_nodes"] == 0, s
    torch.testing.assert_close(loss.detach().cpu(), step(x, w, offs), atol=1e-3, rtol=1e-5)
    torch.testing.assert_close(xt.grad.cpu()[:13], xc.grad[:13], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, atol=1e-4, rtol=1e-4)


def test_grouped_mm_compiled_inference_packs_expert_weights():
    """An inference graph reads a [G, N, K] expert weight passed transposed through its packed [G, K, N] copy, made
    once and remade after the weight is written."""
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(3)
    G, L, K, N = 4, 24, 32, 48
    sizes = [5, 0, 11, 6]
    used = sum(sizes)

    class Experts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(G, N, K))  # nn.Linear's layout per expert

        def forward(self, x, offs):
            return F.grouped_mm(x, self.w.transpose(-2, -1), offs=offs)

    m = Experts()
    x, offs = torch.randn(L, K), _offsets(sizes)
    with torch.no_grad():
        ref = m(x, offs)
    mt = copy.deepcopy(m).to("tpu")
    f = torch.compile(mt, backend="tpu", fullgraph=True)
    torch_tpu._dynamo_backend.reset_compile_stats()
    with torch.no_grad():
        for _ in range(2):
            got = f(x.to("tpu"), offs.to("tpu")).cpu()
            torch.testing.assert_close(got[:used], ref[:used], atol=1e-4, rtol=1e-4)
            assert (got[used:] == 0).all()
        assert torch_tpu.compile_stats()["packed_weights"] == 1  # made once, then reused
        mt.w.mul_(2)
        got = f(x.to("tpu"), offs.to("tpu")).cpu()
    torch.testing.assert_close(got[:used], 2 * ref[:used], atol=1e-4, rtol=1e-4)
    assert torch_tpu.compile_stats()["packed_weights"] == 2  # the written weight's new copy
    torch._dynamo.reset()


def test_ragged_dot_form_reaches_the_compiler(run_python):
    """The chlo.ragged_dot form (TPU and GPU plugins) forced on the CPU plugin: the module parses and becomes XLA's
    ragged-dot instruction, which only XLA:CPU's emitter refuses; the call then falls back to the CPU, correctly."""
    out = run_python(
        """
        import torch, torch_tpu
        import torch.nn.functional as F
        sizes = [3, 0, 5, 4]
        offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        x, w = torch.randn(16, 16), torch.randn(4, 16, 24)
        p, q = torch.randn(8, 16), torch.randn(16, 8)
        y = F.grouped_mm(x.to("tpu"), w.to("tpu"), offs=offs.to("tpu")).cpu()
        g = torch._grouped_mm(p.to("tpu"), q.to("tpu"), offs.to("tpu")).cpu()
        torch.testing.assert_close(y[:12], F.grouped_mm(x, w, offs=offs)[:12])
        torch.testing.assert_close(g, torch._grouped_mm(p, q, offs))
        print(torch_tpu.fallback_counts()["aten::_grouped_mm"], torch_tpu.fallback_reasons()["aten::_grouped_mm"])
        """,
        env={"TORCH_TPU_RAGGED_DOT": "1", "TORCH_TPU_CACHE_DIR": ""},
    )
    count, reason = out.stdout.strip().split(" ", 1)
    assert count == "2", out.stdout
    assert "HLO opcode `ragged-dot` is not supported by XLA:CPU" in reason, reason


def test_grouped_mm_errors_like_cpu():
    x, w = torch.randn(8, 4), torch.randn(2, 4, 4)
    offs = torch.tensor([3, 8], dtype=torch.int32)
    calls = [
        (lambda d: torch._grouped_mm(x.double().to(d), w.double().to(d), offs.to(d)), "Float32, BFloat16 or Float16"),
        (lambda d: torch._grouped_mm(x.to(d), w.to(d), offs.long().to(d)), "int32"),
        (lambda d: torch._grouped_mm(x.to(d), w[:1].to(d), offs.to(d)), "batch sizes"),
        (lambda d: torch._grouped_mm(x.to(d), w[:, :2].to(d), offs.to(d)), "contraction dimension"),
        (lambda d: torch._grouped_mm(x.to(d), w.to(d), None), None),
    ]
    for call, msg in calls:
        with pytest.raises(RuntimeError) as cpu_err:
            call("cpu")
        with pytest.raises(type(cpu_err.value), match=msg):
            call("tpu")


def test_histc_of_integers():
    """Transformers counts tokens per expert with histc on int32 on tpu (CUDA's semantics: int in, int out)."""
    ids = torch.tensor([0, 3, 3, 7, 5, 5, 5, 2, 7, 7, 7, 7], dtype=torch.int32)
    got = torch.histc(ids.to("tpu"), bins=8, min=0, max=7)
    assert got.dtype == torch.int32
    assert got.cpu().tolist() == torch.histc(ids.float(), bins=8, min=0, max=7).int().tolist()
    torch_tpu.reset_fallback_counts()
    got = torch.histc(ids.to("tpu").long(), bins=4, min=0, max=7)
    assert got.cpu().tolist() == torch.histc(ids.float(), bins=4, min=0, max=7).long().tolist()
    assert torch_tpu.fallback_counts() == {}


# ---------------------------------------------------------------------------------------------- Transformers

transformers = pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, MixtralConfig, Qwen3MoeConfig  # noqa: E402

_MOE = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=64)
MODELS = {
    "qwen3_moe": lambda: Qwen3MoeConfig(**_MOE, moe_intermediate_size=16, intermediate_size=48, num_experts=8,
                                        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1),
    "mixtral": lambda: MixtralConfig(**_MOE, intermediate_size=16, num_local_experts=6, num_experts_per_tok=2),
}
IMPLS = ["eager", "batched_mm", "grouped_mm"]
IDS = torch.tensor([[3, 17, 42, 8, 91, 5, 60, 12], [7, 7, 30, 2, 55, 19, 80, 1]])


@pytest.fixture(scope="module")
def moe_checkpoints(tmp_path_factory):
    out = {}
    for name, make in MODELS.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(make())
        # Routers start at zero (every expert ties): random routers route tokens to different experts.
        with torch.no_grad():
            for n, p in model.named_parameters():
                if p.dim() >= 2 and p.abs().sum() == 0:
                    p.normal_(0, 0.5)
        d = tmp_path_factory.mktemp(name)
        model.save_pretrained(d)
        out[name] = str(d)
    return out


def _logits(model, ids):
    with torch.no_grad():
        return model(ids.to(model.device)).logits.float().cpu()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", list(MODELS))
def test_moe_model_eager_matches_cpu(moe_checkpoints, name, impl):
    path = moe_checkpoints[name]
    ref = AutoModelForCausalLM.from_pretrained(path, experts_implementation=impl)
    model = AutoModelForCausalLM.from_pretrained(path, experts_implementation=impl, device_map="tpu")
    assert model.config._experts_implementation == impl
    torch_tpu.reset_fallback_counts()
    got = _logits(model, IDS)
    if impl != "eager":  # the per-expert loop reads routing on the host by design (nonzero), no fallback either
        assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(got, _logits(ref, IDS), atol=1e-4, rtol=1e-4)


def test_moe_default_implementation_is_grouped_mm(moe_checkpoints):
    model = AutoModelForCausalLM.from_pretrained(moe_checkpoints["qwen3_moe"], device_map="tpu")
    assert model.config._experts_implementation == "grouped_mm"
    ref = AutoModelForCausalLM.from_pretrained(moe_checkpoints["qwen3_moe"])
    torch_tpu.set_fallback_strict(True)
    try:
        got = _logits(model, IDS)
    finally:
        torch_tpu.set_fallback_strict(False)
    torch.testing.assert_close(got, _logits(ref, IDS), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("impl", ["batched_mm", "grouped_mm"])
@pytest.mark.parametrize("name", list(MODELS))
def test_moe_model_compiled_matches_cpu(moe_checkpoints, name, impl):
    import torch._dynamo

    torch._dynamo.reset()
    path = moe_checkpoints[name]
    ref = AutoModelForCausalLM.from_pretrained(path, experts_implementation=impl)
    model = AutoModelForCausalLM.from_pretrained(path, experts_implementation=impl, device_map="tpu")
    torch_tpu._dynamo_backend.reset_compile_stats()
    fwd = torch.compile(model.forward, backend="tpu", fullgraph=True)
    with torch.no_grad():
        got = fwd(IDS.to("tpu")).logits.float().cpu()
    s = torch_tpu.compile_stats()
    assert s["partitioned_graphs"] == 0 and s["eager_graphs"] == 0 and s["fallback_nodes"] == 0, s
    torch.testing.assert_close(got, _logits(ref, IDS), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()


def test_moe_bf16_grouped_mm_matches_cpu(moe_checkpoints):
    path = moe_checkpoints["qwen3_moe"]
    ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="tpu")
    got, want = _logits(model, IDS), _logits(ref, IDS)
    # bf16 routing can pick another expert on a near-tie; compare where the top token agrees in most positions.
    torch.testing.assert_close(got, want, atol=0.1, rtol=0.05)


def test_moe_training_step_grouped_mm_matches_cpu(moe_checkpoints):
    path = moe_checkpoints["mixtral"]
    ref = AutoModelForCausalLM.from_pretrained(path, experts_implementation="grouped_mm")
    model = AutoModelForCausalLM.from_pretrained(path, experts_implementation="grouped_mm", device_map="tpu")
    labels = IDS.clone()
    out_c = ref(IDS, labels=labels)
    out_c.loss.backward()
    torch_tpu.reset_fallback_counts()
    out_t = model(IDS.to("tpu"), labels=labels.to("tpu"))
    out_t.loss.backward()
    assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(out_t.loss.detach().cpu(), out_c.loss.detach(), atol=1e-4, rtol=1e-4)
    grads_c = dict(ref.named_parameters())
    for n, p in model.named_parameters():
        if p.grad is None:
            assert grads_c[n].grad is None or (grads_c[n].grad == 0).all(), n
            continue
        torch.testing.assert_close(p.grad.cpu(), grads_c[n].grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{n}: {m}")


# ------------------------------------------------------------------------------------- kernels library layers


def _kernel_layer(base, name):
    """A subclass of Transformers' module `base` declared as the hub layer `name` (kernels' decorator)."""
    kernels = pytest.importorskip("kernels")
    return kernels.use_kernel_forward_from_hub(name)(type(base.__name__, (base,), {}))


def _layer_of(module):
    """The class whose forward a module runs (after kernelize: the kernel repository's layer)."""
    return module.forward.__func__.__qualname__.split(".")[0]


def test_import_hook_survives_a_lookup_without_import(tmp_path, monkeypatch):
    """The mapping is registered when kernels is imported; Transformers first looks the package up with
    importlib.util.find_spec (no import), which must not consume torch_tpu's post-import hook."""
    import importlib.util
    import sys

    from torch_tpu import api

    (tmp_path / "tpu_hook_probe_pkg.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fired = []
    api._when_imported("tpu_hook_probe_pkg", lambda m: fired.append(m.VALUE), "a probe")
    assert importlib.util.find_spec("tpu_hook_probe_pkg") is not None
    assert importlib.util.find_spec("tpu_hook_probe_pkg") is not None
    assert fired == [] and "tpu_hook_probe_pkg" not in sys.modules
    import tpu_hook_probe_pkg  # noqa: F401

    assert fired == [1]
    assert not any(getattr(f, "_name", None) == "tpu_hook_probe_pkg" for f in sys.meta_path)
    sys.modules.pop("tpu_hook_probe_pkg", None)


def test_kernels_mapping_lists_tpu_layers():
    kernels = pytest.importorskip("kernels")
    from torch_tpu import hub_kernels

    m = hub_kernels.mapping()
    assert set(m) == {"RMSNorm", "SiluAndMul", "SwiGLUMLP", "MoeExperts"}
    for name, devices in m.items():
        assert set(devices) == {"tpu"}
        modes = set(devices["tpu"])
        assert kernels.Mode.INFERENCE in modes and kernels.Mode.INFERENCE | kernels.Mode.TORCH_COMPILE in modes
        assert (kernels.Mode.TRAINING in modes) == hub_kernels.LAYERS[name]
    assert (hub_kernels.repository_path() / "build" / "torch-tpu" / "metadata.json").is_file()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_kernelize_qwen3_moe_uses_fused_tpu_layers(moe_checkpoints, compiled):
    from kernels import Mode, kernelize
    from transformers.models.qwen3_moe import modeling_qwen3_moe as q

    import torch._dynamo

    Norm, Experts = _kernel_layer(q.Qwen3MoeRMSNorm, "RMSNorm"), _kernel_layer(q.Qwen3MoeExperts, "MoeExperts")
    path = moe_checkpoints["qwen3_moe"]
    ref = AutoModelForCausalLM.from_pretrained(path, experts_implementation="eager")
    model = AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    for mod in model.modules():
        if type(mod) is q.Qwen3MoeRMSNorm:
            mod.__class__ = Norm
        elif type(mod) is q.Qwen3MoeExperts:
            mod.__class__ = Experts
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if compiled else Mode.INFERENCE
    kernelize(model, device="tpu", mode=mode, use_fallback=False)  # the package's mapping: no user mapping, no hub
    experts = [mod for mod in model.modules() if isinstance(mod, Experts)]
    norms = [mod for mod in model.modules() if isinstance(mod, Norm)]
    assert len(experts) == 2 and len(norms) >= 5
    assert {_layer_of(mod) for mod in experts} == {"MoeExperts"}
    assert {_layer_of(mod) for mod in norms} == {"RMSNorm"}

    torch_tpu.reset_fallback_counts()
    if compiled:
        torch._dynamo.reset()
        torch_tpu._dynamo_backend.reset_compile_stats()
        with torch.no_grad():
            got = torch.compile(model.forward, backend="tpu", fullgraph=True)(IDS.to("tpu")).logits.float().cpu()
        s = torch_tpu.compile_stats()
        assert s["partitioned_graphs"] == 0 and s["eager_graphs"] == 0 and s["fallback_nodes"] == 0, s
        torch._dynamo.reset()
    else:
        got = _logits(model, IDS)
    assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(got, _logits(ref, IDS), atol=1e-4, rtol=1e-4)


def test_moe_experts_op_matches_transformers_experts():
    """tpu::moe_experts (the MoeExperts layer) against Transformers' per-expert loop on CPU, with an expert-parallel
    sentinel index (num_experts: no expert) and an expert no token picks; the CPU kernel of the op too."""
    from transformers.models.qwen3_moe import modeling_qwen3_moe as q

    cfg = MODELS["qwen3_moe"]()
    cfg._experts_implementation = "eager"
    torch.manual_seed(4)
    experts = q.Qwen3MoeExperts(cfg)
    with torch.no_grad():
        experts.gate_up_proj.normal_(0, 0.3)
        experts.down_proj.normal_(0, 0.3)
    T, k, E = 12, 2, cfg.num_experts
    x = torch.randn(T, cfg.hidden_size)
    idx = torch.randint(0, E - 1, (T, k))  # expert E-1: no token
    idx[3, 1] = E  # sentinel
    wts = torch.softmax(torch.randn(T, k), -1)
    with torch.no_grad():
        ref = experts(x, idx, wts)
    args = (idx, wts, experts.gate_up_proj.detach(), experts.down_proj.detach())
    torch.testing.assert_close(torch.ops.tpu.moe_experts(x, *args), ref, atol=1e-5, rtol=1e-5)
    torch_tpu.reset_fallback_counts()
    got = torch.ops.tpu.moe_experts(x.to("tpu"), *(a.to("tpu") for a in args)).cpu()
    assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="must be"):
        torch.ops.tpu.moe_experts(x.to("tpu"), args[0].to("tpu"), args[1].to("tpu"), args[3].to("tpu"),
                                  args[3].to("tpu"))


def test_grouped_mm_experts_path_is_routing_independent_in_eager():
    """Transformers' grouped_mm experts path in tpu eager mode: after the first call at a token count, other routings
    (spread, all tokens on two experts, a single expert per slot) build no program, launch the same number of programs
    and never read the routing on the host (no item/nonzero: shapes do not depend on it), matching the CPU each time.
    (The per-expert loop, by contrast, reads the routing and builds programs for each expert's token count.)"""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers.models.qwen3_moe import modeling_qwen3_moe as q

    host_reads = {"aten::_local_scalar_dense", "aten::nonzero", "aten::unique", "aten::_unique2",
                  "aten::masked_select"}

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func._schema.name)
            return func(*args, **(kwargs or {}))

    cfg = Qwen3MoeConfig(hidden_size=32, moe_intermediate_size=16, num_experts=16, num_experts_per_tok=2)
    torch.manual_seed(5)
    built = {}
    for impl in ("grouped_mm",):
        cfg._experts_implementation = impl
        ref = q.Qwen3MoeExperts(cfg)
        with torch.no_grad():
            ref.gate_up_proj.normal_(0, 0.3)
            ref.down_proj.normal_(0, 0.3)
        dev = copy.deepcopy(ref).to("tpu")
        for T in (8, 32):  # fewer rows than experts (every window in the loop), and a batched first window
            gen = torch.Generator().manual_seed(T)
            x = torch.randn(T, cfg.hidden_size, generator=gen)
            wts = torch.softmax(torch.randn(T, 2, generator=gen), -1)
            routings = [torch.stack([torch.randperm(16, generator=gen)[:2] for _ in range(T)]),
                        torch.stack([torch.randperm(16, generator=gen)[:2] for _ in range(T)]),
                        torch.tensor([[3, 9]] * T),  # every token on the same two experts
                        torch.stack([torch.arange(T) % 16, (torch.arange(T) + 5) % 16], 1)]
            launches = []
            built.setdefault(impl, 0)
            for i, idx in enumerate(routings):
                s0, n0 = torch_tpu.cache_stats(), torch_tpu.launch_count()
                ops = Ops()
                with torch.no_grad(), ops:
                    out = dev(x.to("tpu"), idx.to("tpu"), wts.to("tpu"))
                n1 = torch_tpu.launch_count()
                got = out.cpu()
                s1 = torch_tpu.cache_stats()
                with torch.no_grad():
                    torch.testing.assert_close(got, ref(x, idx, wts), atol=1e-5, rtol=1e-5)
                if i == 0:
                    continue
                built[impl] += (s1["misses"] - s0["misses"]) + (s1["compiles"] - s0["compiles"])
                launches.append(n1 - n0)
                if impl == "grouped_mm":
                    assert "aten::_grouped_mm" in ops.names
                    assert not ops.names & host_reads, ops.names & host_reads
            if impl == "grouped_mm":
                assert len(set(launches)) == 1, launches
    assert built["grouped_mm"] == 0


def test_kernelize_training_rmsnorm_and_swiglu_mlp_match_cpu():
    from kernels import Mode, kernelize
    from transformers.models.qwen3_moe import modeling_qwen3_moe as q

    Norm, Mlp = _kernel_layer(q.Qwen3MoeRMSNorm, "RMSNorm"), _kernel_layer(q.Qwen3MoeMLP, "SwiGLUMLP")
    cfg = MODELS["qwen3_moe"]()
    torch.manual_seed(5)
    block = torch.nn.Sequential(Norm(cfg.hidden_size, eps=1e-6), Mlp(cfg, intermediate_size=24))
    with torch.no_grad():
        block[0].weight.normal_(1, 0.1)
    ref = copy.deepcopy(block)
    block.to("tpu")
    kernelize(block, device="tpu", mode=Mode.TRAINING, use_fallback=False)
    assert [_layer_of(mod) for mod in block] == ["RMSNorm", "SwiGLUMLP"]
    x = torch.randn(2, 5, cfg.hidden_size)
    ref(x).square().sum().backward()
    torch_tpu.reset_fallback_counts()
    loss = block(x.to("tpu")).square().sum()
    loss.backward()
    assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(loss.detach().cpu(), ref(x).square().sum().detach(), atol=1e-4, rtol=1e-4)
    for (n, p), pr in zip(block.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), pr.grad, atol=1e-4, rtol=1e-4, msg=lambda m: f"{n}: {m}")
