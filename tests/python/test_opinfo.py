"""A time-bounded representative subset of the OpInfo sweep (the full sweep: python tools/op_coverage.py).

Every case must pass on the device, or fail exactly as an entry of opinfo_expected_failures.py says; a listed case
that passes (an unexpected pass) fails too, so the list cannot go stale silently. The entries themselves are checked
for reachability (the op supports the dtype and direction; the sample exists).
"""
import os
import re
import time

import pytest
import torch

from torch_tpu.testing import opinfo as H
from opinfo_expected_failures import EXPECTED_FAILURES, SWEEP_SAMPLES

# Ops the MLP, attention, decoder and diffusion paths use; a few samples each keeps CI fast. Also: ops compared by
# value and index consistency (sort-like), ops compared by distribution (random), and ops with expected failures
# (so that an unexpected pass fails CI).
CI_OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "tanh", "sigmoid",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "eq", "lt", "where", "clamp",
    "sum", "mean", "amax", "max", "argmax", "mm", "bmm", "addmm", "matmul", "nn.functional.linear",
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.embedding", "cat", "index_select",
    "masked_fill", "nn.functional.cross_entropy", "nn.functional.mse_loss", "transpose", "reshape", "expand",
    # data-dependent sizes, indexing, factories, sorting
    "nonzero", "masked_select", "masked_scatter", "index_put", "unique", "gather", "scatter_add", "cumsum", "sort",
    "topk", "tril", "arange", "full", "eye", "linspace", "nn.functional.pad", "linalg.solve",
    # index consistency, distributions, undefined values
    "argsort", "kthvalue", "median", "mode", "bernoulli", "nn.functional.dropout", "randn", "multinomial",
    "empty", "nn.functional.scaled_dot_product_attention",
    # interpolation weights computed as CPU's kernels do (bicubic, anti-aliased)
    "nn.functional.interpolate.bicubic", "_upsample_bilinear2d_aa", "nn.functional.grid_sample",
    # bags, segments and loops over elements (binary searches, NaN-keeping scatters, series)
    "nn.functional.embedding_bag", "_segment_reduce.offsets", "igamma", "matrix_exp", "scatter_reduce.amax",
    # ops with expected failures of each kind
    "native_layer_norm", "linalg.lstsq", "fft.rfft", "index_add",
    # the Hermitian eigendecomposition and the SVD (XLA's Jacobi eigensolver)
    "linalg.svd", "linalg.eigh",
]
MAX_SAMPLES = int(os.environ.get("TORCH_TPU_OPINFO_SAMPLES", "3"))
BUDGET_S = float(os.environ.get("TORCH_TPU_OPINFO_BUDGET_S", "60"))
XF = H.ExpectedFailures(EXPECTED_FAILURES)


@pytest.mark.parametrize("op", [o for o in H.find_ops(CI_OPS) if set(H.DTYPES) & o.supported_dtypes("cpu")],
                         ids=H.op_key)
def test_opinfo_on_device(op):
    deadline = time.monotonic() + BUDGET_S
    results = H.run_op(op, max_samples=MAX_SAMPLES, expected_failures=XF, deadline=deadline)
    bad = [r for r in results if r.outcome in H.BAD_OUTCOMES]
    assert not bad, "\n".join(f"{r.dtype} {r.direction} #{r.index}: {r.outcome} {r.detail}" for r in bad)
    assert any(r.outcome in (H.PASS, H.XFAIL) for r in results), "no case ran"


def test_ci_subset_names_exist():
    found = {H.op_key(o) for o in H.find_ops(CI_OPS)} | {o.name for o in H.find_ops(CI_OPS)}
    assert not set(CI_OPS) - found


def _samples(op, dtype):
    torch.manual_seed(H.case_seed(H.op_key(op), dtype))
    return list(op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))


def test_expected_failures_are_reachable():
    """Every entry can apply: the op exists, supports the dtype (and autograd for backward entries), and the listed
    samples exist among those the sweep runs."""
    ops = {H.op_key(o): o for o in H.find_ops()}
    problems = []
    for e in EXPECTED_FAILURES:
        op = ops.get(e.op)
        if op is None:
            problems.append(f"{e.describe()}: no such OpInfo")
            continue
        if e.direction == "error_input":
            if e.dtype != "any":
                problems.append(f"{e.describe()}: error inputs are keyed with dtype 'any'")
            torch.manual_seed(H.case_seed(e.op, "error_input"))
            n = len(list(op.error_inputs("cpu")))
        else:
            # a dtype of the default sweep, or one `tools/op_coverage.py --dtypes` runs
            if not isinstance(getattr(torch, e.dtype, None), torch.dtype) or \
                    getattr(torch, e.dtype) not in op.supported_dtypes("cpu"):
                problems.append(f"{e.describe()}: the op does not support {e.dtype} (the case never runs)")
                continue
            if e.direction == "backward" and not H.grad_dtype(op, getattr(torch, e.dtype)):
                problems.append(f"{e.describe()}: no backward for this op and dtype")
                continue
            n = min(len(_samples(op, e.dtype)), SWEEP_SAMPLES)
        if e.samples is not None and max(e.samples) >= n:
            problems.append(f"{e.describe()}: only {n} samples run")
        for pattern in (e.error, e.mismatch):
            if pattern is not None:
                re.compile(pattern)
    assert not problems, "\n".join(problems)


def test_expected_failures_classify_narrowly():
    """The mechanism itself: a listed case that passes is an unexpected pass, one that fails otherwise than listed
    is an unexpected failure, and an entry only covers its samples."""
    op = H.find_ops(["add"])[0]
    xf = H.ExpectedFailures(H.xfail("add", "float32", "forward", "probe", samples=[0], mismatch="not close"))
    res = H.run_op(op, dtypes=(torch.float32,), max_samples=2, backward=False, error_inputs=False,
                   expected_failures=xf)
    assert [r.outcome for r in res] == [H.XPASS, H.PASS]
    xf = H.ExpectedFailures(H.xfail("neg", "float32", "forward", "probe", fallback=["aten::neg"]))
    assert xf.classify("neg", "float32", "forward", 3, H.FAIL, "dtype x vs y")[0] == H.FAIL
    assert xf.classify("neg", "float32", "forward", 3, H.PASS_FALLBACK, "aten::neg")[0] == H.XFAIL
    assert xf.classify("neg", "float32", "forward", 3, H.PASS_FALLBACK, "aten::neg,aten::abs")[0] == H.PASS_FALLBACK
    assert xf.classify("neg", "bfloat16", "forward", 3, H.FAIL, "x")[0] == H.FAIL


def test_index_and_distribution_checks_catch_errors():
    """Sort-like ops are checked for index consistency, random ops by distribution: both reject wrong results."""
    x = torch.tensor([[3.0, 1.0, 2.0, 1.0]])
    spec = H.INDEXED_OPS["sort"]
    values = torch.tensor([[1.0, 1.0, 2.0, 3.0]])
    assert H._check_indices(x, values, torch.tensor([[3, 1, 2, 0]]), 1, False, spec) is None  # tie order free
    assert H._check_indices(x, values, torch.tensor([[1, 1, 2, 0]]), 1, False, spec) is not None  # not a perm
    assert H._check_indices(x, values, torch.tensor([[1, 2, 3, 0]]), 1, False, spec) is not None  # wrong value
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(200, generator=g).double() for _ in range(30)]
    b = [torch.randn(200, generator=g).double() for _ in range(30)]
    assert H._same_distribution(a, b, False, True) is None
    assert H._same_distribution([x * 1.2 for x in a], b, False, True) is not None  # spread
    assert H._same_distribution([x + 0.25 for x in a], b, False, False) is not None  # location
    assert H._same_distribution([x.abs() for x in a], [x.abs() for x in b], False, True) is None
    assert H._same_distribution([(x > 0).double() for x in a], [(x > 0.2).double() for x in b], False, True)
