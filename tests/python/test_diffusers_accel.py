"""Diffusers' accelerator features on tpu: what its accelerator-only tests exercise, checked against the CPU.

* ``Tensor.record_stream`` on tpu tensors (PyTorch implements it for CUDA only; it reached the CPU fallback, which
  has no kernel for it) and Diffusers' group offloading with streams (``use_stream=True``, with and without
  ``record_stream``): outputs equal the CPU model's, no op falls back.
* Offloading to disk (``offload_to_disk_path``): ``safetensors.torch.load_file(..., device="tpu")`` loads on the
  host and moves the tensors (safetensors rejects the device kind itself; see torch_tpu/_safetensors.py).
* ``torch.compile(backend="tpu", dynamic=True)``: graphs with symbolic sizes (``sym_size``, ``sym_sum``) are compiled
  once per concrete input signature, without a dynamo recompile; forward and backward.
* ``torch.compile`` of a model with group offloading hooks (streams): runs and equals the CPU model.
"""

from __future__ import annotations

import logging

import pytest
import torch

import torch_tpu

import diffusers  # noqa: F401  (installed by scripts/setup.sh: a missing package fails, never skips)
import safetensors.torch
from diffusers import SD3Transformer2DModel

ATOL = 1e-4


def _sd3():
    torch.manual_seed(0)
    return SD3Transformer2DModel(sample_size=8, patch_size=1, in_channels=4, num_layers=2, attention_head_dim=8,
                                 num_attention_heads=2, caption_projection_dim=16, joint_attention_dim=16,
                                 pooled_projection_dim=16, out_channels=4).eval()


def _inputs(device="cpu", size=8):
    g = torch.Generator().manual_seed(1)
    return dict(hidden_states=torch.randn(1, 4, size, size, generator=g).to(device),
                encoder_hidden_states=torch.randn(1, 5, 16, generator=g).to(device),
                pooled_projections=torch.randn(1, 16, generator=g).to(device),
                timestep=torch.tensor([3.0]).to(device))


@pytest.fixture(scope="module")
def reference():
    with torch.no_grad():
        return _sd3()(**_inputs(), return_dict=False)[0]


# ---- record_stream ----------------------------------------------------------------------------------------------


def test_record_stream_on_tpu_tensors():
    torch_tpu.reset_fallback_counts()
    side = torch.tpu.Stream()
    x = torch.arange(6.0).to("tpu")
    with torch.tpu.stream(side):
        y = (x * 2).to("tpu")
        y.record_stream(torch.tpu.current_stream())
    x.record_stream(side)
    x.record_stream(torch.tpu.default_stream())
    torch.tpu.current_stream().wait_stream(side)
    z = y + 1
    del y  # released while recorded on the default stream: the value z read stays intact
    assert torch.equal(z.cpu(), torch.arange(6.0) * 2 + 1)
    assert torch_tpu.fallback_counts() == {}


def test_record_stream_checks_the_stream_like_cuda():
    x = torch.ones(2, device="tpu:0")
    with pytest.raises(RuntimeError, match="tpu stream"):
        x.record_stream(torch.Stream(device="cpu"))
    with pytest.raises(RuntimeError, match="tpu:1"):
        x.record_stream(torch.tpu.Stream(device="tpu:1"))


def test_record_stream_in_a_compiled_graph(fresh_dynamo):
    s = torch.tpu.current_stream()

    def f(a):
        b = a * 3
        b.record_stream(s)
        return b + 1

    x = torch.arange(4.0).to("tpu")
    out = torch.compile(f, backend="tpu")(x)
    assert torch.equal(out.cpu(), torch.arange(4.0) * 3 + 1)


def test_stream_operations_in_a_fullgraph_compiled_graph(fresh_dynamo):
    """Dynamo records stream and event operations (``streams::*``, wrapped in ``control_deps``); they run eagerly
    between the compiled partitions, also with fullgraph=True (they failed as "ops without a tpu lowering")."""

    def f(x):
        s = torch.accelerator.current_stream()
        y = x * 2
        e = s.record_event()
        s.synchronize()
        e.synchronize()
        return y + 1

    x = torch.arange(4.0).to("tpu")
    torch_tpu.reset_fallback_counts()
    out = torch.compile(f, backend="tpu", fullgraph=True)(x)
    assert torch.equal(out.cpu(), torch.arange(4.0) * 2 + 1)
    stats = torch_tpu._dynamo_backend.compile_stats()
    assert stats["stream_nodes"] >= 2 and stats["fallback_nodes"] == 0 and stats["eager_graphs"] == 0, stats
    assert torch_tpu.fallback_counts() == {}


# ---- group offloading ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("record_stream", [False, True], ids=["streams", "streams+record_stream"])
@pytest.mark.parametrize("offload_type", ["block_level", "leaf_level"])
def test_group_offload_with_streams_matches_cpu(reference, offload_type, record_stream):
    model = _sd3()
    kw = dict(num_blocks_per_group=1) if offload_type == "block_level" else {}
    model.enable_group_offload(onload_device=torch.device("tpu"), offload_device=torch.device("cpu"),
                               offload_type=offload_type, use_stream=True, record_stream=record_stream,
                               non_blocking=True, **kw)
    torch_tpu.reset_fallback_counts()
    with torch.no_grad():
        for _ in range(2):  # the second call prefetches along the order traced by the first
            out = model(**_inputs("tpu"), return_dict=False)[0]
            torch.testing.assert_close(out.cpu(), reference, atol=ATOL, rtol=0)
    assert torch_tpu.fallback_counts() == {}
    assert all(p.device.type == "cpu" for p in model.transformer_blocks.parameters())  # offloaded after use


@pytest.mark.parametrize("use_stream", [False, True], ids=["no-stream", "stream"])
def test_group_offload_to_disk_matches_cpu(reference, tmp_path, use_stream):
    model = _sd3()
    model.enable_group_offload(onload_device=torch.device("tpu"), offload_type="block_level",
                               num_blocks_per_group=1, use_stream=use_stream, offload_to_disk_path=str(tmp_path))
    with torch.no_grad():
        for _ in range(2):
            out = model(**_inputs("tpu"), return_dict=False)[0]
            torch.testing.assert_close(out.cpu(), reference, atol=ATOL, rtol=0)
    assert list(tmp_path.glob("*.safetensors"))


def test_safetensors_load_file_to_tpu(tmp_path):
    path = str(tmp_path / "t.safetensors")
    tensors = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([1, 2], dtype=torch.int32)}
    safetensors.torch.save_file(tensors, path)
    for device, want in (("tpu", "tpu:0"), ("tpu:1", "tpu:1"), (torch.device("tpu", 1), "tpu:1")):
        loaded = safetensors.torch.load_file(path, device=device)
        assert {k: str(v.device) for k, v in loaded.items()} == {"a": want, "b": want}
        assert all(torch.equal(loaded[k].cpu(), tensors[k]) for k in tensors)
    assert safetensors.torch.load_file(path)["a"].device.type == "cpu"
    with pytest.raises(Exception, match="invalid"):  # safetensors' own check still judges other device kinds
        safetensors.torch.load_file(path, device="nosuchdevice")


# ---- torch.compile with dynamic shapes ----------------------------------------------------------------------------


def test_compile_dynamic_specialises_per_shape_without_recompiling(fresh_dynamo, caplog):
    def f(x, y):
        z = torch.cat([x, y], dim=0)  # sym_sum of the two sizes
        return z.new_zeros(z.shape[0] + 1) + z.sum(1).sum() * x.shape[0]

    cf = torch.compile(f, backend="tpu", fullgraph=True, dynamic=True)
    torch_tpu.reset_fallback_counts()
    with torch._dynamo.config.patch(error_on_recompile=True), caplog.at_level(logging.INFO, logger="torch_tpu"):
        for n, m in ((3, 2), (5, 4), (3, 2)):
            x, y = torch.randn(n, 4), torch.randn(m, 4)
            got = cf(x.to("tpu"), y.to("tpu"))
            torch.testing.assert_close(got.cpu(), f(x, y), atol=1e-5, rtol=1e-5)
    stats = torch_tpu._dynamo_backend.compile_stats()
    assert stats["dynamic_graphs"] == 1 and stats["shape_specializations"] == 2, stats
    assert stats["eager_graphs"] == 0 and stats["partitioned_graphs"] == 0, stats
    assert sum("specialising it" in r.getMessage() for r in caplog.records) == 2
    assert torch_tpu.fallback_counts() == {}


def test_compile_dynamic_training_step(fresh_dynamo):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    ref = torch.nn.Linear(4, 3)
    ref.load_state_dict(lin.state_dict())
    lin.to("tpu")
    cf = torch.compile(lambda x: lin(x).relu().sum() / x.shape[0], backend="tpu", fullgraph=True, dynamic=True)
    for n in (2, 6):
        x = torch.randn(n, 4)
        cf(x.to("tpu")).backward()
        (ref(x).relu().sum() / n).backward()
        torch.testing.assert_close(lin.weight.grad.cpu(), ref.weight.grad, atol=1e-5, rtol=1e-5)
    stats = torch_tpu._dynamo_backend.compile_stats()
    assert stats["dynamic_graphs"] == 2 and stats["shape_specializations"] == 4, stats  # forward and backward


def test_compile_model_dynamic_true(fresh_dynamo):
    model = _sd3()
    with torch.no_grad():
        refs = {s: model(**_inputs(size=s), return_dict=False)[0] for s in (8, 4)}
    model.to("tpu")
    compiled = torch.compile(model, backend="tpu", fullgraph=True, dynamic=True)
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        for s in (8, 4):
            out = compiled(**_inputs("tpu", size=s), return_dict=False)[0]
            torch.testing.assert_close(out.cpu(), refs[s], atol=ATOL, rtol=0)


def test_compiled_graph_without_tensor_inputs(fresh_dynamo):
    """A graph whose only inputs are sizes (LTX's rotary grid under group offloading + compile, dynamic sizes) has no
    tensor inputs once specialised; it runs on the current device (it failed with "device index -1 out of range")."""
    cf = torch.compile(lambda n: (torch.arange(n, device="tpu") * 2).float(), backend="tpu", fullgraph=True,
                       dynamic=True)
    assert torch.equal(cf(5).cpu(), torch.arange(5.0) * 2)
    assert torch.equal(cf(3).cpu(), torch.arange(3.0) * 2)
    g = torch.compile(lambda: torch.ones(3, device="tpu") + 1, backend="tpu", fullgraph=True)
    assert torch.equal(g().cpu(), torch.full((3,), 2.0))


# ---- compile with group offloading ----------------------------------------------------------------------------------


def test_compile_with_group_offloading_matches_cpu(reference, fresh_dynamo):
    model = _sd3()
    model.enable_group_offload(onload_device="tpu", offload_device="cpu", offload_type="block_level",
                               num_blocks_per_group=1, use_stream=True, non_blocking=True)
    model.compile(backend="tpu")
    with torch.no_grad():
        for _ in range(2):
            out = model(**_inputs("tpu"), return_dict=False)[0]
            torch.testing.assert_close(out.cpu(), reference, atol=ATOL, rtol=0)


# ---- ahead-of-time compile ------------------------------------------------------------------------------------------


def test_aoti_package_on_tpu_raises_a_clear_error(tmp_path, fresh_dynamo):
    """AOTInductor packages C++ code for the CPU or CUDA; a tpu graph is refused with a message saying what to use
    (it failed with a bare AssertionError inside inductor)."""
    model = torch.nn.Linear(4, 2).to("tpu")
    ep = torch.export.export(model, (torch.randn(3, 4, device="tpu"),))
    with pytest.raises(RuntimeError, match="AOTInductor .* cannot compile a graph on tpu tensors"):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))


def _block_causal(image_ids):
    # causal over the sequence, bidirectional inside each image block (QwenImage 2.1's mask); closes over a tensor
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) | ((image_ids[q_idx] == image_ids[kv_idx]) & (image_ids[q_idx] >= 0))

    return mask_mod


def test_flex_attention_with_a_block_mask_matches_cpu():
    """flex_attention (PyTorch refuses devices outside its list before any kernel runs) computes on tpu what it
    computes on the CPU: a BlockMask whose mask_mod closes over a tensor, a score_mod, and GQA."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 12, 16, generator=g)
    k, v = torch.randn(2, 2, 12, 16, generator=g), torch.randn(2, 2, 12, 16, generator=g)
    ids = torch.tensor([-1, -1, 0, 0, 0, -1, 1, 1, 1, 1, -1, -1])

    def bias(score, b, h, q_idx, kv_idx):
        return score + 0.1 * (h + 1) * (q_idx - kv_idx)

    outs = {}
    for dev in ("cpu", "tpu"):
        mask = create_block_mask(_block_causal(ids.to(dev)), 2, None, 12, 12, device=dev)
        outs[dev] = flex_attention(q.to(dev), k.to(dev), v.to(dev), score_mod=bias, block_mask=mask, enable_gqa=True)
    assert outs["tpu"].device.type == "tpu"
    torch.testing.assert_close(outs["tpu"].cpu(), outs["cpu"], atol=ATOL, rtol=ATOL)


def test_flex_attention_backward_on_tpu_matches_sdpa():
    """Gradients through flex_attention (on the CPU PyTorch has none) equal those of a causal SDPA on the CPU."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=g) for _ in range(3))
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=True).square().sum().backward()
    dev = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, 8, 8, device="tpu")
    flex_attention(*dev, block_mask=mask).square().sum().backward()
    for d, r in zip(dev, ref):
        torch.testing.assert_close(d.grad.cpu(), r.grad, atol=ATOL, rtol=ATOL)


def test_flex_attention_keeps_pytorch_checks_for_other_devices():
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.randn(1, 1, 4, 16, device="meta")
    with pytest.raises(ValueError, match="only supported on"):
        flex_attention(q, q, q)
    t = torch.randn(1, 1, 4, 16, device="tpu")
    with pytest.raises(ValueError, match="same device"):
        flex_attention(t, t.cpu(), t.cpu())


def test_flex_attention_compiled_fullgraph_matches_eager(fresh_dynamo):
    """torch.compile(backend="tpu", fullgraph=True) of flex_attention (a higher-order op with score_mod and mask_mod
    subgraphs): traced into ATen ops in the graph's program, forward and backward equal to the eager run."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from torch_tpu import _dynamo_backend

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=g) for _ in range(3))
    ids = torch.tensor([-1, -1, 0, 0, 0, -1, 1, 1])

    def bias(score, b, h, q_idx, kv_idx):
        return score + 0.1 * (q_idx - kv_idx)

    ref = flex_attention(q, k, v, score_mod=bias, block_mask=create_block_mask(_block_causal(ids), 1, 1, 8, 8,
                                                                               device="cpu"))
    mask = create_block_mask(_block_causal(ids.to("tpu")), 1, 1, 8, 8, device="tpu")
    _dynamo_backend.reset_compile_stats()
    fn = torch.compile(lambda a, b, c: flex_attention(a, b, c, score_mod=bias, block_mask=mask), backend="tpu",
                       fullgraph=True)
    eager = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    compiled = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out = fn(*compiled)
    torch.testing.assert_close(out.detach().cpu(), ref, atol=ATOL, rtol=ATOL)
    out.square().sum().backward()
    flex_attention(*eager, score_mod=bias, block_mask=mask).square().sum().backward()
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c.grad.cpu(), e.grad.cpu(), atol=ATOL, rtol=ATOL)
    stats = _dynamo_backend.compile_stats()
    assert stats["flex_attention_nodes"] == 2 and stats["eager_graphs"] == 0 and stats["partitioned_graphs"] == 0


def test_flex_attention_under_tpu_autocast():
    """torch.autocast("tpu") around flex_attention (mixed-precision training): q, k, v run in the autocast dtype, as
    under CUDA autocast; the gradients reach the float32 inputs."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 16, generator=g) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, 16, 16, device="tpu")
    leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = flex_attention(*leaves, block_mask=mask)
    assert out.dtype == torch.bfloat16
    ref = torch.nn.functional.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), is_causal=True)
    torch.testing.assert_close(out.detach().cpu().float(), ref.float(), atol=2e-2, rtol=2e-2)
    out.float().square().sum().backward()
    assert all(t.grad is not None and t.grad.dtype == torch.float32 for t in leaves)
