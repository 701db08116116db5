"""complex64 (and complex128 where the plugin has it) computed on the device: storage and copies, the conjugate and
negative bits, view_as_real / view_as_complex / real / imag as views that write through, elementwise arithmetic,
reductions, products, indexing, autograd, in eager, fused eager and compiled (fullgraph) modes, with no CPU
fallback and no host round trip (every test runs with fallbacks strict)."""

import pytest
import torch

import torch_tpu

DEV = "tpu"


@pytest.fixture(autouse=True)
def _strict():
    prev = torch_tpu.fallback_strict()
    torch_tpu.set_fallback_strict(True)
    before = dict(torch_tpu.host_transfer_counts())
    yield
    torch_tpu.set_fallback_strict(prev)
    assert dict(torch_tpu.host_transfer_counts()) == before, "a complex op moved data through the host"


def crand(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


def close(a, b, **kw):
    torch.testing.assert_close(a.cpu(), b, **kw)


def test_storage_and_copies():
    x = crand(3, 4)
    t = x.to(DEV)
    assert t.dtype == torch.complex64 and t.device.type == "tpu"
    close(t, x)
    close(t[1:, ::2], x[1:, ::2])
    y = t.clone()
    y[0, 1] = 5 - 2j  # a partial write: a device program
    ref = x.clone()
    ref[0, 1] = 5 - 2j
    close(y, ref)
    close(t.to(torch.float32), x.to(torch.float32))  # real part, as on CPU
    close(torch.ones(3, device=DEV).to(torch.complex64), torch.ones(3).to(torch.complex64))
    assert t[1, 2].item() == x[1, 2].item()


def test_complex128():
    x = crand(5, dtype=torch.complex128)
    t = x.to(DEV)
    close(t * t + 1j, x * x + 1j)
    assert (t * t).dtype == torch.complex128


def test_conj_and_neg_bits():
    x = crand(4, 3)
    t = x.to(DEV)
    c = t.conj()
    assert c.is_conj()
    close(c, x.conj())
    close(c.resolve_conj(), x.conj().resolve_conj())
    close(torch.conj_physical(t), torch.conj_physical(x))
    close(c * 2, x.conj() * 2)
    close(c @ t.T, x.conj() @ x.T)  # mm reads the conjugate bit itself
    close(t.imag.neg(), x.imag.neg())
    close(c.imag, x.conj().imag)  # a negative view
    # writes through a conjugate view store the conjugate
    y = t.clone()
    yc = y.conj()
    yc[0] = torch.tensor([1 + 2j, 3 - 1j, 0.5j], device=DEV)
    ref = x.clone()
    ref.conj()[0] = torch.tensor([1 + 2j, 3 - 1j, 0.5j])
    close(y, ref)


def test_view_as_real_complex_write_through():
    x = torch.randn(3, 4, 2)
    t = x.to(DEV)
    c = torch.view_as_complex(t)
    assert c.dtype == torch.complex64 and c.shape == (3, 4)
    assert c.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    close(c, torch.view_as_complex(x))
    # write through the complex view: the real base sees it
    c[1, 2] = 7 + 8j
    assert t[1, 2].tolist() == [7.0, 8.0]
    # write through the real base: the complex view sees it
    t[0, 0, 1] = -3.0
    assert c[0, 0].item() == complex(x[0, 0, 0].item(), -3.0)
    # view_as_real of the complex view writes back into the same storage
    r = torch.view_as_real(c)
    r[2, 3, 0] = 42.0
    assert t[2, 3, 0].item() == 42.0 and c[2, 3].real.item() == 42.0
    # real / imag are views too
    c.real[0, 1] = 11.0
    c.imag[0, 1] = 12.0
    assert t[0, 1].tolist() == [11.0, 12.0]
    c.imag.mul_(2)
    assert t[0, 1, 1].item() == 24.0
    # round trip
    close(torch.view_as_real(torch.view_as_complex(t)), t.cpu())


def test_views_of_offset_and_strided_storages():
    base = torch.randn(5, 6, 2)
    t = base.to(DEV)
    c = torch.view_as_complex(t[1:4])  # a storage offset, in complex elements
    close(c, torch.view_as_complex(base[1:4]))
    cc = torch.view_as_complex(base.clone())
    tc = torch.view_as_complex(t.clone())
    close(tc[:, ::2].real, cc[:, ::2].real)
    close(torch.view_as_real(tc.T), torch.view_as_real(cc.T))


ELEMENTWISE = [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: a + 2 * b, lambda a, b: torch.add(a, b, alpha=2 - 1j), lambda a, b: a * (0.5 + 1j),
    lambda a, b: (a == b) | (a != a), lambda a, b: torch.where(a.real > 0, a, b),
    lambda a, b: a.pow(2), lambda a, b: a ** b,
]
UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "reciprocal", "sgn", "abs",
         "angle", "conj_physical", "isnan", "expm1", "log1p", "log2", "log10"]


@pytest.mark.parametrize("i", range(len(ELEMENTWISE)))
def test_binary(i):
    f = ELEMENTWISE[i]
    a, b = crand(4, 5, seed=1), crand(4, 5, seed=2)
    close(f(a.to(DEV), b.to(DEV)), f(a, b), rtol=1e-4, atol=1e-5)


def test_unary():
    x = crand(6, 5, seed=3)
    t = x.to(DEV)
    for name in UNARY:
        got, want = getattr(torch, name)(t), getattr(torch, name)(x)
        assert got.dtype == want.dtype, name
        close(got, want, rtol=1e-4, atol=1e-5, msg=name)


def test_mixed_promotion():
    a = crand(3, 4)
    r = torch.randn(3, 4)
    ta, tr = a.to(DEV), r.to(DEV)
    for got, want in [(ta + tr, a + r), (tr * ta, r * a), (tr / ta, r / a), (ta * 2.5, a * 2.5), (tr + 1j, r + 1j),
                      (ta + torch.tensor(1j), a + torch.tensor(1j))]:
        assert got.dtype == want.dtype
        close(got, want, rtol=1e-5, atol=1e-6)


def test_constructors():
    m, a = torch.rand(3, 4), torch.randn(3, 4)
    close(torch.polar(m.to(DEV), a.to(DEV)), torch.polar(m, a), rtol=1e-5, atol=1e-6)
    close(torch.complex(m.to(DEV), a.to(DEV)), torch.complex(m, a))
    close(torch.full((2, 3), 1 + 2j, device=DEV), torch.full((2, 3), 1 + 2j))
    close(torch.zeros(2, dtype=torch.complex64, device=DEV), torch.zeros(2, dtype=torch.complex64))


def test_reductions_products_movement_indexing():
    x, y = crand(4, 6, seed=4), crand(6, 3, seed=5)
    t, u = x.to(DEV), y.to(DEV)
    kw = dict(rtol=1e-4, atol=1e-5)
    close(t.sum(), x.sum(), **kw)
    close(t.sum(1), x.sum(1), **kw)
    close(t.mean(0), x.mean(0), **kw)
    close(t.prod(1), x.prod(1), **kw)
    close(t @ u, x @ y, **kw)
    close(torch.bmm(t[None], u[None]), torch.bmm(x[None], y[None]), **kw)
    close(torch.einsum("ij,jk->ik", t, u), torch.einsum("ij,jk->ik", x, y), **kw)
    close(torch.vdot(t[0], t[1]), torch.vdot(x[0], x[1]), **kw)
    close(torch.cat([t, t * 1j]), torch.cat([x, x * 1j]))
    close(torch.stack([t, t], 1), torch.stack([x, x], 1))
    idx = torch.tensor([3, 0, 2])
    close(t[idx], x[idx])
    close(t.index_select(1, idx.to(DEV)), x.index_select(1, idx))
    close(torch.gather(t, 1, torch.tensor([[0, 5]] * 4).to(DEV)), torch.gather(x, 1, torch.tensor([[0, 5]] * 4)))
    s, r = t.clone(), x.clone()
    s[idx] = t[:3] * 2
    r[idx] = x[:3] * 2
    close(s, r)
    s2 = torch.zeros(4, 6, dtype=torch.complex64, device=DEV).scatter(1, torch.tensor([[1]] * 4).to(DEV), t)
    close(s2, torch.zeros(4, 6, dtype=torch.complex64).scatter(1, torch.tensor([[1]] * 4), x))
    close(t.flip(0).roll(1, 1), x.flip(0).roll(1, 1))


def test_autograd_matches_cpu():
    def f(z, w):
        return ((z * w).exp().abs() + torch.view_as_real(z @ w.mT).sum(-1).mean() + (z.conj() * 2j).angle()).sum()

    z, w = crand(3, 4, seed=6), crand(3, 4, seed=7)
    grads = []
    for dev in ("cpu", DEV):
        zz, ww = z.to(dev).detach().requires_grad_(), w.to(dev).detach().requires_grad_()
        f(zz, ww).backward()
        grads.append((zz.grad.cpu(), ww.grad.cpu()))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-4)


def rotary(x, freqs):
    # Llama 4 / QwenImage style rotary embeddings through complex numbers
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2).type_as(x)


def _freqs(seq, dim):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    return ang


def test_rotary_eager_fused_compiled():
    x = torch.randn(2, 5, 3, 8)
    ang = _freqs(5, 8)
    want = rotary(x, torch.polar(torch.ones_like(ang), ang)[:, None, :])

    def step(x, ang):
        return rotary(x, torch.polar(torch.ones_like(ang), ang)[:, None, :])

    close(step(x.to(DEV), ang.to(DEV)), want, rtol=1e-5, atol=1e-5)
    torch_tpu.set_eager_mode("fused")
    try:
        close(step(x.to(DEV), ang.to(DEV)), want, rtol=1e-5, atol=1e-5)
    finally:
        torch_tpu.set_eager_mode("strict")
    torch._dynamo.reset()
    compiled = torch.compile(step, backend="tpu", fullgraph=True)
    close(compiled(x.to(DEV), ang.to(DEV)), want, rtol=1e-5, atol=1e-5)


def test_compiled_views_and_writes():
    def f(t):
        c = torch.view_as_complex(t)
        c.mul_(1j)  # writes through into t
        return c.conj().abs() + c.real, torch.view_as_real(c * c)

    x = torch.randn(4, 3, 2)
    want_t = x.clone()
    want = f(want_t)
    torch._dynamo.reset()
    t = x.to(DEV)
    got = torch.compile(f, backend="tpu", fullgraph=True)(t)
    close(got[0], want[0], rtol=1e-5, atol=1e-5)
    close(got[1], want[1], rtol=1e-5, atol=1e-5)
    close(t, want_t)


def test_errors_match_cpu():
    t = crand(3).to(DEV)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torch.view_as_complex(torch.randn(3, 3, device=DEV))
    with pytest.raises(RuntimeError, match="view_as_real doesn't work on unresolved conjugated tensors"):
        torch.view_as_real(t.conj())


# ---- the rotary-embedding paths of real models (tiny random configs), eager and compiled, strict ----

def _model_outputs(model, call):
    with torch.no_grad():
        want = call(model, "cpu")
        tm = model.to(DEV)
        eager = call(tm, DEV)
        torch._dynamo.reset()
        compiled = call(torch.compile(tm, backend="tpu", fullgraph=True), DEV)
    return want, eager, compiled


def test_qwenimage_transformer():
    from diffusers import QwenImageTransformer2DModel

    torch.manual_seed(0)
    m = QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                                    num_attention_heads=3, joint_attention_dim=16, guidance_embeds=False,
                                    axes_dims_rope=(8, 4, 4)).eval()
    inp = dict(hidden_states=torch.randn(1, 16, 16), encoder_hidden_states=torch.randn(1, 7, 16),
               encoder_hidden_states_mask=torch.ones(1, 7), timestep=torch.tensor([1.0]), img_shapes=[(1, 4, 4)])

    def call(model, dev):
        return model(**{k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in inp.items()}).sample

    want, eager, compiled = _model_outputs(m, call)
    close(eager, want, rtol=1e-4, atol=1e-4)
    close(compiled, want, rtol=1e-4, atol=1e-4)


def test_llama4_text():
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    torch.manual_seed(0)
    cfg = Llama4TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, intermediate_size_mlp=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                           num_local_experts=2, num_experts_per_tok=1, max_position_embeddings=64)
    m = Llama4ForCausalLM(cfg).eval()
    ids = torch.randint(0, 100, (1, 9))
    want, eager, compiled = _model_outputs(m, lambda model, dev: model(ids.to(dev)).logits)
    close(eager, want, rtol=1e-4, atol=1e-4)
    close(compiled, want, rtol=1e-4, atol=1e-4)
