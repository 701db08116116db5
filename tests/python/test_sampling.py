"""torch.multinomial on the device (eager and compiled), checked against the CPU by distribution.

The device's random stream differs from the CPU's, so results are compared by their properties: shape and dtype,
support (zero-probability categories are never drawn), frequencies within a tolerance of the probabilities, no
repeated category without replacement, reproducibility under a seed; and bad input raises the CPU's exception type
with the CPU's message. Nothing may run on the CPU fallback (strict mode).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


@pytest.fixture(autouse=True)
def strict():
    prev = torch_tpu.fallback_strict()
    torch_tpu.set_fallback_strict(True)
    torch_tpu.reset_fallback_counts()
    yield
    torch_tpu.set_fallback_strict(prev)
    assert torch_tpu.fallback_counts() == {}


P = torch.tensor([0.1, 0.0, 0.2, 0.3, 0.4, 0.0])


def _freq(samples: torch.Tensor, n: int) -> torch.Tensor:
    return torch.bincount(samples.flatten().cpu(), minlength=n).double() / samples.numel()


def _assert_freq(samples, p, n_draws, sigmas=5.0):
    p = (p / p.sum()).double()
    f = _freq(samples, p.numel())
    tol = sigmas * torch.sqrt(p * (1 - p) / n_draws) + 1e-9
    assert ((f - p).abs() <= tol).all(), f"frequencies {f.tolist()} vs probabilities {p.tolist()} (tol {tol.tolist()})"


def test_with_replacement_frequencies_and_support():
    torch.manual_seed(0)
    s = torch.multinomial(P.to("tpu"), 40000, replacement=True)
    assert s.device.type == "tpu" and s.dtype == torch.int64 and s.shape == (40000,)
    s = s.cpu()
    assert not ((s == 1) | (s == 5)).any(), "a zero-probability category was drawn"
    _assert_freq(s, P, 40000)


def test_one_sample_per_row_frequencies():
    """The argmax path (num_samples=1), many rows, unnormalized weights, each dtype."""
    w = P * 7.0
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        torch.manual_seed(1)
        rows = w.to(dtype).expand(30000, -1).contiguous().to("tpu")
        s = torch.multinomial(rows, 1)
        assert s.shape == (30000, 1) and s.dtype == torch.int64
        s = s.cpu()
        assert not ((s == 1) | (s == 5)).any(), dtype
        _assert_freq(s, w.to(dtype).double(), 30000)


def test_without_replacement():
    torch.manual_seed(2)
    rows = P.expand(20000, -1).contiguous().to("tpu")
    s = torch.multinomial(rows, 3).cpu()
    assert s.shape == (20000, 3)
    # Distinct categories per row, never a zero-probability one while positive ones remain (4 of them).
    assert (s[:, 0] != s[:, 1]).all() and (s[:, 0] != s[:, 2]).all() and (s[:, 1] != s[:, 2]).all()
    assert not ((s == 1) | (s == 5)).any()
    # The first draw follows p; the second follows p without the first, renormalized.
    _assert_freq(s[:, 0], P, 20000)
    p = P.double() / P.sum()
    second = sum(p[i] * torch.where(torch.arange(6) == i, 0.0, p) / (1 - p[i]) for i in range(6) if p[i] > 0)
    f2 = _freq(s[:, 1], 6)
    assert ((f2 - second).abs() <= 5 * torch.sqrt(second * (1 - second) / 20000) + 1e-9).all(), (f2, second)
    # All categories of a fully positive row: a permutation.
    perm = torch.multinomial(torch.tensor([[1.0, 2.0, 3.0, 4.0]] * 50).to("tpu"), 4).cpu()
    assert (perm.sort(dim=1).values == torch.arange(4)).all()


def test_seeded_generator_reproducible():
    p = torch.rand(4, 50).to("tpu")
    g = torch.Generator(device="tpu")
    a = torch.multinomial(p, 5, generator=g.manual_seed(7)).cpu()
    b = torch.multinomial(p, 5, generator=g.manual_seed(7)).cpu()
    c = torch.multinomial(p, 5, generator=g.manual_seed(8)).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(3)
    d = torch.multinomial(p, 30, True).cpu()
    torch.manual_seed(3)
    assert torch.equal(d, torch.multinomial(p, 30, True).cpu())


def test_out_variant_and_empty():
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    r = torch.multinomial(P.to("tpu"), 3, out=out)
    assert r is out and out.shape == (3,) and not ((out.cpu() == 1) | (out.cpu() == 5)).any()
    e = torch.multinomial(torch.rand(0, 5).to("tpu"), 2)
    assert e.shape == (0, 2) and e.dtype == torch.int64


BAD = [
    ("three dims", lambda d: torch.multinomial(torch.rand(2, 2, 2, device=d), 1)),
    ("0-d", lambda d: torch.multinomial(torch.tensor(1.0, device=d), 1)),
    ("no samples", lambda d: torch.multinomial(torch.rand(3, device=d), 0)),
    ("too many without replacement", lambda d: torch.multinomial(torch.rand(3, device=d), 4)),
    ("integer input", lambda d: torch.multinomial(torch.ones(3, dtype=torch.long, device=d), 1)),
    ("negative", lambda d: torch.multinomial(torch.tensor([0.5, -0.1], device=d), 1)),
    ("infinite", lambda d: torch.multinomial(torch.tensor([1.0, math.inf], device=d), 1)),
    ("nan", lambda d: torch.multinomial(torch.tensor([1.0, math.nan], device=d), 2)),
    ("zero row", lambda d: torch.multinomial(torch.tensor([[0.5, 0.5], [0.0, 0.0]], device=d), 1)),
    ("negative, replacement", lambda d: torch.multinomial(torch.tensor([0.5, -0.1], device=d), 3, True)),
    ("infinite, replacement", lambda d: torch.multinomial(torch.tensor([1.0, math.inf], device=d), 3, True)),
    ("nan, replacement", lambda d: torch.multinomial(torch.tensor([1.0, math.nan], device=d), 3, True)),
    ("zero row, replacement", lambda d: torch.multinomial(torch.zeros(2, 3, device=d), 3, True)),
    ("out dtype", lambda d: torch.multinomial(torch.rand(3, device=d), 1, out=torch.empty(1, device=d))),
]


@pytest.mark.parametrize("name, call", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_like_cpu(name, call):
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(Exception) as tpu:
        call("tpu")
    assert type(tpu.value) is type(cpu.value), (tpu.value, cpu.value)
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_compiled_multinomial():
    """Compiled graphs lower multinomial with the sampling rule (no fallback, no graph break)."""
    stats0 = torch_tpu.compile_stats()

    def sample(logits):
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1), torch.multinomial(probs, 2), torch.multinomial(probs, 5, True)

    f = torch.compile(sample, backend="tpu", fullgraph=True)
    logits = torch.log(P.clamp_min(1e-30)).expand(8000, -1).contiguous()
    logits[:, 1] = -math.inf
    logits[:, 5] = -math.inf
    torch.manual_seed(4)
    one, two, rep = (t.cpu() for t in f(logits.to("tpu")))
    assert torch_tpu.compile_stats()["graphs"] > stats0["graphs"]
    assert one.shape == (8000, 1) and two.shape == (8000, 2) and rep.shape == (8000, 5)
    for s in (one, two, rep):
        assert s.dtype == torch.int64 and not ((s == 1) | (s == 5)).any()
    assert (two[:, 0] != two[:, 1]).all()
    _assert_freq(one, P, 8000)
    _assert_freq(two[:, 0], P, 8000)
    _assert_freq(rep, P, 40000)


def test_generate_sampling_runs_on_device(tmp_path):
    """generate(do_sample=True) with temperature, top-k and top-p on a tiny Qwen3: every op on the device."""
    import transformers
    cfg = transformers.Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    prompt = torch.tensor([[1, 5, 9, 3, 7, 2]], device="tpu")
    kw = dict(do_sample=True, temperature=1.3, top_k=20, top_p=0.9, max_new_tokens=5, pad_token_id=0,
              eos_token_id=[3, 4])
    torch.manual_seed(5)
    a = model.generate(prompt, **kw)
    torch.manual_seed(5)
    b = model.generate(prompt, **kw)
    assert a.device.type == "tpu" and a.shape[1] > prompt.shape[1]
    assert torch.equal(a.cpu(), b.cpu())
    assert int(a.max()) < 128 and int(a.min()) >= 0


# --- randperm ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32, torch.float16])
def test_randperm_is_a_permutation_on_device(strict_fallback, dtype):
    n = 128 if dtype in (torch.int8, torch.uint8) else 300
    p = torch.randperm(n, device="tpu", dtype=dtype)
    assert p.device.type == "tpu" and p.dtype == dtype
    assert sorted(p.cpu().long().tolist()) == list(range(n))
    out = torch.empty(n, device="tpu", dtype=dtype)
    torch.randperm(n, out=out)
    assert sorted(out.cpu().long().tolist()) == list(range(n))


def test_randperm_uniform_and_seeded(strict_fallback):
    # every position of a 4-permutation takes each value about equally often; a seed repeats the permutation
    counts = torch.zeros(4, 4)
    for _ in range(400):
        p = torch.randperm(4, device="tpu").cpu()
        counts[torch.arange(4), p] += 1
    assert counts.min() > 60 and counts.max() < 140, counts
    g = torch.Generator(device="tpu")
    g.manual_seed(7)
    a = torch.randperm(50, device="tpu", generator=g)
    g.manual_seed(7)
    b = torch.randperm(50, device="tpu", generator=g)
    assert torch.equal(a, b)
    assert torch.randperm(0, device="tpu").numel() == 0 and torch.randperm(1, device="tpu").tolist() == [0]


@pytest.mark.parametrize("call", [lambda d: torch.randperm(3000, dtype=torch.half, device=d),
                                  lambda d: torch.randperm(300, dtype=torch.int8, device=d),
                                  lambda d: torch.randperm(-1, device=d),
                                  lambda d: torch.randperm(3, dtype=torch.bool, device=d)])
def test_randperm_errors_as_cpu(call):
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        call("tpu")
    assert str(cpu.value).splitlines()[0] == str(tpu.value).splitlines()[0]


# --- gamma and Dirichlet (torch.distributions Gamma, Beta, Dirichlet) ---------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 2.5, 30.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_moments(alpha, dtype):
    # Gamma(alpha, 1): mean and variance alpha (acceptance-rejection on the device)
    s = torch._standard_gamma(torch.full((20000,), alpha, dtype=dtype, device="tpu")).cpu().double()
    tol = 0.06 * max(alpha, 0.2) + 0.01
    assert abs(s.mean().item() - alpha) < tol and abs(s.var().item() - alpha) < 2 * tol
    assert s.min().item() > 0


def test_gamma_edge_concentrations_as_cpu():
    # 0, negative and NaN concentrations give the least normal number (CPU's clamp), infinity gives infinity
    a = torch.tensor([float("nan"), float("inf"), -1.0, 0.0])
    assert torch.equal(torch._standard_gamma(a.to("tpu")).cpu(), torch._standard_gamma(a))
    d = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(torch._sample_dirichlet(d.to("tpu")).cpu(), torch._sample_dirichlet(d))


def test_dirichlet_beta_gamma_distributions():
    alpha = torch.tensor([0.5, 1.0, 3.0])
    d = torch.distributions.Dirichlet(alpha.to("tpu")).sample((20000,)).cpu()
    assert (d.sum(-1) - 1).abs().max() < 1e-5 and d.min() >= 0
    torch.testing.assert_close(d.mean(0), alpha / alpha.sum(), atol=0.01, rtol=0)
    b = torch.distributions.Beta(torch.tensor(2.0, device="tpu"), torch.tensor(5.0, device="tpu")).sample((20000,))
    assert abs(b.mean().item() - 2 / 7) < 0.01
    g = torch.distributions.Gamma(torch.tensor([3.0], device="tpu"), torch.tensor([2.0], device="tpu")).sample((20000,))
    assert abs(g.mean().item() - 1.5) < 0.03
    gen = torch.Generator(device="tpu")
    gen.manual_seed(5)
    x = torch._standard_gamma(torch.ones(5, device="tpu"), generator=gen)
    gen.manual_seed(5)
    assert torch.equal(x, torch._standard_gamma(torch.ones(5, device="tpu"), generator=gen))


def _fits_pmf(samples, dist, max_k):
    # Every value with an expected count of at least 25 is within 5 standard deviations of it (a chi-square-like
    # check that a wrong acceptance step or constant fails), and all samples are whole numbers in the support.
    n = samples.numel()
    assert torch.equal(samples, samples.round()) and samples.min() >= 0
    counts = torch.bincount(samples.long().clamp(max=max_k + 1), minlength=max_k + 2).double()
    k = torch.arange(max_k + 1, dtype=torch.float64)
    expected = dist.log_prob(k).exp() * n
    keep = expected >= 25
    assert keep.any()
    dev = (counts[: max_k + 1][keep] - expected[keep]).abs() / expected[keep].sqrt()
    assert dev.max() < 5, (dev.max(), k[keep][dev.argmax()])


@pytest.mark.parametrize("rate", [0.3, 2.5, 9.9, 10.0, 37.0, 400.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_poisson_distribution(strict_fallback, rate, dtype):
    # rates under 10 multiply uniforms, from 10 on transformed rejection: both follow the Poisson pmf
    torch.manual_seed(0)
    s = torch.poisson(torch.full((100000,), rate, dtype=dtype, device="tpu")).cpu()
    assert s.dtype == dtype
    _fits_pmf(s.double(), torch.distributions.Poisson(torch.tensor(rate, dtype=torch.float64)), int(rate * 3 + 30))


def test_poisson_edge_rates_and_checks(strict_fallback):
    r = torch.poisson(torch.tensor([0.0, float("inf"), 3.0], device="tpu")).cpu()
    assert r[0] == 0 and r[1] == float("inf")
    for bad in (-1.0, float("nan")):  # CPU's error, as a device-side check
        with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
            torch.poisson(torch.tensor([bad, 1.0], device="tpu")).cpu()
    torch.manual_seed(3)
    a = torch.poisson(torch.full((8,), 4.0, device="tpu"))
    torch.manual_seed(3)
    assert torch.equal(a, torch.poisson(torch.full((8,), 4.0, device="tpu")))


@pytest.mark.parametrize("n,p", [(5, 0.3), (20, 0.2), (20, 0.7), (100, 0.5), (1000, 0.01), (1000, 0.99), (60, 0.5)])
def test_binomial_distribution(strict_fallback, n, p):
    # count * min(p, 1 - p) under 10 by inversion, from 10 on BTRS; p > 1/2 counts failures
    torch.manual_seed(0)
    s = torch.binomial(torch.full((100000,), float(n), device="tpu"), torch.full((100000,), p, device="tpu")).cpu()
    assert s.max() <= n
    _fits_pmf(s.double(), torch.distributions.Binomial(n, torch.tensor(p, dtype=torch.float64)), n)


def test_binomial_edges_and_distributions_module(strict_fallback):
    count = torch.tensor([0.0, 10.0, 10.0, float("nan"), 7.0], device="tpu")
    prob = torch.tensor([0.5, 0.0, 1.0, 0.5, float("nan")], device="tpu")
    r = torch.binomial(count, prob).cpu()
    assert r[:3].tolist() == [0.0, 0.0, 10.0] and r[3:].isnan().all()
    b = torch.distributions.Binomial(torch.tensor([30.0, 8.0], device="tpu"), torch.tensor([0.4, 0.9], device="tpu"))
    s = b.sample((20000,)).cpu()
    torch.testing.assert_close(s.mean(0), torch.tensor([12.0, 7.2]), atol=0.1, rtol=0)
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        torch.binomial(torch.ones(3, device="tpu"), torch.full((3,), 0.5, dtype=torch.float64, device="tpu"))


def test_rrelu_train_and_eval(strict_fallback):
    x = torch.randn(64, 8)
    xt = x.to("tpu").requires_grad_()
    lower, upper = 0.1, 0.3
    y = F.rrelu(xt, lower, upper, training=True)
    slope = (y / xt).detach().cpu()
    neg = x <= 0
    assert torch.equal(y.detach().cpu()[~neg], x[~neg])
    assert slope[neg].min() >= lower and slope[neg].max() <= upper and slope[neg].std() > 0.03
    y.sum().backward()  # the gradient is the drawn slope (1 for positive elements)
    torch.testing.assert_close(xt.grad.cpu()[neg], slope[neg])
    assert torch.equal(xt.grad.cpu()[~neg], torch.ones_like(x)[~neg])
    torch.testing.assert_close(F.rrelu(x.to("tpu"), lower, upper, training=False).cpu(),
                               F.rrelu(x, lower, upper, training=False))
    m = torch.nn.RReLU(lower, upper).to("tpu")
    assert m(x.to("tpu")).shape == x.shape


def test_normal_with_std_tensor(strict_fallback):
    # mean + std * z on the device, broadcast as CPU; std >= 0 checked at the call (std's minimum read back, as CUDA)
    torch.manual_seed(0)
    mean, std = torch.randn(4000, device="tpu"), torch.rand(4000, device="tpu") * 2 + 0.1
    z = ((torch.normal(mean, std) - mean) / std).cpu()
    assert abs(z.mean().item()) < 0.05 and abs(z.std().item() - 1) < 0.05
    assert abs(torch.normal(3.0, std).mean().item() - 3.0) < 0.1
    out = torch.empty(4000, device="tpu")
    assert torch.normal(mean, std, out=out) is out
    assert torch.normal(torch.zeros(3, 1, device="tpu"), torch.ones(1, 4, device="tpu")).shape == (3, 4)
    s = torch.distributions.Normal(torch.zeros(2, device="tpu"), torch.ones(2, device="tpu")).sample((3000,)).cpu()
    assert abs(s.std().item() - 1) < 0.05
    for bad in ([1.0, -1.0], [1.0, float("nan")]):
        with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
            torch.normal(torch.zeros(2, device="tpu"), torch.tensor(bad, device="tpu"))
