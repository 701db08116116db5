"""Foreign kernels: StableHLO programs called from PyTorch through the op ``tpu::stablehlo_call``.

``torch.ops.tpu.stablehlo_call(args, kernel)`` runs the program that the kernel named ``kernel`` has for the
argument types. On tpu tensors it is lowered like any op: the program's functions become private functions of
the eager program (one op = one program) or of the compiled graph, called with ``func.call`` (csrc/stablehlo/
foreign.h); XLA inlines the call, so a kernel inside ``torch.compile`` adds no launch and no graph break.

This module keeps the Python side, free of jax: the kernels by name (:class:`ForeignKernel`), their programs per
input signature, and the op's fake (shape) implementation, CPU implementation and autograd formula, which all
delegate to the kernel. JAX functions (:mod:`torch_tpu._jax`) and inductor's Pallas kernels
(:mod:`torch_tpu._internal.pallas.tpu_torch_pallas`) are kernels of this kind.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import _C

__all__ = ["ForeignKernel", "Program", "register_kernel", "kernel", "signature_of", "MLIR_DTYPES"]

# MLIR element type -> torch dtype (the element types csrc/stablehlo knows).
MLIR_DTYPES: Dict[str, torch.dtype] = {
    "i1": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "ui8": torch.uint8, "ui16": torch.uint16, "ui32": torch.uint32, "ui64": torch.uint64,
    "f16": torch.float16, "f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
    "complex<f32>": torch.complex64, "complex<f64>": torch.complex128,
}

Signature = Tuple[Tuple[torch.dtype, Tuple[int, ...]], ...]


def signature_of(tensors: Sequence[torch.Tensor]) -> Signature:
    r"""(dtype, shape) per tensor: what selects a kernel's program."""
    return tuple((t.dtype, tuple(int(s) for s in t.shape)) for t in tensors)


def format_signature(sig: Signature) -> str:
    return "(" + ", ".join(f"{str(d).replace('torch.', '')}[{','.join(map(str, s))}]" for d, s in sig) + ")"


class Program:
    r"""One registered program of a kernel: its StableHLO text and result types."""

    def __init__(self, text: str, outputs: List[Tuple[torch.dtype, Tuple[int, ...]]], symbol: str,
                 custom_calls: List[str]) -> None:
        self.text = text
        self.outputs = outputs
        self.symbol = symbol
        self.custom_calls = custom_calls


_limit: Optional[int] = None


def _cache_limit() -> int:
    global _limit
    if _limit is None:
        from . import _settings

        _limit = int(_settings.get("TORCH_TPU_FOREIGN_PROGRAM_CACHE_SIZE"))
    return _limit


class ForeignKernel:
    r"""A kernel name for ``tpu::stablehlo_call`` and its programs, one per input signature.

    Subclasses make programs on demand (:meth:`make_program`), run on CPU tensors (:meth:`run_cpu`) and provide
    a backward kernel (:meth:`vjp_kernel`). The base class only holds programs registered with :meth:`add_program`.
    """

    kind = "foreign kernel"

    def __init__(self, name: str, display_name: Optional[str] = None) -> None:
        self.name = name
        self.display_name = display_name or name
        self._programs: "OrderedDict[Signature, Program]" = OrderedDict()
        self._made: set = set()  # signatures whose program make_program made (evictable: it can make them again)
        self._lock = threading.RLock()
        self.stats = {"programs": 0, "hits": 0, "evictions": 0}

    # ---- programs ----
    def add_program(self, text: str, sig: Optional[Signature] = None, validate: bool = True) -> Program:
        r"""Registers StableHLO `text` (its @main) for the signature of its arguments; checks that the plugin
        compiles it when `validate`."""
        info = _C._foreign_register(self.name, text, "main")
        got = tuple((MLIR_DTYPES[d], tuple(s)) for d, s in info["inputs"])
        if sig is not None and got != sig:
            raise RuntimeError(f"torch_tpu: {self.kind} '{self.display_name}': the program takes "
                               f"{format_signature(got)}, the call passes {format_signature(sig)}")
        prog = Program(text, [(MLIR_DTYPES[d], tuple(s)) for d, s in info["outputs"]], info["symbol"],
                       list(info["custom_calls"]))
        if validate:
            self._validate(prog, got)
        with self._lock:
            self._programs[got] = prog
            self.stats["programs"] += 1
        return prog

    def _validate(self, prog: Program, sig: Signature) -> None:
        err = _C._foreign_compile_error(prog.text)
        if err is None:
            return
        plugin = _C._plugin_info()
        msg = (f"torch_tpu: {self.kind} '{self.display_name}' for {format_signature(sig)} cannot be compiled by the "
               f"PJRT plugin ({plugin.get('platform_name')}, {plugin.get('path')}): {err.strip()}")
        if prog.custom_calls:
            msg += (f"\nIts program calls custom_call targets the plugin may not provide: "
                    f"{', '.join(prog.custom_calls)}.")
            if any(t == "tpu_custom_call" for t in prog.custom_calls):
                msg += " tpu_custom_call is a Mosaic (Pallas TPU) kernel: it runs only on a TPU plugin (libtpu)."
        raise RuntimeError(msg)

    def program(self, sig: Signature) -> Program:
        r"""The program for `sig`, made on first use (raises if the kernel cannot make it). Programs made here are a
        least-recently-used cache of ``TORCH_TPU_FOREIGN_PROGRAM_CACHE_SIZE`` per kernel (made again after eviction);
        those registered with :meth:`add_program` directly stay."""
        with self._lock:
            p = self._programs.get(sig)
            if p is not None:
                self.stats["hits"] += 1
                self._programs.move_to_end(sig)
                return p
            p = self.make_program(sig)
            self._programs[sig] = p
            self._made.add(sig)
            limit = _cache_limit()
            if limit > 0 and len(self._made) > limit:
                for old in list(self._programs):
                    if old in self._made and old != sig:
                        dropped = self._programs.pop(old)
                        self._made.discard(old)
                        _C._foreign_unregister(self.name, dropped.text, "main")
                        self.stats["evictions"] += 1
                        break
            return p

    def make_program(self, sig: Signature) -> Program:
        have = ", ".join(format_signature(s) for s in self._programs) or "none"
        raise RuntimeError(f"torch_tpu: {self.kind} '{self.display_name}' has no program for "
                           f"{format_signature(sig)} (registered: {have})")

    # ---- other devices and autograd ----
    def run_cpu(self, args: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        raise NotImplementedError(f"torch_tpu: {self.kind} '{self.display_name}' runs on tpu tensors only")

    def vjp_kernel(self, num_args: int) -> "ForeignKernel":
        r"""The kernel computing the cotangents of the floating-point arguments from the `num_args` arguments and
        one cotangent per floating-point result."""
        raise RuntimeError(f"torch_tpu: {self.kind} '{self.display_name}' has no backward")


_kernels: Dict[str, ForeignKernel] = {}
_kernels_lock = threading.Lock()
_ids = itertools.count()


def new_name(base: str) -> str:
    r"""A kernel name never used before in this process (names identify programs in eager cache keys)."""
    clean = "".join(c if c.isalnum() or c in "._-" else "_" for c in base) or "kernel"
    return f"{clean}#{next(_ids)}"


def register_kernel(k: ForeignKernel) -> ForeignKernel:
    with _kernels_lock:
        if k.name in _kernels and _kernels[k.name] is not k:
            raise ValueError(f"torch_tpu: a foreign kernel named '{k.name}' exists already")
        _kernels[k.name] = k
    return k


def kernel(name: str) -> ForeignKernel:
    k = _kernels.get(name)
    if k is None:
        raise RuntimeError(f"torch_tpu: no foreign kernel named '{name}' (tpu::stablehlo_call)")
    return k


# ---------------------------------------------------------------------------------------------------------------
# tpu::stablehlo_call: fake, CPU and autograd implementations (the tpu one is the C++ lowering)


def _device_of(args: Sequence[torch.Tensor]) -> torch.device:
    if not args:
        raise RuntimeError("torch_tpu: tpu::stablehlo_call needs at least one tensor argument")
    return args[0].device


def _fake(args: List[torch.Tensor], kernel_name: str) -> List[torch.Tensor]:
    prog = kernel(kernel_name).program(signature_of(args))
    dev = _device_of(args)
    return [torch.empty(shape, dtype=dtype, device=dev) for dtype, shape in prog.outputs]


def _cpu(args: List[torch.Tensor], kernel_name: str) -> List[torch.Tensor]:
    return list(kernel(kernel_name).run_cpu(args))


def _setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    args, kernel_name = inputs
    ctx.kernel_name = kernel_name
    ctx.num_args = len(args)
    ctx.diff_in = [i for i, a in enumerate(args) if a.dtype.is_floating_point]
    ctx.out_meta = [(o.dtype, tuple(o.shape)) for o in output]
    ctx.save_for_backward(*args)


def _backward(ctx: Any, grads: List[Optional[torch.Tensor]]) -> Tuple[Any, None]:
    args = list(ctx.saved_tensors)
    if not ctx.diff_in:
        return [None] * ctx.num_args, None
    vjp = kernel(ctx.kernel_name).vjp_kernel(ctx.num_args)
    cts = []
    for (dtype, shape), g in zip(ctx.out_meta, grads):
        if not dtype.is_floating_point:
            continue  # integer results have no cotangent
        cts.append(g if g is not None else torch.zeros(shape, dtype=dtype, device=args[0].device))
    call_args = args + cts
    if not torch.compiler.is_compiling() and not any(t.device.type == "meta" for t in call_args):
        vjp.program(signature_of(call_args))  # export (and check) now: errors surface here, not as a fallback
    res = torch.ops.tpu.stablehlo_call(call_args, vjp.name)
    out: List[Optional[torch.Tensor]] = [None] * ctx.num_args
    for i, r in zip(ctx.diff_in, res):
        out[i] = r
    return out, None


_registered = False


def _register_op() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    qual = "tpu::stablehlo_call"
    torch.library.register_fake(qual)(_fake)
    torch.library.impl(qual, "CPU")(_cpu)
    torch.library.register_autograd(qual, _backward, setup_context=_setup_context)
