"""JAX functions (Pallas kernels included) as PyTorch ops on tpu: :func:`jax_op` and :func:`custom_jax_kernel`.

A wrapped function is exported with ``jax.export`` once per input signature (dtypes and shapes) for the
platform of the PJRT plugin in use (``cpu``, ``cuda`` or ``tpu``), its StableHLO checked against the version the
plugin parses and compiled once by the plugin (so an op the plugin lacks is a clear error at the first call), and
registered as a program of ``tpu::stablehlo_call`` (:mod:`torch_tpu._foreign`). Calls then run like any other op:
one program per call in eager mode, part of the graph's one program under ``torch.compile`` (no graph break).

Backward: the function's VJP (``jax.vjp``) is exported the same way, on first use, per signature. Pallas kernels
need a ``jax.custom_vjp`` for that, as in JAX itself. On CPU tensors the function runs with JAX on the host.

jax is optional (``pip install torch-tpu[jax]``); it is imported on the first call, never by ``import torch_tpu``.
On the CPU plugin, Pallas kernels must be written with ``interpret=True`` (Mosaic needs a TPU).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _C, _foreign
from ._foreign import ForeignKernel, Program, Signature, format_signature, signature_of

__all__ = ["jax_op", "custom_jax_kernel", "JaxKernelFunction", "export_stablehlo", "stablehlo_text"]

_JAX_VERSION_HINT = "pip install 'torch-tpu[jax]' (jax==0.10.2 jaxlib==0.10.2)"


# ---------------------------------------------------------------------------------------------------------------
# jax, imported on demand


_jax_mod: Any = None
_jax_lock = threading.Lock()


def keep_jax_off_the_accelerator(plugin_kind: Optional[str]) -> None:
    r"""Called by ``import torch_tpu``: when the plugin drives a TPU or a GPU, a jax imported later in this
    process (by the bridge, or by code inductor generates) uses its CPU backend unless ``JAX_PLATFORMS`` says
    otherwise. A jax on the same TPU cannot open it (libtpu is one process's), and one on the same GPU would
    preallocate most of its memory. Exporting for the accelerator's platform needs no device of it."""
    if plugin_kind in ("tpu", "cuda") and "jax" not in sys.modules and "JAX_PLATFORMS" not in os.environ:
        os.environ["JAX_PLATFORMS"] = "cpu"


def _import_jax() -> Any:
    r"""Imports jax for the bridge: CPU backend only (jax must not claim the accelerator our plugin drives)."""
    global _jax_mod
    if _jax_mod is not None:
        return _jax_mod
    with _jax_lock:
        if _jax_mod is not None:
            return _jax_mod
        if "jax" not in sys.modules and "JAX_PLATFORMS" not in os.environ:
            # jax would otherwise initialize libtpu (or CUDA) next to our plugin. Exporting for another platform
            # needs no device of that platform.
            os.environ["JAX_PLATFORMS"] = "cpu"
        try:
            import jax
            import jax.export  # noqa: F401
        except ImportError as e:
            raise ImportError(f"torch_tpu: JAX kernels need jax, which is not installed ({e}). Install it with: "
                              f"{_JAX_VERSION_HINT}") from e
        _jax_mod = jax
        return jax


def _mlir() -> Tuple[Any, Any]:
    r"""(make_ir_context, jaxlib's _jax.mlir): the parts of jaxlib used to re-read and re-print exported modules."""
    try:
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib import _jax
    except ImportError as e:  # pragma: no cover - another jax layout
        raise ImportError(f"torch_tpu: this jax does not expose the MLIR tools the bridge uses ({e}); "
                          f"{_JAX_VERSION_HINT}") from e
    return jmlir.make_ir_context, _jax.mlir


def _jax_dtype(dt: torch.dtype) -> Any:
    jnp = _import_jax().numpy
    table = {
        torch.float32: jnp.float32, torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16,
        torch.float64: jnp.float64, torch.int8: jnp.int8, torch.int16: jnp.int16, torch.int32: jnp.int32,
        torch.int64: jnp.int64, torch.uint8: jnp.uint8, torch.bool: jnp.bool_,
    }
    if dt not in table:
        raise TypeError(f"torch_tpu: JAX kernels do not take {dt} tensors")
    return table[dt]


def _needs_x64(sig: Signature) -> bool:
    return any(d in (torch.int64, torch.float64) for d, _ in sig)


def platform() -> str:
    r"""The jax.export platform of the PJRT plugin in use: "cpu", "cuda" or "tpu"."""
    name = str(_C._plugin_info().get("platform_name", "cpu")).lower()
    if name in ("cuda", "gpu"):
        return "cuda"
    if name == "rocm":
        return "rocm"
    return "tpu" if name == "tpu" else "cpu"


def plugin_stablehlo_version() -> Optional[str]:
    attrs = _C._plugin_info().get("attributes", {}) or {}
    return attrs.get("stablehlo_current_version")


def _version_tuple(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3])


def stablehlo_text(serialized: bytes, target_version: Optional[str] = None) -> str:
    r"""StableHLO text (generic op syntax, no locations) of a serialized module (a portable artifact, e.g.
    ``Exported.mlir_module_serialized``), after checking that it can be expressed at `target_version` (default:
    what the plugin parses): a module needing newer StableHLO raises instead of failing inside the plugin."""
    _import_jax()
    make_ctx, jm = _mlir()
    from jaxlib.mlir.dialects import stablehlo as _sh

    target = target_version or plugin_stablehlo_version()
    if target is not None and _version_tuple(target) > _version_tuple(_sh.get_current_version()):
        target = _sh.get_current_version()  # a plugin newer than jaxlib reads what jaxlib writes
    with make_ctx():
        module = jm.deserialize_portable_artifact(serialized)
        if target is not None:
            try:
                jm.serialize_portable_artifact(module, target)
            except Exception as e:  # noqa: BLE001 - jaxlib raises a bare exception type here
                raise RuntimeError(
                    f"torch_tpu: the exported program needs StableHLO features newer than version {target}, the "
                    f"newest the PJRT plugin parses (jaxlib writes {_sh.get_current_version()}): {e}") from e
        return module.operation.get_asm(enable_debug_info=False, print_generic_op_form=True)


def export_stablehlo(fn: Callable, sig: Signature, platform_name: Optional[str] = None) -> Tuple[Any, str]:
    r"""(jax.export.Exported, StableHLO text) of `fn` for argument types `sig`."""
    jax = _import_jax()
    plat = platform_name or platform()
    avals = [jax.ShapeDtypeStruct(shape, _jax_dtype(dt)) for dt, shape in sig]
    try:
        with jax.enable_x64(_needs_x64(sig)):
            exp = jax.export.export(jax.jit(fn, keep_unused=True), platforms=[plat])(*avals)
    except Exception as e:  # noqa: BLE001 - jax raises many types; say which function failed
        hint = ""
        if "interpret mode" in str(e).lower():
            hint = " (on this plugin, write Pallas kernels with pallas_call(..., interpret=True))"
        raise RuntimeError(f"torch_tpu: exporting {getattr(fn, '__name__', fn)!r} for {format_signature(sig)} "
                           f"on platform {plat!r} failed{hint}: {type(e).__name__}: {e}") from e
    if exp.ordered_effects or exp.unordered_effects:
        raise RuntimeError(f"torch_tpu: {getattr(fn, '__name__', fn)!r} has side effects "
                           f"({exp.ordered_effects + exp.unordered_effects}); JAX kernels must be pure functions")
    return exp, stablehlo_text(exp.mlir_module_serialized)


# ---------------------------------------------------------------------------------------------------------------
# Kernels


class _JaxKernel(ForeignKernel):
    r"""A JAX function with fixed static arguments: programs made by jax.export per signature."""

    kind = "JAX kernel"

    def __init__(self, fn: Callable, display_name: str, kind: Optional[str] = None) -> None:
        super().__init__(_foreign.new_name(display_name), display_name)
        self.fn = fn
        if kind:
            self.kind = kind
        self._vjps: Dict[int, ForeignKernel] = {}  # by number of arguments

    def make_program(self, sig: Signature) -> Program:
        exp, text = export_stablehlo(self.fn, sig)
        jax = _import_jax()
        leaves = exp.out_tree.num_leaves
        if exp.out_tree == jax.tree_util.tree_structure(0):
            out_kind = "single"
        elif exp.out_tree == jax.tree_util.tree_structure(tuple(range(leaves))):
            out_kind = "tuple"
        elif exp.out_tree == jax.tree_util.tree_structure(list(range(leaves))):
            out_kind = "list"
        else:
            raise TypeError(f"torch_tpu: {self.kind} '{self.display_name}' returns {exp.out_tree}; return an array "
                            f"or a flat tuple/list of arrays")
        prog = self.add_program(text, sig)
        want = [(_torch_dtype(a.dtype), tuple(a.shape)) for a in exp.out_avals]
        if list(prog.outputs) != want:
            raise RuntimeError(f"torch_tpu: {self.kind} '{self.display_name}': program results {prog.outputs} differ "
                               f"from the export's {want}")
        cb = getattr(self, "on_export", None)
        if cb is not None:
            cb(out_kind)
        return prog

    def run_cpu(self, args: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        jax = _import_jax()
        sig = signature_of(args)
        with jax.enable_x64(_needs_x64(sig)):
            xs = [jax.dlpack.from_dlpack(a.detach().contiguous()) for a in args]
            outs = jax.jit(self.fn)(*xs)
        leaves = jax.tree_util.tree_leaves(outs)
        return [torch.from_dlpack(o) for o in leaves]

    def vjp_kernel(self, num_args: int) -> ForeignKernel:
        with self._lock:
            k = self._vjps.get(num_args)
            if k is None:
                k = _foreign.register_kernel(
                    _JaxKernel(_make_vjp(self.fn, num_args), self.display_name + ".vjp", kind=self.kind + " backward"))
                self._vjps[num_args] = k
            return k


def _torch_dtype(jdt: Any) -> torch.dtype:
    import numpy as np

    name = np.dtype(jdt).name
    table = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
             "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
             "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool, "uint32": torch.uint32,
             "uint16": torch.uint16, "uint64": torch.uint64}
    if name not in table:
        raise TypeError(f"torch_tpu: JAX kernels cannot return {name} arrays")
    return table[name]


def _is_float(x: Any) -> bool:
    import numpy as np

    jnp = _import_jax().numpy
    return bool(jnp.issubdtype(np.dtype(x.dtype), jnp.floating))


def _make_vjp(fn: Callable, n: int) -> Callable:
    r"""The JAX function computing the input cotangents of `fn` called with `n` arguments: it takes those
    arguments followed by one cotangent per floating-point result, and returns the cotangents of the
    floating-point arguments."""

    def vjp_fn(*xs: Any) -> Tuple[Any, ...]:
        jax = _import_jax()
        primals, cts = xs[:n], xs[n:]
        diff = [i for i, p in enumerate(primals) if _is_float(p)]

        def f_diff(*dp: Any) -> Tuple[Any, ...]:
            full = list(primals)
            for i, v in zip(diff, dp):
                full[i] = v
            outs = jax.tree_util.tree_leaves(fn(*full))
            return tuple(o for o in outs if _is_float(o))

        _, pullback = jax.vjp(f_diff, *[primals[i] for i in diff])
        return tuple(pullback(tuple(cts)))

    vjp_fn.__name__ = getattr(fn, "__name__", "fn") + "_vjp"
    return vjp_fn


# ---------------------------------------------------------------------------------------------------------------
# The callable users get


class JaxKernelFunction:
    r"""A JAX function callable with PyTorch tensors (see :func:`jax_op`).

    Tensor arguments go to the function as arrays of the same dtype and shape; arguments listed in
    ``static_argnums`` are passed as Python values (hashable; each distinct value is its own kernel). Returns a
    tensor, or a tuple/list of tensors, as the function returns arrays.
    """

    def __init__(self, fn: Callable, name: Optional[str] = None, static_argnums: Sequence[int] = (),
                 donate_argnums: Sequence[int] = (), kind: str = "JAX kernel") -> None:
        if not callable(fn):
            raise TypeError(f"torch_tpu: {kind} needs a callable, got {fn!r}")
        self.fn = fn
        self.__name__ = name or getattr(fn, "__name__", "jax_kernel")
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", __name__)
        # What torch.library.custom_op reads to infer a schema when this wraps its implementation.
        self.__globals__ = getattr(fn, "__globals__", {})
        try:
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        self.kind = kind
        self.static_argnums = tuple(sorted(int(i) for i in static_argnums))
        self.donate_argnums = tuple(int(i) for i in donate_argnums)  # accepted; tensors stay valid (see jax_op)
        self._variants: Dict[Tuple[Any, ...], _JaxKernel] = {}
        self._lock = threading.Lock()
        self._out_kinds: Dict[str, str] = {}
        self._default_kernel = self._variant(()).name

    def _variant(self, statics: Tuple[Any, ...]) -> _JaxKernel:
        with self._lock:
            k = self._variants.get(statics)
            if k is None:
                fn = self.fn
                if self.static_argnums:
                    fn = _bind_statics(self.fn, self.static_argnums, statics)
                k = _foreign.register_kernel(_JaxKernel(fn, self.__name__, kind=self.kind))
                k.on_export = functools.partial(self._note_out_kind, k)  # type: ignore[attr-defined]
                self._variants[statics] = k
            return k

    def _note_out_kind(self, k: _JaxKernel, kind: str) -> None:
        prev = self._out_kinds.setdefault(k.name, kind)
        if prev != kind:
            raise TypeError(f"torch_tpu: {self.kind} '{self.__name__}' returns a {kind} for some argument shapes "
                            f"and a {prev} for others")

    def _kernel_name(self, statics: Tuple[Any, ...]) -> str:
        return self._variant(statics).name

    def cache_info(self) -> Dict[str, int]:
        r"""Exports made (one per kernel variant and signature, forward and backward) and cache hits."""
        ks: List[ForeignKernel] = []
        for k in self._variants.values():
            ks.append(k)
            ks.extend(k._vjps.values())
        return {"exports": sum(k.stats["programs"] for k in ks), "hits": sum(k.stats["hits"] for k in ks),
                "kernels": len(ks)}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"torch_tpu: {self.kind} '{self.__name__}' takes positional arguments only")
        tensors = []
        statics = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                statics.append(a)
            elif isinstance(a, torch.Tensor):
                tensors.append(a)
            else:
                raise TypeError(f"torch_tpu: argument {i} of {self.kind} '{self.__name__}' is a "
                                f"{type(a).__name__}, not a tensor (list it in static_argnums)")
        if statics:
            name = _variant_name(self, tuple(statics))
        else:
            name = self._default_kernel
        if not torch.compiler.is_compiling():
            # Eager: export and check now, so a failure is this error rather than a CPU fallback.
            if any(t.device.type not in ("cpu", "meta") for t in tensors):
                _foreign.kernel(name).program(signature_of(tensors))
        outs = torch.ops.tpu.stablehlo_call(tensors, name)
        kind = self._out_kinds.get(name, "tuple")
        if kind == "single":
            return outs[0]
        if kind == "list":
            return list(outs)
        return tuple(outs)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.__name__}>"


def _variant_name(f: JaxKernelFunction, statics: Tuple[Any, ...]) -> str:
    r"""The kernel of `f` for these static arguments. Marked with ``assume_constant_result`` once dynamo is
    imported (marking it here would import dynamo with torch_tpu): dynamo calls it while tracing and puts the
    name in the graph as a constant."""
    return f._kernel_name(statics)


def _mark_constant(dynamo: Any) -> None:
    dynamo.assume_constant_result(_variant_name)


from .api import _when_imported  # noqa: E402

_when_imported("torch._dynamo", _mark_constant, "JAX kernels' static arguments under torch.compile")


def _bind_statics(fn: Callable, positions: Tuple[int, ...], statics: Tuple[Any, ...]) -> Callable:
    def bound(*xs: Any) -> Any:
        args: List[Any] = []
        it = iter(xs)
        si = iter(statics)
        for i in range(len(xs) + len(statics)):
            args.append(next(si) if i in positions else next(it))
        return fn(*args)

    bound.__name__ = getattr(fn, "__name__", "fn")
    return bound


def jax_op(fn: Optional[Callable] = None, *, name: Optional[str] = None, static_argnums: Sequence[int] = (),
           donate_argnums: Sequence[int] = ()) -> Union[JaxKernelFunction, Callable[[Callable], JaxKernelFunction]]:
    r"""Wraps a JAX function (jax.numpy code, a Pallas ``pallas_call``, ...) as a PyTorch op on tpu.

    Usable as ``jax_op(fn)``, ``@jax_op`` or ``@jax_op(static_argnums=(1,))``. The result takes tensors (and the
    static arguments) and returns tensors; it works in eager mode, inside ``torch.compile`` (one node of the graph,
    lowered into its program: no graph break, no extra launch) and under autograd (through ``jax.vjp``), and on
    CPU tensors (the function runs with JAX on the host).

    ``donate_argnums`` is accepted for code written for other TPU backends and has no effect: PyTorch tensors
    stay valid after the call.
    """
    def wrap(f: Callable) -> JaxKernelFunction:
        return JaxKernelFunction(f, name=name, static_argnums=static_argnums, donate_argnums=donate_argnums)

    return wrap(fn) if fn is not None else wrap


def custom_jax_kernel(fn: Optional[Callable] = None, *, name: Optional[str] = None,
                      static_argnums: Sequence[int] = (), donate_argnums: Sequence[int] = ()) -> Any:
    r"""The name TorchTPU kernel libraries use for :func:`jax_op` (same arguments, same behaviour)."""
    return jax_op(fn, name=name, static_argnums=static_argnums, donate_argnums=donate_argnums)


def kernel_op_decompositions() -> Dict[Any, Callable]:
    r"""For the tpu backend: custom ops (``torch.library.custom_op``) whose implementation is a JAX kernel
    (``@torch.library.custom_op(...)`` over ``@custom_jax_kernel``), traced through to their
    ``tpu::stablehlo_call`` so they lower into the graph's program (forward and backward) instead of running
    eagerly."""
    from torch._library.custom_ops import OPDEFS

    out: Dict[Any, Callable] = {}
    for qualname, opdef in list(OPDEFS.items()):
        fn = getattr(opdef, "_init_fn", None)
        if not isinstance(fn, JaxKernelFunction):
            continue
        backends = getattr(opdef, "_backend_fns", {})
        if "tpu" not in backends and None not in backends:
            continue
        op = getattr(opdef, "_opoverload", None)
        if op is None or _C._compile_has_rule(qualname):
            continue
        out[op] = fn
    return out
