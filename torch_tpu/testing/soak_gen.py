"""The soak test's case machinery (torch_tpu/testing/soak.py): random tensors with layouts (Input), the per-case
random streams (Gen), and the Case record. The op families drawing from them: soak_cases.py (elementwise,
reductions, shape ops, indexing) and soak_cases_nn.py (products, sorting, nn ops, factories, overlap, complex)."""
from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch


FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int64, torch.int32)
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu)
DTYPE_WEIGHTS = ((torch.float32, 40), (torch.bfloat16, 15), (torch.float16, 5), (torch.int64, 18),
                 (torch.int32, 7), (torch.bool, 10))
DIMS = (0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 7)


# ---------------------------------------------------------------------------------------------------------------
# inputs


@dataclasses.dataclass
class Input:
    """A tensor argument: a CPU base and the view recipe that gives the argument (applied on each device)."""
    base: torch.Tensor
    recipe: Tuple[Tuple[Any, ...], ...] = ()
    layout: str = "contiguous"

    def build(self, device: str) -> Tuple[torch.Tensor, torch.Tensor]:
        base = self.base.clone() if device == "cpu" else self.base.to(device)
        t = base
        for step in self.recipe:
            kind = step[0]
            if kind == "transpose":
                t = t.transpose(step[1], step[2])
            elif kind == "permute":
                t = t.permute(step[1])
            elif kind == "slice":
                _, d, start, stop, stride = step
                t = t[(slice(None),) * d + (slice(start, stop, stride),)]
            elif kind == "expand":
                t = t.expand(step[1])
            elif kind == "flat":
                _, off, shape = step
                t = t.reshape(-1)[off:off + math.prod(shape)].view(shape)
            else:
                raise ValueError(kind)
        return base, t

    @property
    def shape(self):
        return tuple(self.build("cpu")[1].shape)


class Gen:
    """The random choices of one case."""

    def __init__(self, seed: int, index: int, variant: int = 0):
        s = seed * 1000003 + index
        self.r = random.Random(s)  # the structure: op, shapes, dtypes, layouts, static arguments
        self.g = torch.Generator().manual_seed(s * 16 + variant)  # the values: one stream per variant

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def choice(self, seq):
        return seq[self.r.randrange(len(seq))]

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def dtype(self, allowed: Sequence[torch.dtype] = None) -> torch.dtype:
        opts = [(d, w) for d, w in DTYPE_WEIGHTS if allowed is None or d in allowed]
        total = sum(w for _, w in opts)
        x = self.r.random() * total
        for d, w in opts:
            x -= w
            if x < 0:
                return d
        return opts[-1][0]

    def shape(self, min_rank: int = 0, max_rank: int = 4, nonempty: bool = False) -> Tuple[int, ...]:
        rank = self.choice([k for k in (0, 1, 1, 2, 2, 2, 3, 3, 4) if min_rank <= k <= max_rank] or [min_rank])
        return tuple(self.choice([d for d in DIMS if d > 0] if nonempty else DIMS) for _ in range(rank))

    def broadcastable(self, shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """A shape that broadcasts with `shape` (fewer dims, ones), or occasionally one that does not."""
        if self.chance(0.04) and shape:
            bad = list(shape)
            k = self.int(0, len(bad) - 1)
            bad[k] = bad[k] + 1 if bad[k] > 1 else 3
            return tuple(bad)
        k = self.int(0, len(shape))
        out = [1 if self.chance(0.35) else d for d in shape[len(shape) - k:]]
        if self.chance(0.15):  # the other operand is the bigger one
            out = [self.choice((2, 3))] + out if len(out) < 4 else out
        return tuple(out)

    def values(self, shape, dtype) -> torch.Tensor:
        if dtype.is_complex:
            part = torch.float64 if dtype == torch.complex128 else torch.float32
            return torch.complex(self.values(shape, part), self.values(shape, part))
        if dtype == torch.bool:
            return torch.rand(shape, generator=self.g) < 0.5
        if dtype.is_floating_point:
            scale = self.choice((1.0, 1.0, 3.0, 0.1))
            t = torch.randn(shape, generator=self.g) * scale
            if self.chance(0.08) and t.numel():  # a few special values
                flat = t.view(-1)
                for _ in range(self.int(1, 3)):
                    flat[self.int(0, flat.numel() - 1)] = self.choice(
                        (0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0))
            return t.to(dtype)
        lo, hi = self.choice(((-9, 10), (0, 5), (-100, 100)))
        return torch.randint(lo, hi, shape, generator=self.g).to(dtype)

    def tensor(self, shape, dtype, writable: bool = False, layout: Optional[str] = None, values=None) -> Input:
        """An Input of `shape`: a view of a larger or permuted base with probability."""
        shape = tuple(shape)
        k = len(shape)
        kinds = ["contiguous"] * 4 + (["transpose", "step", "offset", "flat"] if k >= 1 else [])
        if k >= 2:
            kinds += ["transpose", "step"]
        if k >= 3:
            kinds.append("permute")
        if not writable and k >= 1:
            kinds.append("expand")
        layout = layout or self.choice(kinds)
        make = (lambda s: values(s)) if values is not None else (lambda s: self.values(s, dtype))
        if layout == "transpose" and k >= 2:
            a, b = sorted(self.r.sample(range(k), 2))
            bs = list(shape)
            bs[a], bs[b] = bs[b], bs[a]
            return Input(make(tuple(bs)), (("transpose", a, b),), layout)
        if layout == "transpose" and k == 1:
            return Input(make(shape), (("transpose", 0, 0),), layout)
        if layout == "permute" and k >= 3:
            perm = list(range(k))
            self.r.shuffle(perm)
            inv = [0] * k
            for i, p in enumerate(perm):
                inv[p] = i
            bs = tuple(shape[inv[j]] for j in range(k))
            return Input(make(bs), (("permute", tuple(perm)),), layout)
        if layout == "step" and k >= 1:
            d = self.int(0, k - 1)
            step, off = self.choice((2, 3)), self.int(0, 1)
            bs = list(shape)
            bs[d] = shape[d] * step + off
            return Input(make(tuple(bs)), (("slice", d, off, off + shape[d] * step, step),), layout)
        if layout == "offset" and k >= 1:
            bs = list(shape)
            bs[0] = shape[0] + 2
            return Input(make(tuple(bs)), (("slice", 0, 1, 1 + shape[0], 1),), layout)
        if layout == "flat" and k >= 1:
            off = self.int(1, 3)
            return Input(make((math.prod(shape) + off + 1,)), (("flat", off, shape),), layout)
        if layout == "expand" and k >= 1:
            bs = tuple(1 if (self.chance(0.5) and d != 0) else d for d in shape)
            if bs == shape:
                bs = (1,) + shape[1:] if shape[0] != 0 else shape
            lead = self.int(0, k - 1) if self.chance(0.3) else 0
            return Input(make(bs[lead:]), (("expand", shape),), layout)
        return Input(make(shape), (), "contiguous")

    def scalar(self, dtype: Optional[torch.dtype] = None):
        """A Python number (of the kind matching dtype when given)."""
        kind = ("float" if dtype.is_floating_point else "bool" if dtype == torch.bool else "int") if dtype \
            else self.choice(("float", "int", "bool", "float"))
        if kind == "float":
            return self.choice((0.5, -1.25, 2.0, 3.5, -0.75, 1e-3, 0.0))
        if kind == "int":
            return self.choice((0, 1, -2, 3, 7))
        return self.choice((True, False))

    def index(self, n: int, count: int, unique: bool = False, negative: bool = False) -> torch.Tensor:
        """In-range int64 indices into a dimension of size n (some negative when the op accepts them)."""
        if n == 0:
            return torch.zeros((0,) if count else (0,), dtype=torch.int64)
        if unique:
            count = min(count, n)
            idx = torch.randperm(n, generator=self.g)[:count]
        else:
            idx = torch.randint(0, n, (count,), generator=self.g)
        if negative and self.chance(0.3):
            idx = torch.where(torch.rand(idx.shape, generator=self.g) < 0.5, idx - n, idx)
        return idx


# ---------------------------------------------------------------------------------------------------------------
# cases


@dataclasses.dataclass
class Case:
    op: str                         # a name for reports ("add_", "sum.dim", "index_put.accumulate", ...)
    fn: Callable[..., Any]
    args: List[Any]                 # Input or plain values
    compare: str = "close"          # close | indexed | meta | unordered
    spec: Optional[Tuple] = None    # for indexed: (_IndexedSpec, dim, squeezed)
    mutates: bool = False           # compare the inputs' bases after the call
    note: str = ""

    def describe(self) -> str:
        parts = []
        for a in self.args:
            if isinstance(a, Input):
                parts.append(f"{str(a.base.dtype).replace('torch.', '')}{list(a.shape)}/{a.layout}")
            elif isinstance(a, torch.Tensor):
                parts.append(f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}")
            else:
                parts.append(repr(a))
        return f"{self.op}({', '.join(parts)}){' ' + self.note if self.note else ''}"


def _dtype_name(d):
    return str(d).replace("torch.", "")

