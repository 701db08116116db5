"""Soak case families (torch_tpu/testing/soak.py): matrix products, sort-like ops, nn ops (normalization, losses,
pooling), factories, overlapping writes, and complex numbers. Each gen_* draws one Case from a Gen."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_tpu.testing.opinfo import _IndexedSpec
from torch_tpu.testing.soak_gen import FLOATS, INTS, Case, Gen, Input, _dtype_name


def gen_matmul(g: Gen) -> Case:
    name = g.choice(("mm", "bmm", "matmul", "addmm", "addmv", "mv", "dot", "outer", "linear", "baddbmm", "einsum",
                     "tensordot", "addbmm", "vdot", "inner", "kron"))
    dt = g.dtype(FLOATS + INTS) if g.chance(0.85) else g.dtype()
    dt2 = dt if g.chance(0.92) else g.dtype()
    m, kk, n, b = (g.choice((0, 1, 2, 3, 5, 8)) for _ in range(4))
    T = lambda s, d=dt: g.tensor(s, d)  # noqa: E731
    if name == "mm":
        return Case(name, torch.mm, [T((m, kk)), T((kk, n), dt2)])
    if name == "bmm":
        return Case(name, torch.bmm, [T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "matmul":
        ra, rb = g.int(1, 4), g.int(1, 4)
        sa = tuple(g.choice((1, 2, 3)) for _ in range(ra - 2)) + ((m, kk) if ra >= 2 else (kk,))
        sb = tuple(g.choice((1, 2, 3)) for _ in range(rb - 2)) + ((kk, n) if rb >= 2 else (kk,))
        if ra > 2 and rb > 2 and g.chance(0.6):
            lead = sa[:-2]
            sb = lead[len(lead) - (rb - 2):] + sb[-2:] if len(lead) >= rb - 2 else sb
        return Case(name, torch.matmul, [T(sa), T(sb, dt2)])
    if name == "addmm":
        beta, alpha = g.choice((1, 0.5, 0)), g.choice((1, -2))
        return Case(name, lambda c, a, b_, be=beta, al=alpha: torch.addmm(c, a, b_, beta=be, alpha=al),
                    [T(g.broadcastable((m, n))), T((m, kk)), T((kk, n), dt2)], note=f"beta={beta} alpha={alpha}")
    if name == "addmv":
        return Case(name, torch.addmv, [T((m,)), T((m, kk)), T((kk,), dt2)])
    if name == "mv":
        return Case(name, torch.mv, [T((m, kk)), T((kk,), dt2)])
    if name in ("dot", "vdot", "inner"):
        fn = getattr(torch, name)
        return Case(name, fn, [T((kk,)), T((kk,), dt2)])
    if name == "outer":
        return Case(name, torch.outer, [T((m,)), T((n,), dt2)])
    if name == "kron":
        return Case(name, torch.kron, [T((m, 2)), T((2, n), dt2)])
    if name == "linear":
        bias = g.chance(0.6)
        args = [T((b, m, kk) if g.chance(0.5) else (m, kk)), T((n, kk), dt2)] + ([T((n,), dt2)] if bias else [])
        return Case(name, lambda *a: F.linear(*a), args)
    if name == "baddbmm":
        return Case(name, torch.baddbmm, [T((b, m, n)), T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "addbmm":
        return Case(name, torch.addbmm, [T((m, n)), T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "tensordot":
        return Case(name, lambda a, b_: torch.tensordot(a, b_, dims=([1], [0])), [T((m, kk, 2)), T((kk, n), dt2)])
    eq = g.choice(("ij,jk->ik", "bij,bjk->bik", "ij->ji", "ii->i", "ij,ij->", "i,j->ij", "bhqd,bhkd->bhqk"))
    shapes = {"ij,jk->ik": [(m, kk), (kk, n)], "bij,bjk->bik": [(b, m, kk), (b, kk, n)], "ij->ji": [(m, n)],
              "ii->i": [(m, m)], "ij,ij->": [(m, n), (m, n)], "i,j->ij": [(m,), (n,)],
              "bhqd,bhkd->bhqk": [(b, 2, m, kk), (b, 2, n, kk)]}[eq]
    return Case("einsum", lambda *a, eq=eq: torch.einsum(eq, *a), [T(s) for s in shapes], note=eq)


def gen_sort(g: Gen) -> Case:
    name = g.choice(("sort", "argsort", "topk", "kthvalue", "msort", "median", "mode", "cummax", "unique",
                     "unique_consecutive", "searchsorted", "sort_stable", "nanmedian", "bucketize"))
    dt = g.dtype()
    shape = g.shape(min_rank=0 if name not in ("msort", "searchsorted") else 1)
    k = len(shape)
    x = g.tensor(shape, dt)
    d = g.int(-max(k, 1), max(k, 1) - 1)
    n = shape[d] if k else 1
    if name in ("sort", "sort_stable"):
        desc = g.chance(0.5)
        if name == "sort_stable":
            return Case(name, lambda t, d=d, de=desc: tuple(torch.sort(t, dim=d, descending=de, stable=True)), [x],
                        note=f"dim={d} descending={desc}")
        return Case(name, lambda t, d=d, de=desc: tuple(torch.sort(t, d, de)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, -1, perm=True), d, False), note=f"dim={d} descending={desc}")
    if name == "argsort":
        desc = g.chance(0.5)
        # returned with the values it selects (checked for consistency)
        return Case(name, lambda t, d=d, de=desc: (t.gather(d, torch.argsort(t, d, de)) if t.dim() else t,
                                                   torch.argsort(t, d, de)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, -1, perm=True), d, False), note=f"dim={d} descending={desc}")
    if name == "topk":
        kk = g.int(0, n)
        largest = g.chance(0.7)
        return Case(name, lambda t, kk=kk, d=d, l=largest: tuple(torch.topk(t, kk, d, l)), [x], compare="indexed",
                    spec=(_IndexedSpec(1, -1, distinct=True), d, False), note=f"k={kk} dim={d} largest={largest}")
    if name in ("kthvalue", "median", "mode", "nanmedian"):
        keep = g.chance(0.4)
        if name == "kthvalue":
            kk = g.int(1, max(n, 1))
            fn = lambda t, kk=kk, d=d, kd=keep: tuple(torch.kthvalue(t, kk, d, kd))  # noqa: E731
            note = f"k={kk} dim={d} keepdim={keep}"
        else:
            op = getattr(torch, name)
            fn = lambda t, op=op, d=d, kd=keep: tuple(op(t, d, kd))  # noqa: E731
            note = f"dim={d} keepdim={keep}"
        return Case(name, fn, [x], compare="indexed", spec=(_IndexedSpec(0, -1, reduces=True), d, not keep and k > 0),
                    note=note)
    if name == "msort":
        return Case(name, torch.msort, [x])
    if name == "cummax":
        return Case(name, lambda t, d=d: tuple(torch.cummax(t, d)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, None), d, False), note=f"dim={d}")
    if name == "unique":
        srt, inv, cnt = g.chance(0.7), g.chance(0.5), g.chance(0.5)
        return Case(name, lambda t, s=srt, i=inv, c=cnt: torch.unique(t, sorted=s, return_inverse=i,
                                                                       return_counts=c),
                    [x], compare="close" if srt else "unordered", note=f"sorted={srt} inverse={inv} counts={cnt}")
    if name == "unique_consecutive":
        return Case(name, lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), [x])
    if name == "bucketize":
        bnd = torch.sort(g.values((g.int(0, 6),), dt if dt != torch.bool else torch.float32)).values
        right = g.chance(0.5)
        return Case(name, lambda t, b, r=right: torch.bucketize(t, b, right=r), [x, Input(bnd)], note=f"right={right}")
    sorted_seq = torch.sort(g.values(shape[:-1] + (g.int(0, 6),), dt), dim=-1).values
    right = g.chance(0.5)
    return Case(name, lambda s, v, r=right: torch.searchsorted(s, v, right=r), [Input(sorted_seq), x],
                note=f"right={right}")


def gen_nn(g: Gen) -> Case:
    name = g.choice(("layer_norm", "group_norm", "batch_norm", "batch_norm_train", "rms_norm", "conv1d", "conv2d",
                     "conv_transpose2d", "avg_pool2d", "max_pool2d", "adaptive_avg_pool2d", "cross_entropy",
                     "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "bce_with_logits", "bce",
                     "kl_div", "pad", "interpolate", "sdpa", "softmax_dtype", "normalize", "pixel_shuffle",
                     "cosine_similarity", "pdist_like", "glu", "embedding_bag_like", "upsample_bilinear",
                     "max_pool1d", "avg_pool1d", "log_softmax_loss"))
    dt = g.dtype(FLOATS) if g.chance(0.95) else g.dtype()
    N, C, H, W = g.choice((0, 1, 2, 3)), g.choice((1, 2, 4)), g.choice((1, 3, 5, 8)), g.choice((1, 4, 6))
    T = lambda s, d=dt: g.tensor(s, d)  # noqa: E731
    if name == "layer_norm":
        shape = (N, H, W)
        ns = shape[g.int(1, 2):]
        aff = g.chance(0.6)
        args = [T(shape)] + ([T(ns), T(ns)] if aff else [])
        return Case(name, lambda x, *wb, ns=ns: F.layer_norm(x, ns, *wb), args, note=f"normalized={ns}")
    if name == "rms_norm":
        shape = (N, H, W)
        ns = shape[-1:]
        return Case(name, lambda x, w, ns=ns: F.rms_norm(x, ns, w), [T(shape), T(ns)])
    if name == "group_norm":
        G = g.choice([gg for gg in (1, 2, 4) if C % gg == 0])
        return Case(name, lambda x, w, b, G=G: F.group_norm(x, G, w, b), [T((N, C, H, W)), T((C,)), T((C,))],
                    note=f"groups={G}")
    if name in ("batch_norm", "batch_norm_train"):
        train = name == "batch_norm_train"
        rm = Input(torch.randn(C, generator=g.g))
        rv = Input(torch.rand(C, generator=g.g) + 0.5)
        return Case(name, lambda x, rm, rv, w, b, t=train: F.batch_norm(x, rm, rv, w, b, training=t),
                    [T((max(N, 1) if train else N, C, H, W)), rm, rv, T((C,)), T((C,))], mutates=train)
    if name in ("conv1d", "conv2d", "conv_transpose2d"):
        groups = g.choice((1, 1, C)) if name != "conv_transpose2d" else 1
        O = g.choice((1, 2, 4)) * groups
        ks = g.choice((1, 2, 3))
        stride, pad, dil = g.choice((1, 2)), g.choice((0, 1)), g.choice((1, 1, 2))
        bias = g.chance(0.5)
        if name == "conv1d":
            x, w = T((max(N, 1), C, W + 4)), T((O, C // groups, ks))
            fn = lambda x, w, *b, s=stride, p=pad, d=dil, gr=groups: F.conv1d(x, w, *b, s, p, d, gr)  # noqa: E731
        elif name == "conv2d":
            x, w = T((max(N, 1), C, H + 2, W + 2)), T((O, C // groups, ks, ks))
            fn = lambda x, w, *b, s=stride, p=pad, d=dil, gr=groups: F.conv2d(x, w, *b, s, p, d, gr)  # noqa: E731
        else:
            x, w = T((max(N, 1), C, H, W)), T((C, O, ks, ks))
            fn = lambda x, w, *b, s=stride, p=pad: F.conv_transpose2d(x, w, *b, s, p)  # noqa: E731
        return Case(name, fn, [x, w] + ([T((O,))] if bias else []),
                    note=f"stride={stride} pad={pad} dil={dil} groups={groups}")
    if name in ("avg_pool2d", "max_pool2d"):
        ks, st = g.choice((1, 2, 3)), g.choice((1, 2))
        pad = g.int(0, ks // 2)
        ceil = g.chance(0.3)
        fn = F.avg_pool2d if name == "avg_pool2d" else F.max_pool2d
        return Case(name, lambda x, fn=fn, k=ks, s=st, p=pad, c=ceil: fn(x, k, s, p, ceil_mode=c),
                    [T((N, C, H + 2, W + 2))], note=f"k={ks} s={st} p={pad} ceil={ceil}")
    if name in ("max_pool1d", "avg_pool1d"):
        ks = g.choice((1, 2, 3))
        fn = getattr(F, name)
        return Case(name, lambda x, fn=fn, k=ks: fn(x, ks), [T((max(N, 1), C, W + 3))], note=f"k={ks}")
    if name == "adaptive_avg_pool2d":
        out = (g.int(1, H + 1), g.int(1, W + 1))
        return Case(name, lambda x, o=out: F.adaptive_avg_pool2d(x, o), [T((N, C, H, W))], note=str(out))
    if name in ("cross_entropy", "nll_loss", "log_softmax_loss"):
        red = g.choice(("mean", "sum", "none"))
        tgt = torch.randint(0, C, (N,), generator=g.g)
        if g.chance(0.2) and N:
            tgt[0] = -100  # ignore_index
        if name == "cross_entropy":
            ls = g.choice((0.0, 0.0, 0.1))
            return Case(name, lambda x, t, r=red, ls=ls: F.cross_entropy(x, t, reduction=r, label_smoothing=ls),
                        [T((N, C)), Input(tgt)], note=f"reduction={red} smoothing={ls}")
        if name == "nll_loss":
            return Case(name, lambda x, t, r=red: F.nll_loss(x, t, reduction=r), [T((N, C)), Input(tgt)],
                        note=f"reduction={red}")
        return Case(name, lambda x, t, r=red: F.nll_loss(F.log_softmax(x, -1), t, reduction=r),
                    [T((N, C)), Input(tgt)], note=f"reduction={red}")
    if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "bce_with_logits", "kl_div"):
        shape = g.shape(nonempty=g.chance(0.8))
        red = g.choice(("mean", "sum", "none"))
        fn = {"mse_loss": F.mse_loss, "l1_loss": F.l1_loss, "smooth_l1_loss": F.smooth_l1_loss,
              "huber_loss": F.huber_loss, "bce_with_logits": F.binary_cross_entropy_with_logits,
              "kl_div": F.kl_div}[name]
        return Case(name, lambda a, b, fn=fn, r=red: fn(a, b, reduction=r), [T(shape), T(shape)],
                    note=f"reduction={red}")
    if name == "bce":
        shape = g.shape(nonempty=True)
        p = Input(torch.rand(shape, generator=g.g).clamp(0.01, 0.99).to(dt))
        y = Input(torch.rand(shape, generator=g.g).to(dt))
        return Case(name, F.binary_cross_entropy, [p, y])
    if name == "pad":
        mode = g.choice(("constant", "constant", "reflect", "replicate", "circular"))
        x = T((max(N, 1), C, H + 2, W + 2))
        p = tuple(g.int(0, 2) for _ in range(4))
        if mode == "constant" and g.chance(0.3):
            p = (-1, 1, 0, 2)
        v = g.scalar(dt) if mode == "constant" else None
        return Case(name, lambda x, p=p, m=mode, v=v: F.pad(x, p, m, v) if v is not None else F.pad(x, p, m),
                    [x], note=f"{p} {mode} {v}")
    if name in ("interpolate", "upsample_bilinear"):
        mode = g.choice(("nearest", "bilinear", "bicubic", "nearest-exact")) if name == "interpolate" else "bilinear"
        size = (g.int(1, 9), g.int(1, 9))
        ac = g.chance(0.5) if mode in ("bilinear", "bicubic") else None
        return Case(name, lambda x, s=size, m=mode, ac=ac: F.interpolate(x, size=s, mode=m, align_corners=ac),
                    [T((N, C, H, W))], note=f"{mode} {size} align_corners={ac}")
    if name == "sdpa":
        B, Hh, L, S, E = max(N, 1), g.choice((1, 2)), g.choice((1, 3, 5)), g.choice((1, 4, 5)), g.choice((2, 4, 8))
        causal = g.chance(0.4)
        mask_kind = g.choice((None, None, "bool", "float"))
        args = [T((B, Hh, L, E)), T((B, Hh, S, E)), T((B, Hh, S, E))]
        if mask_kind == "bool" and not causal:
            m = torch.rand((L, S), generator=g.g) < 0.7
            m[:, 0] = True
            args.append(Input(m))
        elif mask_kind == "float" and not causal:
            args.append(T((L, S)))
        return Case(name, lambda q, k_, v, *m, c=causal: F.scaled_dot_product_attention(q, k_, v, *m, is_causal=c),
                    args, note=f"causal={causal} mask={mask_kind}")
    if name == "softmax_dtype":
        return Case(name, lambda x: torch.softmax(x, -1, dtype=torch.float32), [T((N, C, W))])
    if name == "normalize":
        p = g.choice((1, 2))
        return Case(name, lambda x, p=p: F.normalize(x, p=p, dim=-1), [T((N, C, W))], note=f"p={p}")
    if name == "pixel_shuffle":
        return Case(name, lambda x: F.pixel_shuffle(x, 2), [T((N, 4 * C, H, W))])
    if name == "cosine_similarity":
        return Case(name, lambda a, b: F.cosine_similarity(a, b, dim=-1), [T((N, C, W)), T((N, C, W))])
    if name == "pdist_like":
        return Case(name, lambda a, b: torch.cdist(a, b), [T((N, C, W)), T((N, H, W))])
    if name == "glu":
        return Case(name, lambda x: F.glu(x, -1), [T((N, C, 2 * W))])
    # embedding-bag-like: gather rows and reduce
    w = T((g.int(1, 7), W))
    idx = torch.randint(0, w.shape[0], (N, 3), generator=g.g)
    return Case(name, lambda i, w: F.embedding(i, w).sum(1), [Input(idx), w])


def gen_factory(g: Gen) -> Case:
    name = g.choice(("zeros", "ones", "full", "arange", "arange_float", "linspace", "eye", "zeros_like",
                     "full_like", "ones_like", "empty", "new_full", "tril_indices", "logspace", "scalar_tensor",
                     "tensor"))
    dt = g.dtype()
    shape = g.shape()
    if name in ("zeros", "ones", "empty"):
        fn = getattr(torch, name)
        return Case(name, lambda dev, fn=fn, s=shape, d=dt: fn(s, dtype=d, device=dev), ["<device>"],
                    compare="meta" if name == "empty" else "close", note=f"{list(shape)} {_dtype_name(dt)}")
    if name == "full":
        v = g.scalar()
        return Case(name, lambda dev, s=shape, v=v, d=dt: torch.full(s, v, dtype=d, device=dev),
                    ["<device>"], note=f"{list(shape)} {v} {_dtype_name(dt)}")
    if name == "arange":
        a, b, s = g.int(-5, 5), g.int(-5, 15), g.choice((1, 2, 3, -1))
        return Case(name, lambda dev, a=a, b=b, s=s: torch.arange(a, b, s, device=dev), ["<device>"],
                    note=f"{a},{b},{s}")
    if name == "arange_float":
        a, b, s = g.choice((0.0, -1.5, 0.25)), g.choice((1.0, 3.7, 5.0)), g.choice((0.1, 0.5, 0.3))
        return Case(name, lambda dev, a=a, b=b, s=s, d=g.dtype(FLOATS): torch.arange(a, b, s, dtype=d, device=dev),
                    ["<device>"], note=f"{a},{b},{s}")
    if name in ("linspace", "logspace"):
        a, b, n = g.choice((0.0, -2.0, 1.0)), g.choice((1.0, 3.0, -1.0)), g.int(0, 9)
        fn = getattr(torch, name)
        d = g.dtype(FLOATS + INTS)
        return Case(name, lambda dev, fn=fn, a=a, b=b, n=n, d=d: fn(a, b, n, dtype=d, device=dev), ["<device>"],
                    note=f"{a},{b},{n} {_dtype_name(d)}")
    if name == "eye":
        n, m = g.int(0, 5), g.int(0, 5)
        return Case(name, lambda dev, n=n, m=m, d=dt: torch.eye(n, m, dtype=d, device=dev), ["<device>"],
                    note=f"{n},{m}")
    if name == "tril_indices":
        r, c, o = g.int(0, 5), g.int(0, 5), g.int(-2, 2)
        return Case(name, lambda dev, r=r, c=c, o=o: torch.tril_indices(r, c, o, device=dev), ["<device>"],
                    note=f"{r},{c},{o}")
    if name == "scalar_tensor":
        v = g.scalar()
        return Case(name, lambda dev, v=v, d=dt: torch.scalar_tensor(v, dtype=d, device=dev), ["<device>"],
                    note=str(v))
    if name == "tensor":
        vals = g.values(shape, dt).tolist()
        return Case(name, lambda dev, v=vals, d=dt: torch.tensor(v, dtype=d, device=dev), ["<device>"])
    x = g.tensor(shape, dt)
    if name == "zeros_like":
        return Case(name, torch.zeros_like, [x])
    if name == "ones_like":
        return Case(name, lambda t: torch.ones_like(t, dtype=torch.float32), [x])
    if name == "new_full":
        v = g.scalar()
        return Case(name, lambda t, v=v: t.new_full((2, 3), v), [x], note=str(v))
    v = g.scalar()
    return Case(name, lambda t, v=v: torch.full_like(t, v), [x], note=str(v))


def gen_overlap(g: Gen) -> Case:
    """In-place writes whose source overlaps the destination."""
    name = g.choice(("add_shifted", "copy_shifted", "mul_self", "add_self_t", "expanded_inplace"))
    dt = g.dtype(FLOATS + INTS)
    n = g.choice((2, 3, 5, 8))
    if name == "add_shifted":
        return Case(name, lambda b: b[1:].add_(b[:-1]), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                    mutates=True)
    if name == "copy_shifted":
        return Case(name, lambda b: b[1:].copy_(b[:-1]), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                    mutates=True)
    if name == "mul_self":
        return Case(name, lambda b: b.mul_(b), [g.tensor((n, 3), dt, writable=True)], mutates=True)
    if name == "add_self_t":
        return Case(name, lambda b: b.add_(b.t()), [g.tensor((n, n), dt, writable=True, layout="contiguous")],
                    mutates=True)
    return Case(name, lambda b: b.expand(3, n).add_(1), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                mutates=True)


COMPLEX_UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
    "neg": torch.neg, "abs": torch.abs, "angle": torch.angle, "sgn": torch.sgn, "reciprocal": torch.reciprocal,
    "conj_physical": torch.conj_physical, "conj": lambda x: x.conj() * 1, "real": lambda x: x.real * 1,
    "imag": lambda x: x.imag * 1, "isnan": torch.isnan, "view_as_real": lambda x: torch.view_as_real(x) + 0,
}
COMPLEX_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "eq": torch.eq, "ne": torch.ne,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=0.5 - 2j), "pow": lambda a, b: torch.pow(a, 2),
}


def gen_complex(g: Gen) -> Case:
    """complex64 (and complex128) tensors: elementwise math, promotion with real operands, reductions, products,
    views as real numbers and back (written through), conjugate views, concatenation and indexing."""
    dt = torch.complex64 if g.chance(0.85) else torch.complex128
    kind = g.choice(("unary", "unary", "binary", "binary", "reduce", "matmul", "view", "movement", "polar"))
    shape = g.shape(nonempty=g.chance(0.8))
    if kind == "unary":
        name = g.choice(sorted(COMPLEX_UNARY))
        return Case("complex." + name, lambda x, f=COMPLEX_UNARY[name]: f(x), [g.tensor(shape, dt)])
    if kind == "binary":
        name = g.choice(sorted(COMPLEX_BINARY))
        odt = g.choice((dt, dt, torch.float32, torch.int64))
        b = g.tensor(g.broadcastable(shape), odt)
        if g.chance(0.2):
            return Case("complex." + name + "_scalar", lambda a, f=COMPLEX_BINARY[name]: f(a, 1.5 - 0.5j),
                        [g.tensor(shape, dt)])
        return Case("complex." + name, lambda a, b, f=COMPLEX_BINARY[name]: f(a, b), [g.tensor(shape, dt), b],
                    note=_dtype_name(odt))
    if kind == "reduce":
        name = g.choice(("sum", "mean", "prod"))
        dim = g.int(0, len(shape) - 1) if shape and g.chance(0.7) else None
        if dim is None:
            return Case("complex." + name, lambda x, n=name: getattr(torch, n)(x), [g.tensor(shape, dt)])
        return Case(f"complex.{name}.dim", lambda x, n=name, d=dim: getattr(torch, n)(x, d), [g.tensor(shape, dt)])
    if kind == "matmul":
        m, k, n = g.int(1, 5), g.int(1, 6), g.int(1, 5)
        conj = g.chance(0.3)
        return Case("complex.mm" + (".conj" if conj else ""),
                    lambda a, b, c=conj: (a.conj() if c else a) @ b, [g.tensor((m, k), dt), g.tensor((k, n), dt)])
    if kind == "view":
        # a float tensor viewed as complex, changed through the view, and the base compared afterwards
        part = torch.float64 if dt == torch.complex128 else torch.float32
        fshape = tuple(shape) + (2,)

        def f(x):
            c = torch.view_as_complex(x)
            c.mul_(0.5 + 1j)
            torch.view_as_real(c)[..., 0].add_(1)
            return c.abs()
        return Case("complex.view_write", f, [g.tensor(fshape, part, writable=True, layout="contiguous")],
                    mutates=True)
    if kind == "movement":
        name = g.choice(("cat", "stack", "index_select", "flip", "where"))
        a, b = g.tensor(shape, dt), g.tensor(shape, dt)
        if name == "cat":
            return Case("complex.cat", lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]), [a, b])
        if name == "stack":
            return Case("complex.stack", lambda a, b: torch.stack([a, b]), [a, b])
        if name == "index_select":
            idx = torch.tensor([0, 0]) if shape and shape[0] else torch.zeros(0, dtype=torch.int64)
            return Case("complex.index_select", lambda a, i=idx: a.index_select(0, i.to(a.device)) if a.dim() else a,
                        [a])
        if name == "flip":
            return Case("complex.flip", lambda a: a.flip(tuple(range(a.dim()))), [a])
        return Case("complex.where", lambda a, b: torch.where(a.real > 0, a, b), [a, b])
    mag = g.tensor(shape, torch.float32, values=lambda s: torch.rand(s, generator=g.g))
    return Case("complex.polar", lambda m, a: torch.polar(m, a), [mag, g.tensor(shape, torch.float32)])

