"""JAX functions and Pallas kernels as PyTorch ops on tpu (torch_tpu.jax_op / custom_jax_kernel).

Every kernel is exported with jax.export for the plugin's platform and called through ``tpu::stablehlo_call``,
whose rule embeds the exported module into our programs (a private function plus a call). Checked against CPU:
the same computation in plain PyTorch, and the same op on CPU tensors (run by JAX on the host).

* a jax.numpy function: eager forward and backward (jax.vjp), several results, integer and bfloat16 arguments,
  static arguments;
* interpret-mode Pallas kernels with a custom VJP: a row-tiled softmax and a tiled matmul, eager and inside
  ``torch.compile(backend="tpu", fullgraph=True)``, forward and backward, as one program per graph (no eager op
  runs during a compiled call);
* the export cache (one export per signature), and clear errors: jax missing, an op the plugin cannot compile,
  a non-interpret Pallas kernel on the CPU plugin, a non-tensor argument.
"""

from __future__ import annotations

import functools

import pytest
import torch

import torch_tpu
from conftest import plugin_specific

import jax  # noqa: E402  (installed by scripts/setup.sh: a missing package fails, never skips)
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from torch_tpu._internal import pallas as tpu_pallas  # noqa: E402  (the path TorchTPU kernel libraries import)

S = jax.ShapeDtypeStruct


def _tpu(*ts):
    return [t.to("tpu") for t in ts]


def _close(a, b, **kw):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), **kw)


# ---------------------------------------------------------------------------------------------------------------
# Pallas kernels (interpret mode: plain StableHLO the CPU plugin compiles)


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    o_ref[...] = e / e.sum(axis=-1, keepdims=True)


def _softmax_bwd_kernel(y_ref, g_ref, o_ref):
    y, g = y_ref[...], g_ref[...]
    o_ref[...] = y * (g - (g * y).sum(axis=-1, keepdims=True))


def _rows(block, n):
    return pl.BlockSpec((block, n), lambda i: (i, 0))


def pallas_softmax_fwd(x, block=8):
    m, n = x.shape
    return pl.pallas_call(_softmax_kernel, out_shape=S(x.shape, x.dtype), grid=(m // block,),
                          in_specs=[_rows(block, n)], out_specs=_rows(block, n), interpret=True)(x)


@jax.custom_vjp
def pallas_softmax(x):
    return pallas_softmax_fwd(x)


def _softmax_vjp_fwd(x):
    y = pallas_softmax_fwd(x)
    return y, y


def _softmax_vjp_bwd(y, g):
    m, n = y.shape
    dx = pl.pallas_call(_softmax_bwd_kernel, out_shape=S(y.shape, y.dtype), grid=(m // 8,),
                        in_specs=[_rows(8, n), _rows(8, n)], out_specs=_rows(8, n), interpret=True)(y, g)
    return (dx,)


pallas_softmax.defvjp(_softmax_vjp_fwd, _softmax_vjp_bwd)


def _mm_kernel(a_ref, b_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def pallas_mm(a, b, bm=8, bn=8, bk=8):
    """Tiled matmul: a grid over (row block, column block, reduction block), accumulating into the output tile."""
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        _mm_kernel, out_shape=S((m, n), a.dtype), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)), interpret=True)(a, b)


@jax.custom_vjp
def pallas_matmul(a, b):
    return pallas_mm(a, b)


pallas_matmul.defvjp(lambda a, b: (pallas_mm(a, b), (a, b)),
                     lambda res, g: (pallas_mm(g, res[1].T), pallas_mm(res[0].T, g)))

softmax_op = torch_tpu.jax_op(pallas_softmax, name="pallas_softmax")
matmul_op = torch_tpu.custom_jax_kernel(pallas_matmul, name="pallas_matmul")


# ---------------------------------------------------------------------------------------------------------------
# jax.numpy functions


@torch_tpu.jax_op
def gelu_mix(x, y):
    """Two results from two inputs, with a reduction and a transcendental."""
    return jax.nn.gelu(x) * y, jnp.tanh(x).sum(axis=0)


def gelu_mix_ref(x, y):
    return torch.nn.functional.gelu(x, approximate="tanh") * y, torch.tanh(x).sum(0)


def test_jax_function_eager_matches_cpu():
    torch.manual_seed(0)
    x, y = torch.randn(6, 10), torch.randn(6, 10)
    torch_tpu.reset_fallback_counts()
    a, b = gelu_mix(*_tpu(x, y))
    assert a.device.type == "tpu" and b.shape == (10,)
    ra, rb = gelu_mix_ref(x, y)
    _close(a, ra, atol=1e-5, rtol=1e-5)
    _close(b, rb, atol=1e-5, rtol=1e-5)
    ca, cb = gelu_mix(x, y)  # the same op on CPU tensors: JAX on the host
    assert ca.device.type == "cpu"
    _close(a, ca, atol=1e-6, rtol=1e-6)
    assert torch_tpu.fallback_counts() == {}


def test_jax_function_backward_matches_cpu():
    torch.manual_seed(1)
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    xt, yt = (t.requires_grad_() for t in _tpu(x, y))
    a, b = gelu_mix(xt, yt)
    (a.sum() * 2 + (b * b).sum()).backward()
    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    ra, rb = gelu_mix_ref(xc, yc)
    (ra.sum() * 2 + (rb * rb).sum()).backward()
    _close(xt.grad, xc.grad, atol=1e-5, rtol=1e-5)
    _close(yt.grad, yc.grad, atol=1e-5, rtol=1e-5)
    # One unused result: its cotangent is zeros.
    xt.grad = None
    gelu_mix(xt, yt)[1].sum().backward()
    xc.grad = None
    gelu_mix_ref(xc, yc)[1].sum().backward()
    _close(xt.grad, xc.grad, atol=1e-5, rtol=1e-5)


def test_integer_and_bfloat16_arguments():
    @torch_tpu.jax_op
    def gather_scale(table, idx, scale):
        return jnp.take(table, idx, axis=0) * scale.astype(table.dtype)

    table = torch.randn(10, 4).to(torch.bfloat16)
    idx = torch.tensor([3, 0, 9, 3], dtype=torch.int64)  # int64: exported with jax's 64-bit mode on
    scale = torch.tensor(2.5)
    out = gather_scale(*_tpu(table, idx, scale))
    assert out.dtype == torch.bfloat16 and out.shape == (4, 4)
    _close(out, table[idx] * 2.5)
    # Gradient flows to the float argument only.
    tt = table.to("tpu").float().requires_grad_()
    gather_scale(tt, idx.to("tpu"), scale.to("tpu")).sum().backward()
    want = torch.zeros(10, 4)
    want.index_add_(0, idx, torch.full((4, 4), 2.5))
    _close(tt.grad, want)


def test_static_arguments_and_export_cache():
    @functools.partial(torch_tpu.jax_op, static_argnums=(1,))
    def power(x, p):
        return x ** p

    x = torch.rand(3, 4) + 0.5
    xt = x.to("tpu")
    _close(power(xt, 2), x ** 2)
    _close(power(xt, 3), x ** 3, rtol=1e-5, atol=1e-5)
    info = power.cache_info()
    assert info["exports"] == 2  # one kernel per static value
    _close(power(xt, 2), x ** 2)
    assert power.cache_info()["exports"] == 2 and power.cache_info()["hits"] > info["hits"]
    power(torch.rand(5).to("tpu"), 2)  # a new shape: a new export
    assert power.cache_info()["exports"] == 3
    # Under torch.compile the static value is part of the graph (a changing Python number would become
    # symbolic: compile with dynamic=False).
    cp = torch.compile(lambda t: power(t, 3) + 1, backend="tpu", fullgraph=True, dynamic=False)
    _close(cp(xt), x ** 3 + 1, rtol=1e-5, atol=1e-5)
    assert power.cache_info()["exports"] == 3  # the (3,) kernel's export is reused


def test_export_cache_and_eager_program_cache():
    @torch_tpu.jax_op
    def affine(x, w):
        return x @ w + 1.0

    x, w = torch.randn(4, 8), torch.randn(8, 3)
    xt, wt = _tpu(x, w)
    affine(xt, wt)
    before = torch_tpu.cache_stats()
    for _ in range(3):
        out = affine(xt, wt)
    after = torch_tpu.cache_stats()
    _close(out, x @ w + 1.0, atol=1e-5, rtol=1e-5)
    assert affine.cache_info()["exports"] == 1
    # Three calls, three eager cache hits, no compile: one program per call, compiled once.
    assert after["compiles"] == before["compiles"]
    assert after["hits"] - before["hits"] == 3


def test_program_cache_is_bounded(monkeypatch):
    # TORCH_TPU_FOREIGN_PROGRAM_CACHE_SIZE programs per kernel: the least recently used is dropped (here and in the
    # lowering's registry) and exported again when its signature comes back.
    import torch_tpu._foreign as foreign

    monkeypatch.setattr(foreign, "_limit", 2)

    @torch_tpu.jax_op
    def scaled(x):
        return x * 3.0 + 1.0

    count0 = torch_tpu._C._foreign_program_count()
    for n in (1, 2, 3, 4, 1):
        x = torch.arange(float(n))
        _close(scaled(x.to("tpu")), x * 3.0 + 1.0)
        assert torch_tpu._C._foreign_program_count() - count0 <= 2
    info = scaled.cache_info()
    assert info["exports"] == 5 and info["evictions"] == 3
    # the kept ones are the two most recent: (4,) hits, (2,) is exported again
    _close(scaled(torch.arange(4.0).to("tpu")), torch.arange(4.0) * 3.0 + 1.0)
    assert scaled.cache_info()["exports"] == 5
    _close(scaled(torch.arange(2.0).to("tpu")), torch.arange(2.0) * 3.0 + 1.0)
    assert scaled.cache_info()["exports"] == 6


# ---------------------------------------------------------------------------------------------------------------
# Pallas kernels, eager and compiled


def test_pallas_softmax_eager_forward_backward():
    torch.manual_seed(2)
    x = torch.randn(16, 32)
    xt = x.to("tpu").requires_grad_()
    y = softmax_op(xt)
    _close(y, torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    g = torch.randn(16, 32)
    y.backward(g.to("tpu"))
    xc = x.clone().requires_grad_()
    torch.softmax(xc, -1).backward(g)
    _close(xt.grad, xc.grad, atol=1e-6, rtol=1e-5)


def test_pallas_matmul_eager_forward_backward():
    torch.manual_seed(3)
    a, b = torch.randn(16, 24), torch.randn(24, 32)
    at, bt = (t.requires_grad_() for t in _tpu(a, b))
    out = matmul_op(at, bt)
    _close(out, a @ b, atol=1e-5, rtol=1e-5)
    g = torch.randn(16, 32)
    out.backward(g.to("tpu"))
    _close(at.grad, g @ b.T, atol=1e-5, rtol=1e-5)
    _close(bt.grad, a.T @ g, atol=1e-5, rtol=1e-5)


class _PallasBlock(torch.nn.Module):
    """x -> softmax(x @ W) @ V + x, with both matmuls and the softmax as Pallas kernels."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(32, 16) * 0.2)
        self.v = torch.nn.Parameter(torch.randn(16, 32) * 0.2)

    def forward(self, x, use_kernels=True):
        if use_kernels:
            return matmul_op(softmax_op(matmul_op(x, self.w)), self.v) + x
        return torch.softmax(x @ self.w, -1) @ self.v + x


def test_pallas_kernels_in_compiled_fullgraph_training_step():
    torch.manual_seed(4)
    ref = _PallasBlock()
    mod = _PallasBlock()
    mod.load_state_dict(ref.state_dict())
    mod.to("tpu")
    x = torch.randn(16, 32)
    compiled = torch.compile(lambda inp: mod(inp).pow(2).mean(), backend="tpu", fullgraph=True)
    torch_tpu._dynamo_backend.reset_compile_stats()
    loss = compiled(x.to("tpu"))
    loss.backward()
    ref_loss = ref(x, use_kernels=False).pow(2).mean()
    ref_loss.backward()
    _close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for p, q in zip(mod.parameters(), ref.parameters()):
        _close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    s = torch_tpu.compile_stats()
    # One forward and one backward graph, each lowered whole into one program.
    assert s["lowerings"] == 2 and s["partitioned_graphs"] == 0 and s["eager_graphs"] == 0, s

    # A second step runs the two programs and nothing else: no eager op, no export, no compile.
    for p in mod.parameters():
        p.grad = None
    exports = (softmax_op.cache_info()["exports"], matmul_op.cache_info()["exports"])
    torch.tpu.synchronize()
    before = torch_tpu.cache_stats()["requests"]
    loss2 = compiled(x.to("tpu"))
    loss2.backward()
    torch.tpu.synchronize()
    assert torch_tpu.cache_stats()["requests"] - before <= 1  # backward()'s seed (ones_like); the rest: 2 programs
    assert (softmax_op.cache_info()["exports"], matmul_op.cache_info()["exports"]) == exports
    _close(loss2, ref_loss, atol=1e-5, rtol=1e-5)


def test_kernel_inside_compiled_graph_adds_no_eager_program():
    """The kernel is part of the graph's program: a compiled call launches that program only."""

    def f(x, w):
        return (matmul_op(x, w).relu() * 3).sum(1)

    torch.manual_seed(5)
    x, w = torch.randn(8, 16), torch.randn(16, 8)
    xt, wt = _tpu(x, w)
    cf = torch.compile(f, backend="tpu", fullgraph=True)
    _close(cf(xt, wt), ((x @ w).relu() * 3).sum(1), atol=1e-5, rtol=1e-5)
    torch.tpu.synchronize()
    before = torch_tpu.cache_stats()["requests"]
    out = cf(xt, wt)
    assert torch_tpu.cache_stats()["requests"] == before  # no eager op ran: one compiled program
    _close(out, ((x @ w).relu() * 3).sum(1), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Errors


def test_op_the_plugin_cannot_compile_is_a_clear_error():
    @torch_tpu.jax_op
    def inverse(x):
        return jnp.linalg.inv(x)  # on CPU, jax lowers it to LAPACK custom calls the plugin does not register

    x = (torch.eye(4) * 2).to("tpu")
    with pytest.raises(RuntimeError, match=r"JAX kernel 'inverse' for \(float32\[4,4\]\) cannot be compiled by the "
                                           r"PJRT plugin(.|\n)*custom_call targets(.|\n)*lapack"):
        inverse(x)
    # Not silently run elsewhere: nothing fell back to the CPU.
    assert "tpu::stablehlo_call" not in torch_tpu.fallback_counts()


def test_stablehlo_version_check():
    """Exports are re-serialized for the StableHLO version the plugin parses; newer features are named."""
    from torch_tpu import _jax

    exported, text = _jax.export_stablehlo(lambda x: jax.lax.top_k(x, 2), ((torch.float32, (8,)),))
    assert "stablehlo.composite" in text and "loc(" not in text  # generic syntax, no locations
    version = torch_tpu.plugin_info().get("attributes", {}).get("stablehlo_current_version")
    assert _jax.stablehlo_text(exported.mlir_module_serialized) == text
    if version is not None:
        _jax.stablehlo_text(exported.mlir_module_serialized, version)
    # stablehlo.composite (top_k) did not exist in StableHLO 0.9.0.
    with pytest.raises(RuntimeError, match="newer than version 0.9.0(.|\n)*composite"):
        _jax.stablehlo_text(exported.mlir_module_serialized, "0.9.0")


def test_unknown_kernel_name():
    with pytest.raises(RuntimeError, match="no foreign kernel named 'nope'"):
        torch.ops.tpu.stablehlo_call([torch.ones(2, device="tpu")], "nope")


@plugin_specific(torch_tpu.plugin_info().get("platform_name") == "cpu", "the CPU plugin's restriction")
def test_non_interpret_pallas_on_cpu_plugin_is_a_clear_error():

    def double_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @torch_tpu.jax_op
    def double(x):
        return pl.pallas_call(double_kernel, out_shape=S(x.shape, x.dtype))(x)

    with pytest.raises(RuntimeError, match=r"exporting 'double'(.|\n)*interpret=True"):
        double(torch.ones(8, 128, device="tpu"))


def test_non_tensor_argument_and_kwargs():
    with pytest.raises(TypeError, match="argument 1 of JAX kernel 'gelu_mix' is a float, not a tensor"):
        gelu_mix(torch.ones(2, device="tpu"), 3.0)
    with pytest.raises(TypeError, match="positional arguments only"):
        gelu_mix(torch.ones(2, device="tpu"), y=torch.ones(2, device="tpu"))


def test_jax_kept_off_the_accelerator(monkeypatch):
    """With a TPU or CUDA plugin, a jax imported later uses its CPU backend (unless JAX_PLATFORMS says otherwise)."""
    import os
    import sys

    from torch_tpu import _jax

    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delitem(sys.modules, "jax")  # as if jax were not imported yet
    _jax.keep_jax_off_the_accelerator("cpu")
    assert "JAX_PLATFORMS" not in os.environ
    _jax.keep_jax_off_the_accelerator("tpu")
    assert os.environ["JAX_PLATFORMS"] == "cpu"
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    _jax.keep_jax_off_the_accelerator("cuda")
    assert os.environ["JAX_PLATFORMS"] == "cuda"  # the user's choice stands


def test_missing_jax_is_a_clear_error(run_python):
    """jax is optional: import torch_tpu never imports it, and a kernel call without it says what to install."""
    proc = run_python(
        """
        import sys
        import torch, torch_tpu
        print("JAX_IMPORTED", "jax" in sys.modules)
        sys.modules["jax"] = None  # as if jax were not installed
        f = torch_tpu.jax_op(lambda x: x * 2)  # wrapping needs no jax; calling does
        try:
            f(torch.ones(3, device="tpu"))
        except ImportError as e:
            print("RAISED", e)
        """
    )
    assert "JAX_IMPORTED False" in proc.stdout
    assert "RAISED torch_tpu: JAX kernels need jax" in proc.stdout
    assert "pip install 'torch-tpu[jax]'" in proc.stdout


# ---------------------------------------------------------------------------------------------------------------
# A custom op implemented by a JAX kernel (how TorchTPU kernel libraries declare theirs)


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


@torch.library.custom_op("tpu_jax_test::add_vectors", mutates_args=(), device_types=["tpu"])
@tpu_pallas.custom_jax_kernel
def _add_vectors(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return pl.pallas_call(_add_kernel, out_shape=S(x.shape, x.dtype), interpret=True)(x, y)


@torch.library.custom_op("tpu_jax_test::add_vectors_backward", mutates_args=(),
                         schema="(Tensor grad) -> (Tensor, Tensor)", device_types=["tpu"])
@tpu_pallas.custom_jax_kernel
def _add_vectors_backward(g):
    return g * 1.0, g * 2.0


_add_vectors.register_fake(lambda x, y: torch.empty_like(x))
_add_vectors_backward.register_fake(lambda g: (torch.empty_like(g), torch.empty_like(g)))
_add_vectors.register_autograd(lambda ctx, grad: _add_vectors_backward(grad))  # d/dy scaled 2x on purpose


def test_custom_op_over_jax_kernel_eager_and_fullgraph():
    x = torch.tensor([0.1, 0.2, 0.3], device="tpu", requires_grad=True)
    y = torch.tensor([0.4, 0.5, 0.6], device="tpu", requires_grad=True)
    _close(_add_vectors(x, y), torch.tensor([0.5, 0.7, 0.9]))
    torch_tpu._dynamo_backend.reset_compile_stats()
    f = torch.compile(lambda a, b: (_add_vectors(a, b) * 3).sum(), backend="tpu", fullgraph=True, dynamic=False)
    loss = f(x, y)
    loss.backward()
    _close(loss, torch.tensor(6.3), atol=1e-6, rtol=1e-6)
    _close(x.grad, torch.full((3,), 3.0))
    _close(y.grad, torch.full((3,), 6.0))
    s = torch_tpu.compile_stats()
    # The custom ops are traced through to their kernels: both graphs lower whole.
    assert s["lowerings"] == 2 and s["fallback_nodes"] == 0 and s["partitioned_graphs"] == 0, s
