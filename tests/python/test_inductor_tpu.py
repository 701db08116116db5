"""torch.compile's default backend (inductor) and tpu tensors.

* ``torch_tpu._internal.pallas.tpu_torch_pallas``: the interface inductor's Pallas code generator calls
  (register / lookup / call), exercised with an interpret-mode Pallas kernel exported for the plugin's platform;
  with ``TORCH_TPU_INDUCTOR=pallas`` inductor's real generated code reaches it, and on a plugin without Mosaic
  the kernel's registration is a clear error.
* Where Mosaic cannot run (CPU, CUDA plugins), inductor's graphs on tpu tensors are compiled by the tpu backend
  with a one-time notice: a module, and Transformers' compiled generation (``CompileConfig`` with its default
  backend, and ``model.forward = torch.compile(model.forward)``) equal CPU. Graphs on CPU tensors stay inductor's.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_tpu
from torch_tpu import _inductor

PLUGIN = torch_tpu.plugin_info().get("platform_name")
needs_redirect = pytest.mark.skipif(PLUGIN == "tpu", reason="on a TPU plugin inductor's Pallas kernels run as is")


# ---------------------------------------------------------------------------------------------------------------
# tpu_torch_pallas


def test_tpu_torch_pallas_interface():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from torch_tpu._internal.pallas import tpu_torch_pallas as tp
    from torch_tpu._jax import platform

    def kernel(x_ref, y_ref, o_ref, s_ref):
        o_ref[...] = jnp.sin(x_ref[...]) * y_ref[...]
        s_ref[...] = x_ref[...] + y_ref[...]

    def fn(x, y):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return pl.pallas_call(kernel, out_shape=(shape, shape), interpret=True)(x, y)

    spec = jax.ShapeDtypeStruct((8, 16), jnp.float32)
    exported = jax.export.export(jax.jit(fn), platforms=[platform()])(spec, spec)
    name, key = "pallas_test_sin_mul", "pallas_test_sin_mul_out_8_16x8_16_in_8_16x8_16"
    assert not tp.lookup_custom_kernel(name, key)
    tp.register_custom_kernel(name, key, serialized_mlir_module=exported.mlir_module_serialized)
    assert tp.lookup_custom_kernel(name, key) and (name, key) in tp.registered_kernels()
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    outs = tp.call_custom_kernel(name, key, inputs=[x.to("tpu"), y.to("tpu")],
                                 output_shapes=[torch.empty(8, 16, device="tpu")] * 2, donate_argnums=[])
    torch.testing.assert_close(outs[0].cpu(), torch.sin(x) * y)
    torch.testing.assert_close(outs[1].cpu(), x + y)
    with pytest.raises(RuntimeError, match="returned"):
        tp.call_custom_kernel(name, key, inputs=[x.to("tpu"), y.to("tpu")],
                              output_shapes=[torch.empty(8, 15, device="tpu")] * 2)
    with pytest.raises(KeyError, match="not registered"):
        tp.call_custom_kernel(name, "other-key", inputs=[x.to("tpu")])


@needs_redirect
def test_inductor_pallas_codegen_reaches_tpu_torch_pallas(run_python):
    """With TORCH_TPU_INDUCTOR=pallas, inductor's own generated code exports a Mosaic kernel and registers it with
    tpu_torch_pallas, which says why this plugin cannot run it."""
    pytest.importorskip("jax")
    proc = run_python(
        """
        import torch, torch_tpu
        x = torch.randn(8, 128, device="tpu")
        try:
            torch.compile(lambda a: (a * a).sin() + 1)(x)
        except Exception as e:
            print("RAISED", e)
        """,
        env={"TORCH_TPU_INDUCTOR": "pallas"},
        timeout=600,
    )
    assert "RAISED" in proc.stdout, proc.stderr
    assert "Pallas kernel 'pallas_" in proc.stdout and "cannot be compiled by the PJRT plugin" in proc.stdout
    assert "tpu_custom_call is a Mosaic (Pallas TPU) kernel: it runs only on a TPU plugin" in proc.stdout


# ---------------------------------------------------------------------------------------------------------------
# The redirect


@needs_redirect
def test_default_backend_on_tpu_tensors_runs_through_tpu_backend():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    mod = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    mod.load_state_dict(ref.state_dict())
    mod.to("tpu")
    x = torch.randn(3, 8)
    _inductor._noticed = False
    before = dict(_inductor.stats)
    torch_tpu._dynamo_backend.reset_compile_stats()
    compiled = torch.compile(mod)  # the default backend: inductor
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = compiled(x.to("tpu"))
        out2 = compiled(x.to("tpu") * 2)
    notices = [m for m in w if "generates Mosaic (Pallas TPU) kernels" in str(m.message)]
    assert len(notices) == 1, [str(m.message) for m in w]  # one-time notice
    assert _inductor.stats["redirected_graphs"] == before["redirected_graphs"] + 1
    assert torch_tpu.compile_stats()["lowerings"] == 1  # our backend compiled the graph
    torch.testing.assert_close(out.detach().cpu(), ref(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out2.detach().cpu(), ref(x * 2), atol=1e-6, rtol=1e-5)
    # Training through the redirected graph.
    out.sum().backward()
    ref(x).sum().backward()
    torch.testing.assert_close(mod[0].weight.grad.cpu(), ref[0].weight.grad, atol=1e-6, rtol=1e-5)


def test_graphs_on_other_devices_stay_inductors():
    calls = []

    def original(gm, inputs, *args, **kwargs):
        calls.append(len(inputs))
        return "inductor"

    wrapped = _inductor._wrap(original)
    gm = torch.fx.symbolic_trace(lambda a: a + 1)
    assert wrapped(gm, [torch.ones(2)]) == "inductor" and calls == [1]
    assert not _inductor.touches_tpu(gm, [torch.ones(2)])
    assert _inductor.touches_tpu(gm, [torch.ones(2, device="tpu")])
    assert _inductor._wrap(original) is not original
    # The installed wrapper is the one inductor calls.
    import torch._inductor.compile_fx as cfx

    assert getattr(cfx.compile_fx, "_torch_tpu_redirect", False)


def test_inductor_mode_setting(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_INDUCTOR", "pallas")
    assert _inductor.mode() == "pallas"
    monkeypatch.setenv("TORCH_TPU_INDUCTOR", "tpu")
    assert _inductor.mode() == "tpu"
    monkeypatch.setenv("TORCH_TPU_INDUCTOR", "auto")
    assert _inductor.mode() == ("pallas" if PLUGIN == "tpu" else "tpu")
    monkeypatch.setenv("TORCH_TPU_INDUCTOR", "triton")
    with pytest.raises(ValueError, match="auto, pallas or tpu"):
        _inductor.mode()


# ---------------------------------------------------------------------------------------------------------------
# Transformers' compiled generation with inductor as the backend


@needs_redirect
def test_transformers_compiled_generate_with_default_backend(tmp_path):
    transformers = pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, CompileConfig, Qwen3Config

    import torch._dynamo

    cfg = Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    ref = AutoModelForCausalLM.from_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    prompt = torch.tensor([[1, 5, 9, 3, 7, 2]])

    def generate(m, **kw):
        out = m.generate(prompt.to(m.device), max_new_tokens=5, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, cache_implementation="static", **kw)
        return out.sequences.cpu(), torch.stack([lg.float().cpu() for lg in out.logits])

    seq_c, logits_c = generate(ref, disable_compile=True)
    torch._dynamo.reset()
    try:
        cc = CompileConfig(fullgraph=True, dynamic=False)
        assert cc.backend == "inductor"
        before = _inductor.stats["redirected_graphs"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seq_t, logits_t = generate(model, compile_config=cc)
        assert _inductor.stats["redirected_graphs"] > before
        assert seq_t.tolist() == seq_c.tolist()
        torch.testing.assert_close(logits_t, logits_c, atol=1e-4, rtol=1e-4)

        torch._dynamo.reset()
        model.forward = torch.compile(model.forward)  # the user's own compile, default backend
        before = _inductor.stats["redirected_graphs"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seq_t, logits_t = generate(model, disable_compile=True)
            graphs = _inductor.stats["redirected_graphs"]
            assert graphs > before
            seq_t2, _ = generate(model, disable_compile=True)
        assert _inductor.stats["redirected_graphs"] == graphs  # warm: no new graphs
        assert seq_t.tolist() == seq_c.tolist() == seq_t2.tolist()
        torch.testing.assert_close(logits_t, logits_c, atol=1e-4, rtol=1e-4)
    finally:
        torch._dynamo.reset()
