"""OpInfo sweep: PyTorch's own op database run on `tpu` and compared with CPU.

For every OpInfo and dtype (float32, bfloat16, int64, bool, complex64, float8_e4m3fn, float8_e5m2 where the OpInfo
supports them) the sample inputs run
on CPU and on `tpu`; results are compared (forward, and backward where the OpInfo supports gradients). A case
counts as passing on device only if no op fell back to CPU while it ran; a case that was right only because of the
fallback is reported separately. Error inputs must raise the same exception type as on CPU.

How results are compared:
* Deterministic ops: element-wise within a dtype tolerance, after the sample's ``output_process_fn_grad`` (which
  removes ambiguities such as the signs of singular vectors), like PyTorch's own CPU-vs-device tests.
* Ops returning indices whose choice among equal elements is unspecified (unstable sort, topk, kthvalue, median,
  mode, cummax, unordered unique, ...): the values must match, and the indices must be consistent (gathering the
  input at the returned indices gives the returned values; sort/argsort indices are a permutation, topk's are
  distinct). Their gradients, routed through those indices, must match up to a permutation among equal inputs.
* Random ops (dropout, bernoulli, rand*, normal, multinomial, attention with dropout, ...): same dtypes and shapes,
  and the same distribution over 24-64 seeded draws per device: value frequencies (discrete outputs) or median,
  mean and standard deviation (continuous outputs) compared through per-draw statistics, plus a two-sample
  Kolmogorov-Smirnov test of the pooled elements for ops whose elements are independent draws.
* Ops whose values are undefined (empty*): dtype, shape and device only.

Expected failures (tests/python/opinfo_expected_failures.py) are narrow: an entry names the samples it covers (or
all of them) and the kind of failure (which ops fell back, which exception, which mismatch). A covered case that
fails differently is an unexpected failure; one that passes is an unexpected pass (XPASS). Both fail CI.

Every sample is generated from a seed derived from (op, dtype), so a sweep is reproducible.

Used by tests/python/test_opinfo.py (a time-bounded subset in CI) and tools/op_coverage.py (the full sweep that
writes docs/op_coverage.md).
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
import warnings
import zlib
from collections import Counter, defaultdict
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch.utils._pytree import tree_flatten, tree_map

import torch_tpu
from torch_tpu.testing.opinfo_random import _draws, _free_seed, _same_distribution  # noqa: F401 (H._same_distribution)
from torch_tpu.testing.tolerances import tol

# float8: PyTorch's OpInfos list float8 for very few ops (_scaled_mm, eye); casts of every float8 type are checked
# bit for bit in tests/python/test_dtypes_f8_uint.py.
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64) + FLOAT8

# Outcome of one (op, dtype, sample, direction) case.
PASS = "pass"                  # correct and ran on device
PASS_FALLBACK = "fallback"     # correct, but only because some op ran on the CPU fallback
FAIL = "fail"                  # wrong values, shapes or dtypes
ERROR = "error"                # raised where CPU did not
XFAIL = "xfail"                # failed exactly as an expected-failure entry says
XPASS = "xpass"                # listed as an expected failure, but passed
SKIP = "skip"                  # not comparable (CPU itself raised)

BAD_OUTCOMES = (FAIL, ERROR, PASS_FALLBACK, XPASS)


@dataclasses.dataclass
class CaseResult:
    op: str
    dtype: str
    direction: str  # "forward", "backward", "error_input"
    index: int
    outcome: str
    detail: str = ""


# ---------------------------------------------------------------------------------------------------------------
# expected failures


@dataclasses.dataclass(eq=False)
class XFail:
    """One expected failure: which cases it covers and how they fail.

    Exactly one kind: ``fallback`` (the result is right but these ops ran on the CPU fallback; a case whose
    fallback ops are a subset matches), ``error`` (a regex the "Type: message" of the exception matches) or
    ``mismatch`` (a regex the comparison's message matches: "dtype ...", "Tensor-likes are not close", for error
    inputs "tpu raised nothing"). ``samples`` lists the sample (or error-input) indices covered; None covers all.
    """
    op: str
    dtype: str
    direction: str
    reason: str
    samples: Optional[Tuple[int, ...]] = None
    fallback: Optional[FrozenSet[str]] = None
    error: Optional[str] = None
    mismatch: Optional[str] = None

    def __post_init__(self):
        kinds = [k for k in (self.fallback, self.error, self.mismatch) if k is not None]
        if len(kinds) != 1:
            raise ValueError(f"{self.op}: an expected failure has exactly one kind (fallback, error or mismatch)")
        if self.fallback is not None:
            self.fallback = frozenset(self.fallback)
        if self.samples is not None:
            self.samples = tuple(sorted(set(self.samples)))

    @property
    def kind(self) -> str:
        return "fallback" if self.fallback is not None else "error" if self.error is not None else "mismatch"

    def covers(self, index: int) -> bool:
        return self.samples is None or index in self.samples

    def matches(self, outcome: str, detail: str) -> bool:
        if self.fallback is not None:
            return outcome == PASS_FALLBACK and set(detail.split(",")) <= self.fallback
        if self.error is not None:
            return outcome == ERROR and re.search(self.error, detail) is not None
        return outcome == FAIL and re.search(self.mismatch, detail) is not None

    def describe(self) -> str:
        what = (f"fallback to {', '.join(sorted(self.fallback))}" if self.fallback is not None
                else f"error /{self.error}/" if self.error is not None else f"mismatch /{self.mismatch}/")
        where = "all samples" if self.samples is None else "samples " + ",".join(map(str, self.samples))
        return f"{self.op} [{self.dtype}] {self.direction} {where}: {what}"


def xfail(ops: Union[str, Sequence[str]], dtypes: Union[str, Sequence[str]], directions: Union[str, Sequence[str]],
          reason: str, *, samples: Optional[Iterable[int]] = None, fallback: Optional[Iterable[str]] = None,
          error: Optional[str] = None, mismatch: Optional[str] = None) -> List[XFail]:
    """Entries for every (op, dtype, direction) combination given (each of ops/dtypes/directions is a name or a
    sequence of names)."""
    one = lambda v: (v,) if isinstance(v, str) else tuple(v)  # noqa: E731
    return [XFail(o, d, r, reason, tuple(samples) if samples is not None else None,
                  frozenset(fallback) if fallback is not None else None, error, mismatch)
            for o in one(ops) for d in one(dtypes) for r in one(directions)]


class ExpectedFailures:
    """Expected-failure entries indexed by (op, dtype, direction); records which entries matched a case."""

    def __init__(self, entries: Iterable[XFail] = ()):
        self.entries = list(entries)
        self._by_key: Dict[Tuple[str, str, str], List[XFail]] = defaultdict(list)
        for e in self.entries:
            for other in self._by_key[(e.op, e.dtype, e.direction)]:
                if e.samples is None or other.samples is None or set(e.samples) & set(other.samples):
                    if e.kind == other.kind:
                        raise ValueError(f"overlapping expected failures: {e.describe()} / {other.describe()}")
            self._by_key[(e.op, e.dtype, e.direction)].append(e)
        self.matched: Counter = Counter()   # id(entry) -> cases it matched
        self.covered: Counter = Counter()   # id(entry) -> cases it covered (run)

    def lookup(self, op: str, dtype: str, direction: str, index: int) -> List[XFail]:
        return [e for e in self._by_key.get((op, dtype, direction), ()) if e.covers(index)]

    def classify(self, op: str, dtype: str, direction: str, index: int, outcome: str, detail: str
                 ) -> Tuple[str, str, Optional[XFail]]:
        """(outcome, detail, matching entry) of a case after applying the entries that cover it."""
        entries = self.lookup(op, dtype, direction, index)
        if not entries:
            return outcome, detail, None
        for e in entries:
            self.covered[id(e)] += 1
        if outcome == PASS:
            return XPASS, "listed as expected failure: " + entries[0].describe(), None
        for e in entries:
            if e.matches(outcome, detail):
                self.matched[id(e)] += 1
                return XFAIL, e.reason, e
        return outcome, detail + " [listed as expected, but as: " + "; ".join(e.describe() for e in entries) + "]", None

    def unmatched(self) -> List[XFail]:
        """Entries that covered cases in this run but matched none of them."""
        return [e for e in self.entries if self.covered[id(e)] and not self.matched[id(e)]]

    def unreached(self) -> List[XFail]:
        """Entries that covered no case in this run."""
        return [e for e in self.entries if not self.covered[id(e)]]


def _expected(expected_failures) -> ExpectedFailures:
    if isinstance(expected_failures, ExpectedFailures):
        return expected_failures
    return ExpectedFailures(expected_failures or ())


# ---------------------------------------------------------------------------------------------------------------
# comparisons


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def case_seed(*parts) -> int:
    """A stable seed for (op, dtype, ...): the same in every process (unlike hash())."""
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _clean(detail: str) -> str:
    """A failure detail without process-specific addresses, bounded in length (the coverage file is compared
    between runs)."""
    return _ADDRESS.sub("0x?", detail)[:300]


def _to(x, device):
    """Moves every tensor in x to device, keeping aliasing: the same tensor twice, or views of one base, stay
    aliases of one device storage (error inputs test out= arguments that overlap inputs)."""
    bases = {}

    def f(t):
        if isinstance(t, torch.device) and t.type == "cpu" or isinstance(t, str) and t == "cpu":
            return device  # x.to("cpu", ...) samples: the device version asks for the device
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return t  # meta tensors (a spacing's metadata) stay as they are on both devices
        base = t._base if t._base is not None else t
        key = id(base)
        if key not in bases:
            bases[key] = base.detach().to(device)
        b = bases[key]
        if t is base:
            r = b
        else:
            try:
                r = b.as_strided(t.size(), t.stride(), t.storage_offset())
            except RuntimeError:  # the view outgrew its base (a resized out=): copy it alone
                r = t.detach().to(device)
            # as_strided keeps the base's conjugate and negative bits: the view's own are set again
            if r.is_conj() != t.is_conj():
                r = r.conj()
            if r.is_neg() != t.is_neg():
                r = torch._neg_view(r)
        if t.requires_grad:
            r = r.detach().requires_grad_(True)
            if t is base:
                bases[key] = r
        return r

    out = tree_map(f, x)
    # Factory samples (full, arange, eye, ...) name their device in kwargs: build on the target device instead.
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        dev = out[1].get("device")
        if dev is not None and torch.device(dev).type == "cpu":
            out = (out[0], {**out[1], "device": device})
    return out


# Arguments PyTorch requires on the CPU whatever the device (as on CUDA): (op key, position in the arguments).
CPU_ARGUMENTS = {("tensor_split", 1)}


def _device_args(key: str, args, kwargs, device: str):
    """The sample's arguments for `device` (those listed in CPU_ARGUMENTS stay on the CPU)."""
    targs, tkwargs = _to((args, kwargs), device)
    keep = [i for (k, i) in CPU_ARGUMENTS if k == key and i < len(args)]
    if keep:
        targs = tuple(args[i] if i in keep else a for i, a in enumerate(targs))
    return targs, tkwargs


def _compare_meta(a, e) -> Optional[str]:
    if not isinstance(a, torch.Tensor):
        return f"expected a tensor, got {type(a).__name__}"
    if a.device.type != "tpu" and e.device.type == "cpu" and a.numel() > 0:
        return f"result on {a.device}, expected tpu"
    if a.dtype != e.dtype:
        return f"dtype {a.dtype} vs {e.dtype}"
    if a.shape != e.shape:
        return f"shape {tuple(a.shape)} vs {tuple(e.shape)}"
    return None


def _close(a: torch.Tensor, e: torch.Tensor, **tol) -> Optional[str]:
    try:
        torch.testing.assert_close(a, e, equal_nan=True, **tol)
    except AssertionError as err:
        lines = str(err).splitlines()
        return lines[0] + " " + " ".join(lines[1:4])
    return None


def _compare(actual, expected, dtype, meta_only: bool = False) -> Optional[str]:
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return f"structure differs: {a_spec} vs {e_spec}"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            err = _compare_meta(a, e)
            if err is not None:
                return err
            if meta_only:
                continue
            err = _close(a.detach().cpu(), e.detach(), **tol(e.dtype))
            if err is not None:
                return err
        elif isinstance(e, (int, float, bool)):
            if isinstance(a, torch.Tensor):
                a = a.item()
            if isinstance(e, float) and isinstance(a, float):
                if not (abs(a - e) <= 1e-4 * max(1.0, abs(e)) or (a != a and e != e)):
                    return f"{a} vs {e}"
            elif a != e:
                return f"{a} vs {e}"
    return None


# ---- ops whose indices among equal elements are unspecified ----


@dataclasses.dataclass(frozen=True)
class _IndexedSpec:
    dim_pos: Optional[int]        # position of `dim` among the arguments after the input (None: keyword only)
    dim_default: Optional[int]    # None: no dim means a full reduction returning a value only
    reduces: bool = False         # the dim is reduced (keepdim argument follows dim)
    perm: bool = False            # indices along dim are a permutation (sort, argsort)
    distinct: bool = False        # indices along dim are distinct (topk)
    indices_only: bool = False    # the op returns only the indices (argsort)
    stable_kw: bool = False       # a `stable=True` call has a specified order: compared exactly


INDEXED_OPS = {
    "sort": _IndexedSpec(0, -1, perm=True, stable_kw=True),
    "argsort": _IndexedSpec(0, -1, perm=True, indices_only=True, stable_kw=True),
    "topk": _IndexedSpec(1, -1, distinct=True),
    "kthvalue": _IndexedSpec(1, -1, reduces=True),
    "mode": _IndexedSpec(0, -1, reduces=True),
    "median": _IndexedSpec(0, None, reduces=True),
    "nanmedian": _IndexedSpec(0, None, reduces=True),
    "cummax": _IndexedSpec(0, None),
    "cummin": _IndexedSpec(0, None),
}
# Gradients routed through such indices go to one of several equal inputs.
TIE_GRAD_OPS = set(INDEXED_OPS) | {"msort", "unique", "unique_consecutive"}


def _arg(args, kwargs, pos, name, default):
    if name in kwargs:
        return kwargs[name]
    if pos is not None and len(args) > 1 + pos:
        return args[1 + pos]
    return default


def _check_indices(x: torch.Tensor, values: torch.Tensor, idx: torch.Tensor, dim: int, squeezed: bool,
                   spec: _IndexedSpec) -> Optional[str]:
    """The returned indices must select the returned values from x (and be a permutation / distinct)."""
    x = x.detach().cpu()
    values = values.detach().cpu()
    idx = idx.detach().cpu()
    if idx.dtype != torch.int64:
        return f"indices dtype {idx.dtype}"
    if x.dim() == 0:
        if idx.numel() and bool((idx != 0).any()):
            return "indices of a 0-d input are not 0"
        gathered = x.expand(values.shape)
    else:
        d = dim % x.dim()
        ii = idx.unsqueeze(d) if squeezed else idx
        if ii.numel() and bool(((ii < 0) | (ii >= x.shape[d])).any()):
            return "indices out of range"
        gathered = x.gather(d, ii)
        if squeezed:
            gathered = gathered.squeeze(d)
        if spec.perm or spec.distinct:
            s = ii.sort(dim=d).values
            if spec.perm and ii.numel():
                ar = torch.arange(ii.shape[d]).view([-1 if k == d else 1 for k in range(ii.dim())]).expand_as(ii)
                if not torch.equal(s, ar):
                    return "indices are not a permutation along dim"
            if spec.distinct and ii.shape[d] > 1 and bool((s.diff(dim=d) == 0).any()):
                return "indices are not distinct along dim"
    err = _close(gathered, values, rtol=0, atol=0)
    return None if err is None else "input at the returned indices differs from the returned values: " + err


def _compare_indexed(key: str, args, kwargs, actual, expected, dtype) -> Optional[str]:
    """Values compared with CPU, indices checked for consistency (see INDEXED_OPS)."""
    spec = INDEXED_OPS[key]
    x = args[0]
    dim = _arg(args, kwargs, spec.dim_pos, "dim", spec.dim_default)
    if spec.stable_kw and kwargs.get("stable", False):
        return _compare(actual, expected, dtype)
    if dim is None and not spec.indices_only:  # full reduction: a value only
        return _compare(actual, expected, dtype)
    if spec.indices_only:  # argsort: the input at the returned indices must be CPU's sorted input
        err = _compare(actual, expected, dtype, meta_only=True)
        if err is not None:
            return err
        xc = x.detach()
        if xc.dim() == 0 or xc.numel() == 0:
            return _check_indices(xc, xc.expand(expected.shape) if xc.dim() == 0 else xc, actual, dim, False, spec)
        d = dim % xc.dim()
        return _check_indices(xc, xc.gather(d, expected), actual, d, False, spec)
    err = _compare(actual, expected, dtype, meta_only=True)
    if err is not None:
        return err
    values_a, idx_a = actual[0], actual[1]
    values_e = expected[0]
    if key == "topk" and not _arg(args, kwargs, 4, "sorted", True):  # unsorted topk: any order
        d = dim % x.dim() if x.dim() else 0
        order = values_a.detach().cpu().sort(dim=d).indices if x.dim() else None
        if order is not None:
            values_a, idx_a = values_a.detach().cpu().gather(d, order), idx_a.detach().cpu().gather(d, order)
            values_e = values_e.sort(dim=d).values
    err = _close(values_a.detach().cpu(), values_e.detach(), **tol(values_e.dtype))
    if err is not None:
        return err
    keepdim = _arg(args, kwargs, (spec.dim_pos + 1) if spec.dim_pos is not None else None, "keepdim", False) \
        if spec.reduces else True
    return _check_indices(x, values_a, idx_a, dim, spec.reduces and not keepdim and x.dim() > 0, spec)


def _compare_unique_unordered(args, kwargs, actual, expected, dtype) -> Optional[str]:
    """unique(sorted=False): the order of the values is unspecified; compare them as sets, check inverse/counts."""
    err = _compare(actual, expected, dtype, meta_only=True)
    if err is not None:
        return err
    a = list(actual) if isinstance(actual, (tuple, list)) else [actual]
    e = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    va, ve = a[0].detach().cpu(), e[0].detach()
    oa, oe = va.sort().indices if va.numel() else va.long(), ve.sort().indices if ve.numel() else ve.long()
    err = _close(va[oa], ve[oe], rtol=0, atol=0)
    if err is not None:
        return "values differ: " + err
    k = 1
    x = args[0].detach()
    if kwargs.get("return_inverse", False):
        inv = a[k].detach().cpu()
        err = _close(va[inv], x, rtol=0, atol=0)
        if err is not None:
            return "values[inverse] differs from the input: " + err
        k += 1
    if kwargs.get("return_counts", False):
        err = _close(a[k].detach().cpu()[oa], e[k][oe], rtol=0, atol=0)
        if err is not None:
            return "counts differ: " + err
    return None


def _tie_sorted(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """g's elements ordered by (x value, g value): equal inputs form groups whose gradients may be permuted."""
    xf = x.detach().cpu().reshape(-1).double()
    gf = g.detach().cpu().reshape(-1).double()
    o = torch.sort(gf, stable=True).indices
    o2 = torch.sort(xf[o], stable=True).indices
    return gf[o][o2]


def _compare_tie_grads(inputs, actual, expected, dtype) -> Optional[str]:
    """Gradients equal up to a permutation among equal input elements."""
    if len(actual) != len(expected):
        return "structure differs"
    for x, a, e in zip(inputs, actual, expected):
        err = _compare_meta(a, e)
        if err is not None:
            return err
        err = _close(_tie_sorted(x, a), _tie_sorted(x, e), **tol(e.dtype))
        if err is not None:
            return "gradients differ beyond a permutation among equal inputs: " + err
    return None


# ---- random ops ----

RANDOM_OPS = {
    # Compared by distribution (see module docstring).
    "bernoulli", "multinomial", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train", "randint", "randn", "rand",
    "randint_like", "randn_like", "rand_like", "normal", "normal.number_mean", "normal.in_place", "uniform",
    "exponential", "geometric", "log_normal", "cauchy", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}
HEAVY_TAILED_OPS = {"cauchy", "log_normal"}  # no finite mean, or too heavy a tail for moments: median and KS only


def random_sample(key: str, args, kwargs) -> bool:
    """Whether a sample's result is random: a random op, or attention with dropout."""
    if key in RANDOM_OPS:
        return True
    if key == "nn.functional.scaled_dot_product_attention":
        return float(kwargs.get("dropout_p", 0.0)) > 0
    if key == "nn.functional.multi_head_attention_forward":
        # (query, key, value, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
        #  dropout_p, out_proj_weight, out_proj_bias, training=True, ...)
        p = kwargs.get("dropout_p", args[10] if len(args) > 10 else 0.0)
        return bool(kwargs.get("training", True)) and float(p) > 0
    return False
UNDEFINED_VALUE_OPS = {
    # Values are uninitialized memory: dtype, shape and device are compared.
    "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted",
}
# Draws per case for the distribution comparison: enough for 4000 elements, at least 24, at most 64.
_DRAW_ELEMENTS = 4000
_MIN_DRAWS = 24
_MAX_DRAWS = 64
# Random ops whose result elements are independent draws (a pooled KS test applies). Not: channel-wise dropout,
# multinomial without replacement, fractional max pooling, attention with dropout (elements share draws).
INDEPENDENT_RANDOM_OPS = {
    "bernoulli", "nn.functional.dropout", "nn.functional.alpha_dropout", "randint", "randn", "rand",
    "randint_like", "randn_like", "rand_like", "normal", "normal.number_mean", "normal.in_place", "uniform",
    "exponential", "geometric", "log_normal", "cauchy", "nn.functional.rrelu",
}


def _compare_random(key: str, run_tpu, run_cpu, actual, expected, independent: bool = False) -> Optional[str]:
    """Same structure, dtypes and shapes as CPU, and the same distribution over seeded draws."""
    err = _compare(actual, expected, None, meta_only=True)
    if err is not None:
        return err
    numel = sum(t.numel() for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor))
    count = min(_MAX_DRAWS, max(_MIN_DRAWS, math.ceil(_DRAW_ELEMENTS / max(numel, 1))))
    with _free_seed():
        got = _draws(run_tpu, count)
        ref = _draws(run_cpu, count)
    if len(got) != len(ref):
        return "structure differs between draws"
    dtypes = [t.dtype for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor)]
    for k, (a, b) in enumerate(zip(got, ref)):
        err = _same_distribution(a, b, key in HEAVY_TAILED_OPS, independent, dtypes[k] if k < len(dtypes) else None)
        if err is not None:
            return f"output {k}: {err}"
    return None


class _FallbackWatch:
    def __enter__(self):
        self.before = dict(torch_tpu._C._fallback_counts())
        return self

    def __exit__(self, *exc):
        after = torch_tpu._C._fallback_counts()
        self.ops = sorted(k for k, v in after.items() if v > self.before.get(k, 0))
        return False


def _grad_inputs(args) -> List[torch.Tensor]:
    leaves, _ = tree_flatten(args)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def grad_dtype(op, dtype) -> bool:
    """Whether the sweep checks gradients of `op` for `dtype`: floating dtypes, and complex ones where the OpInfo
    supports complex autograd (gradients follow PyTorch's conjugate Wirtinger convention on both devices)."""
    if not op.supports_autograd or dtype in FLOAT8:
        return False
    if dtype.is_complex:
        return dtype in op.supported_backward_dtypes("cpu")
    return dtype.is_floating_point


def _seed_like(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """A random real cotangent for an output: [..., 2] (real and imaginary weights) for a complex one."""
    return torch.randn(tuple(t.shape) + ((2,) if t.is_complex() else ()), generator=g)


def _weighted(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return (t.real.float() * w[..., 0]).sum() + (t.imag.float() * w[..., 1]).sum()
    return (t.float() * w).sum()


def _backward(fn, sample_args, device, seed_outs, process=None):
    out = fn(*sample_args[0], **sample_args[1])
    if process is not None:
        out = process(out)
    leaves = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        return None
    total = sum(_weighted(t, w.to(device)) for t, w in zip(leaves, seed_outs))
    inputs = _grad_inputs(sample_args)
    grads = torch.autograd.grad(total, inputs, allow_unused=True)
    return [g if g is not None else torch.zeros_like(i) for g, i in zip(grads, inputs)]


def _upcast(x, dtype, to=torch.float32):
    """x with every tensor of `dtype` as a float32 (`to`) copy (leaves requiring grad stay leaves requiring grad)."""
    def f(t):
        if isinstance(t, torch.Tensor) and t.dtype == dtype:
            u = t.detach().to(to)
            return u.requires_grad_(t.requires_grad)
        return t
    return tree_map(f, x)


def _rounded_like(x, like):
    leaves, spec = tree_flatten(x)
    ref = tree_flatten(like)[0]
    if len(leaves) != len(ref):
        return x
    return torch.utils._pytree.tree_unflatten(
        [a.to(r.dtype) if isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor) else a
         for a, r in zip(leaves, ref)], spec)


def _on_half_miss(compare, reference, dtype, judge):
    """For bf16/f16 cases: `compare`, and where it finds values not close, `judge(out, ref, err)` decides (the
    error to report, or None) given `reference()` computed with warnings silenced (`err` when it cannot be)."""
    if dtype not in (torch.bfloat16, torch.float16):
        return compare

    def check(out):
        err = compare(out)
        if err is None or "not close" not in err:
            return err
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = reference()
        except Exception:  # noqa: BLE001
            return err
        return judge(out, ref, err)
    return check


def _max_error(actual, reference) -> Optional[float]:
    """The largest absolute difference between the floating tensors of two results of one structure: infinite
    where their NaNs or infinities differ, None where their structures or shapes do."""
    a, r = tree_flatten(actual)[0], tree_flatten(reference)[0]
    if len(a) != len(r):
        return None
    worst = 0.0
    for x, y in zip(a, r):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            continue
        if not (x.is_floating_point() or x.is_complex()):
            continue
        x, y = x.detach().cpu().to(torch.complex128 if x.is_complex() else torch.float64), y.detach().cpu()
        y = y.to(x.dtype)
        if x.shape != y.shape:
            return None
        finite = x.isfinite() & y.isfinite()
        if not torch.equal(x.isnan(), y.isnan()) or not torch.equal(x[~finite & ~x.isnan()], y[~finite & ~y.isnan()]):
            return math.inf
        if bool(finite.any()):
            worst = max(worst, float((x[finite] - y[finite]).abs().max()))
    return worst


def _with_float32_reference(compare, reference, dtype, expected=None, reference64=None):
    """For bf16/f16 cases: a result that misses CPU's (its half kernels round intermediates their own way) passes
    if it matches CPU's float32 computation rounded to the result dtypes, a reference at least as accurate, or,
    given CPU's own result (`expected`) and a float64 computation (`reference64()`), if it is no farther from the
    float64 result than CPU's (the device rounds its intermediates less than CPU's half kernels do)."""
    def judge(out, ref, err):
        if _compare(out, ref, dtype) is None:
            return None
        if expected is None or reference64 is None:
            return err
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref64 = reference64()
        except Exception:  # noqa: BLE001
            return err
        mine, cpus = _max_error(out, ref64), _max_error(expected, ref64)
        return None if mine is not None and cpus is not None and mine < math.inf and mine <= cpus else err
    return _on_half_miss(compare, reference, dtype, judge)


def _device_case(run: Callable, compare: Callable[[object], Optional[str]]) -> Tuple[str, str]:
    """Runs one case on the device and classifies it (compare returns None when the result is right)."""
    outcome, detail = PASS, ""
    with _FallbackWatch() as watch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            err = compare(run())
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            outcome = ERROR
    if err is not None:
        outcome, detail = (ERROR if outcome == ERROR else FAIL), err
    elif watch.ops:
        outcome, detail = PASS_FALLBACK, ",".join(watch.ops)
    return outcome, _clean(detail)


def _identity(x):
    return x


def run_op(op, dtypes: Iterable[torch.dtype] = DTYPES, max_samples: Optional[int] = None,
           backward: bool = True, error_inputs: bool = True,
           expected_failures: Union[None, ExpectedFailures, Iterable[XFail]] = None,
           deadline: Optional[float] = None, reference: bool = False) -> List[CaseResult]:
    """Runs one OpInfo's samples on tpu and CPU; returns a result per case. `reference`: the OpInfo's reference
    inputs instead (for elementwise ops: small, large and extremal values, empty, broadcast, scalar and
    non-contiguous operands), forward only."""
    key = op_key(op)
    results: List[CaseResult] = []
    xf = _expected(expected_failures)
    supported = op.supported_dtypes("cpu")
    undefined = key in UNDEFINED_VALUE_OPS

    def record(dname, direction, i, outcome, detail):
        outcome, detail, entry = xf.classify(key, dname, direction, i, outcome, detail)
        results.append(CaseResult(key, dname, direction, i, outcome, _clean(detail)))
        return outcome, entry

    for dtype in dtypes:
        if dtype not in supported:
            continue
        dname = str(dtype).replace("torch.", "")
        grad_ok = backward and not reference and grad_dtype(op, dtype)
        try:
            torch.manual_seed(case_seed(key, dname))
            inputs = op.reference_inputs if reference else op.sample_inputs
            samples = list(inputs("cpu", dtype, requires_grad=grad_ok))
        except Exception:  # noqa: BLE001
            continue
        if max_samples is not None:
            samples = samples[:max_samples]
        for i, sample in enumerate(samples):
            if deadline is not None and time.monotonic() > deadline:
                return results
            fn = op.op
            process = getattr(sample, "output_process_fn_grad", None) or _identity
            args = (sample.input,) + tuple(sample.args)
            kwargs = dict(sample.kwargs)
            is_random = random_sample(key, args, kwargs)
            # Device copies first: a sample may mutate its inputs (in-place variants).
            try:
                targs, tkwargs = _device_args(key, args, kwargs, "tpu")
            except Exception as e:  # noqa: BLE001
                record(dname, "forward", i, ERROR, f"moving the sample to tpu: {type(e).__name__}: {e}")
                continue
            if not any(isinstance(t, torch.Tensor) for t in tree_flatten((targs, tkwargs))[0]) and \
                    "device" not in tkwargs:
                # only Python numbers (add(2.0, 3.0)): the result is a CPU tensor by definition
                results.append(CaseResult(key, dname, "forward", i, SKIP, "no tensor or device argument"))
                continue
            cargs, ckwargs = _to((args, kwargs), "cpu") if is_random else (args, kwargs)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.manual_seed(0)
                    expected = process(fn(*args, **kwargs))
            except Exception as e:  # noqa: BLE001
                results.append(CaseResult(key, dname, "forward", i, SKIP, f"cpu raised {type(e).__name__}"))
                continue

            def forward():
                torch.manual_seed(0)
                return process(fn(*targs, **tkwargs))

            if is_random:
                compare = lambda out: _compare_random(  # noqa: E731
                    key, lambda r: process(fn(*targs, **tkwargs)), lambda r: process(fn(*cargs, **ckwargs)),
                    out, expected, independent=key in INDEPENDENT_RANDOM_OPS)
            elif undefined:
                compare = lambda out: _compare(out, expected, dtype, meta_only=True)  # noqa: E731
            elif key in INDEXED_OPS:
                compare = lambda out: _compare_indexed(key, args, kwargs, out, expected, dtype)  # noqa: E731
            elif key == "unique" and not kwargs.get("sorted", True) and kwargs.get("dim") is None:
                compare = lambda out: _compare_unique_unordered(args, kwargs, out, expected, dtype)  # noqa: E731
            else:
                compare = _with_float32_reference(
                    lambda out: _compare(out, expected, dtype),
                    lambda: _rounded_like(process(fn(*_upcast(args, dtype), **_upcast(kwargs, dtype))), expected),
                    dtype, expected,
                    lambda: process(fn(*_upcast(args, dtype, torch.float64), **_upcast(kwargs, dtype, torch.float64))))
            outcome, detail = _device_case(forward, compare)
            outcome, entry = record(dname, "forward", i, outcome, detail)
            if not grad_ok or outcome in (ERROR, FAIL) or (outcome == XFAIL and entry.kind != "fallback"):
                continue
            # Backward: same random cotangents on both devices.
            try:
                outs = [t for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
                if not outs:
                    continue
                g = torch.Generator().manual_seed(i)
                seeds = [_seed_like(t, g) for t in outs]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.manual_seed(0)
                    exp_g = _backward(fn, (args, kwargs), "cpu", seeds, process)
            except Exception:  # noqa: BLE001
                continue
            if exp_g is None:
                continue

            def backward_run():
                torch.manual_seed(0)
                return _backward(fn, (targs, tkwargs), "tpu", seeds, process)

            if is_random:
                compare = lambda out: _compare_random(  # noqa: E731
                    key, lambda r: _backward(fn, (targs, tkwargs), "tpu", seeds, process),
                    lambda r: _backward(fn, (cargs, ckwargs), "cpu", seeds, process), out, exp_g)
            elif key in TIE_GRAD_OPS:
                def compare(out, exp_g=exp_g):
                    err = _compare(out, exp_g, dtype)
                    if err is None:
                        return None
                    return _compare_tie_grads(_grad_inputs((args, kwargs)), out, exp_g, dtype)
            else:
                def upcast_grads(exp_g=exp_g, to=torch.float32):
                    ua, uk = _upcast((args, kwargs), dtype, to)
                    torch.manual_seed(0)
                    grads = _backward(fn, (ua, uk), "cpu", seeds, process)
                    return _rounded_like(grads, exp_g) if to == torch.float32 else grads
                compare = _with_float32_reference(lambda out: _compare(out, exp_g, dtype), upcast_grads, dtype,
                                                  exp_g, lambda: upcast_grads(to=torch.float64))
            outcome, detail = _device_case(backward_run, compare)
            record(dname, "backward", i, outcome, detail)
    if error_inputs and not reference and (deadline is None or time.monotonic() <= deadline):
        results.extend(run_error_inputs(op, xf))
    return results


def run_error_inputs(op, expected_failures=None) -> List[CaseResult]:
    key = op_key(op)
    xf = _expected(expected_failures)
    results = []
    try:
        torch.manual_seed(case_seed(key, "error_input"))
        errs = list(op.error_inputs("cpu"))
        # a second, untouched copy for the device: the CPU call may resize out= arguments and their aliases
        fresh = list(op.error_inputs("cpu"))
    except Exception:  # noqa: BLE001
        return results
    for i, (ei, ei_dev) in enumerate(zip(errs, fresh)):
        s = ei.sample_input
        args = (s.input,) + tuple(s.args)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                op.op(*args, **s.kwargs)
            cpu_type = None
        except Exception as e:  # noqa: BLE001
            cpu_type = type(e)
        if cpu_type is None:
            continue
        sd = ei_dev.sample_input
        targs, tkwargs = _to(((sd.input,) + tuple(sd.args), sd.kwargs), "tpu")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                op.op(*targs, **tkwargs)
                torch.tpu.synchronize()  # device-side checks (index bounds) raise at a synchronization point
            tpu_type = None
        except Exception as e:  # noqa: BLE001
            tpu_type = type(e)
        ok = tpu_type is not None and issubclass(tpu_type, cpu_type)
        outcome = PASS if ok else FAIL
        detail = "" if ok else f"cpu raised {cpu_type.__name__}, tpu raised {tpu_type.__name__ if tpu_type else 'nothing'}"
        outcome, detail, _ = xf.classify(key, "any", "error_input", i, outcome, detail)
        results.append(CaseResult(key, "any", "error_input", i, outcome, _clean(detail)))
    return results


# ---------------------------------------------------------------------------------------------------------------
# reports


def summarize(results: List[CaseResult]):
    """Per-op counts of (direction, outcome)."""
    per_op: Dict[str, Counter] = defaultdict(Counter)
    for r in results:
        per_op[r.op][(r.direction, r.outcome)] += 1
    return per_op


def rate(results: List[CaseResult], direction: str, ops: Optional[Iterable[str]] = None,
         dtype: Optional[str] = None) -> Tuple[int, int]:
    """(cases right on the device, cases run) for a direction (and dtype name); unexpected passes count as passes.
    Cases CPU itself rejects (SKIP) are not run, so the rate is over the samples that pass on CPU."""
    ops = set(ops) if ops is not None else None
    sel = [r for r in results if r.direction == direction and r.outcome != SKIP and (ops is None or r.op in ops)
           and (dtype is None or r.dtype == dtype)]
    return sum(r.outcome in (PASS, XPASS) for r in sel), len(sel)


def markdown_table(results: List[CaseResult]) -> str:
    per_op = summarize(results)
    lines = ["| op | fwd pass | fwd fallback | fwd fail | fwd xfail | bwd pass | bwd fallback | bwd fail | bwd xfail "
             "| error-input pass | complex64 fwd pass | complex64 bwd pass |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by_dtype: Dict[Tuple[str, str], Counter] = defaultdict(Counter)
    for r in results:
        if r.dtype == "complex64" and r.outcome != SKIP:
            by_dtype[(r.op, r.direction)][r.outcome in (PASS, XPASS)] += 1
    for op in sorted(per_op):
        c = per_op[op]

        def col(d):
            total = sum(v for (dd, o), v in c.items() if dd == d and o != SKIP)
            return (f"{c[(d, PASS)] + c[(d, XPASS)]}/{total}", c[(d, PASS_FALLBACK)], c[(d, FAIL)] + c[(d, ERROR)],
                    c[(d, XFAIL)])
        f, b = col("forward"), col("backward")
        e = col("error_input")
        cf, cb = by_dtype[(op, "forward")], by_dtype[(op, "backward")]
        c64 = [f"{c[True]}/{c[True] + c[False]}" if c else "-" for c in (cf, cb)]
        lines.append(f"| {op} | {f[0]} | {f[1]} | {f[2]} | {f[3]} | {b[0]} | {b[1]} | {b[2]} | {b[3]} | {e[0]} "
                     f"| {c64[0]} | {c64[1]} |")
    return "\n".join(lines)


def find_ops(names: Optional[Iterable[str]] = None):
    from torch.testing._internal.common_methods_invocations import op_db

    if names is None:
        return list(op_db)
    names = set(names)
    return [op for op in op_db if op.name in names or op_key(op) in names]
