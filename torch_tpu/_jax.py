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

__all__ = ["jax_op", "custom_jax_kernel", "custom_kernel", "JaxCustomOp", "JaxKernelFunction", "export_stablehlo",
           "stablehlo_text"]

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
        r"""Exports made (one per kernel variant and signature, forward and backward), cache hits, and programs
        dropped beyond ``TORCH_TPU_FOREIGN_PROGRAM_CACHE_SIZE``."""
        ks: List[ForeignKernel] = []
        for k in self._variants.values():
            ks.append(k)
            ks.extend(k._vjps.values())
        return {"exports": sum(k.stats["programs"] for k in ks), "hits": sum(k.stats["hits"] for k in ks),
                "evictions": sum(k.stats["evictions"] for k in ks), "kernels": len(ks)}

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


def jax_op(fn: Union[None, str, Callable] = None, function: Optional[Callable] = None, *, name: Optional[str] = None,
           static_argnums: Sequence[int] = (), donate_argnums: Sequence[int] = ()) -> Any:
    r"""Wraps a JAX function (jax.numpy code, a Pallas ``pallas_call``, ...) as a PyTorch op on tpu.

    Usable as ``jax_op(fn)``, ``@jax_op`` or ``@jax_op(static_argnums=(1,))``. The result takes tensors (and the
    static arguments) and returns tensors; it works in eager mode, inside ``torch.compile`` (one node of the graph,
    lowered into its program: no graph break, no extra launch) and under autograd (through ``jax.vjp``), and on
    CPU tensors (the function runs with JAX on the host).

    TorchTPU's forms name the op first: ``jax_op("ns::name", fn)`` and ``@jax_op("ns::name")`` return a
    :class:`JaxCustomOp`, a PyTorch custom op ``torch.ops.ns.name`` (defined at its first call, when the argument
    types are known) that takes ``register_autograd`` / ``register_fake`` like ``torch.library.custom_op``.

    ``donate_argnums`` is accepted for code written for other TPU backends and has no effect: PyTorch tensors
    stay valid after the call (``custom_jax_kernel(..., input_output_aliases=...)`` writes results into inputs).
    """
    if isinstance(fn, str):
        qualname = fn

        def wrap_named(f: Callable) -> "JaxCustomOp":
            return JaxCustomOp(qualname, f, static_argnums=static_argnums, donate_argnums=donate_argnums)

        return wrap_named(function) if function is not None else wrap_named
    if function is not None:
        raise TypeError("jax_op(fn, function): the second positional argument is only for jax_op('ns::name', fn)")

    def wrap(f: Callable) -> JaxKernelFunction:
        return JaxKernelFunction(f, name=name, static_argnums=static_argnums, donate_argnums=donate_argnums)

    return wrap(fn) if fn is not None else wrap


def custom_jax_kernel(fn: Optional[Callable] = None, name: Optional[str] = None, static_argnums: Sequence[int] = (),
                      donate_argnums: Sequence[int] = (), input_output_aliases: Optional[Dict[int, int]] = None,
                      **jit_kwargs: Any) -> Any:
    r"""The name TorchTPU kernel libraries use for :func:`jax_op` (same arguments, same behaviour), plus
    ``input_output_aliases={input_index: output_index}``: those results are written into those input tensors
    (in place, like a donated buffer in JAX), and the call returns the input tensors in their place.

    Other ``jax.jit`` options are refused with TypeError (the export decides them here)."""
    if jit_kwargs:
        raise TypeError(f"custom_jax_kernel: unsupported jax.jit option(s) {sorted(jit_kwargs)}; supported: name, "
                        "static_argnums, donate_argnums, input_output_aliases")

    def wrap(f: Callable) -> Any:
        k = jax_op(f, name=name, static_argnums=static_argnums, donate_argnums=donate_argnums)
        return _AliasingKernel(k, input_output_aliases) if input_output_aliases else k

    return wrap(fn) if fn is not None else wrap


class _AliasingKernel:
    r"""A JAX kernel whose results ``aliases[i]`` are written into its input ``i`` (see :func:`custom_jax_kernel`)."""

    def __init__(self, kernel: JaxKernelFunction, aliases: Dict[int, int]) -> None:
        self.kernel = kernel
        self.aliases = {int(i): int(o) for i, o in dict(aliases).items()}
        if len(set(self.aliases.values())) != len(self.aliases):
            raise ValueError(f"input_output_aliases maps two inputs to one output: {aliases}")
        for i in self.aliases:
            if i in kernel.static_argnums:
                raise ValueError(f"input_output_aliases: input {i} is a static argument, not a tensor")
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__

    def __call__(self, *args: Any) -> Any:
        out = self.kernel(*args)
        single = isinstance(out, torch.Tensor)
        outs = [out] if single else list(out)
        for i, o in self.aliases.items():
            if i >= len(args) or not isinstance(args[i], torch.Tensor):
                raise ValueError(f"input_output_aliases: input {i} of '{self.__name__}' is not a tensor argument")
            if o >= len(outs):
                raise ValueError(f"input_output_aliases: '{self.__name__}' has {len(outs)} output(s), not {o + 1}")
            src, dst = outs[o], args[i]
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(
                    f"input_output_aliases: output {o} ({src.dtype}{list(src.shape)}) of '{self.__name__}' cannot "
                    f"alias input {i} ({dst.dtype}{list(dst.shape)}): shapes and dtypes must match"
                )
            dst.copy_(src)
            outs[o] = dst
        if single:
            return outs[0]
        return list(outs) if isinstance(out, list) else tuple(outs)

    def __repr__(self) -> str:
        return f"<JAX kernel {self.__name__} with input_output_aliases {self.aliases}>"


_SCHEMA_TYPES = ((bool, "bool"), (int, "SymInt"), (float, "float"), (str, "str"))


class JaxCustomOp:
    r"""TorchTPU's ``jax_op("ns::name", fn)``: a JAX function as the PyTorch custom op ``torch.ops.ns.name``.

    The op is defined (``torch.library.custom_op`` with an explicit schema) at its first call, from the argument
    types then (tensors; static arguments by their Python type) and the function's outputs (one tensor, a tuple or
    a list). :meth:`register_autograd` and :meth:`register_fake` take ``torch.library``'s arguments and may be
    called before or after that. Without a registered backward, gradients come from the function's VJP
    (``jax.vjp``, through :func:`jax_op`'s own autograd); without a registered fake, shapes come from the export.
    The implementation is the :func:`jax_op` kernel, so the op runs eagerly, lowers into ``torch.compile``
    graphs and runs on CPU tensors through JAX.
    """

    def __init__(self, qualname: str, fn: Callable, static_argnums: Sequence[int] = (),
                 donate_argnums: Sequence[int] = ()) -> None:
        ns, sep, opname = qualname.partition("::")
        if not sep or not ns.isidentifier() or not opname.isidentifier():
            raise ValueError(f"jax_op: the op name must look like 'namespace::name', got {qualname!r}")
        self.qualname = qualname
        self.kernel = JaxKernelFunction(fn, name=f"{ns}.{opname}", static_argnums=static_argnums,
                                        donate_argnums=donate_argnums)
        self.__name__ = opname
        self.__doc__ = getattr(fn, "__doc__", None)
        self._op: Any = None
        self._fake: Optional[Callable] = None
        self._autograd: Optional[Tuple[Callable, Optional[Callable]]] = None
        self._lock = threading.Lock()

    # -- torch.library-style registrations --------------------------------------------------------------------
    def register_fake(self, fn: Callable) -> Callable:
        r"""The op's shape function for fake tensors (``torch.library.register_fake``)."""
        self._fake = fn
        if self._op is not None:
            self._op.register_fake(fn)
        return fn

    def register_autograd(self, backward: Callable, *, setup_context: Optional[Callable] = None) -> None:
        r"""The op's backward formula (``torch.library.register_autograd``'s arguments)."""
        self._autograd = (backward, setup_context)
        if self._op is not None:
            self._op.register_autograd(backward, setup_context=setup_context)

    # -- definition ---------------------------------------------------------------------------------------------
    def _schema(self, args: Tuple[Any, ...]) -> str:
        params = []
        tensors = []
        statics = []
        for i, a in enumerate(args):
            if i in self.kernel.static_argnums:
                t = next((s for py, s in _SCHEMA_TYPES if isinstance(a, py)), None)
                if t is None:
                    raise TypeError(f"jax_op '{self.qualname}': static argument {i} is a {type(a).__name__}; "
                                    "custom ops take bool, int, float or str")
                params.append(f"{t} a{i}")
                statics.append(a)
            elif isinstance(a, torch.Tensor):
                params.append(f"Tensor a{i}")
                tensors.append(a)
            else:
                raise TypeError(f"jax_op '{self.qualname}': argument {i} is a {type(a).__name__}, not a tensor "
                                "(list it in static_argnums)")
        name = _variant_name(self.kernel, tuple(statics))
        prog = _foreign.kernel(name).program(signature_of(tensors))
        kind = self.kernel._out_kinds.get(name, "tuple")
        n = len(prog.outputs)
        if kind == "single":
            ret = "Tensor"
        elif kind == "list":
            ret = "Tensor[]"
        else:
            ret = "(" + ", ".join(["Tensor"] * n) + ")"
        return f"({', '.join(params)}) -> {ret}"

    def _define(self, args: Tuple[Any, ...]) -> Any:
        with self._lock:
            if self._op is not None:
                return self._op
            schema = self._schema(args)
            op = torch.library.custom_op(self.qualname, self.kernel, mutates_args=(), schema=schema)
            op.register_fake(self._fake if self._fake is not None else self.kernel)
            if self._autograd is not None:
                op.register_autograd(self._autograd[0], setup_context=self._autograd[1])
            else:
                op.register_autograd(self._vjp_backward, setup_context=self._vjp_setup)
            self._op = op
            return op

    def _vjp_setup(self, ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        ctx.inputs = inputs

    def _vjp_backward(self, ctx: Any, *grads: Any) -> Tuple[Any, ...]:
        inputs = ctx.inputs
        with torch.enable_grad():
            xs = [a.detach().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
                  for a in inputs]
            out = self.kernel(*xs)
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            if len(grads) == 1 and isinstance(grads[0], (list, tuple)):
                grads = tuple(grads[0])
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
            wrt = [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]
            got = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True) \
                if pairs and wrt else [None] * len(wrt)
        it = iter(got)
        return tuple(next(it) if isinstance(x, torch.Tensor) and x.requires_grad else None for x in xs)

    @property
    def op(self) -> Any:
        r"""The ``torch.library`` custom op (None before the first call)."""
        return self._op

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"jax_op '{self.qualname}' takes positional arguments only")
        op = self._op if self._op is not None else self._define(args)
        return op(*args)

    def __repr__(self) -> str:
        return f"<jax_op {self.qualname}>"


def custom_kernel(propagate: Callable[..., Any], pallas_kernel: Optional[Callable] = None, **pl_kwargs: Any) -> Any:
    r"""TorchTPU's Pallas decorator: ``@custom_kernel(lambda x, y: torch.empty_like(x))`` over a Pallas kernel body
    (``def add(x_ref, y_ref, o_ref): ...``) gives a function of tensors. ``propagate`` returns the output tensors'
    shapes and dtypes (tensors, e.g. ``empty_like``); ``pl_kwargs`` go to ``pl.pallas_call`` (``grid``,
    ``in_specs``, ``interpret=True`` off TPU ...). Each output signature is one :func:`jax_op` kernel."""

    def decorator(body: Callable) -> Callable[..., Any]:
        kernels: Dict[Any, JaxKernelFunction] = {}
        lock = threading.Lock()
        base = str(pl_kwargs.get("name", getattr(body, "__name__", "pallas_kernel")))

        @functools.wraps(body)
        def call(*args: Any) -> Any:
            out = propagate(*args)
            single = isinstance(out, torch.Tensor)
            outs = [out] if single else list(out)
            key = tuple((o.dtype, tuple(o.shape)) for o in outs)
            with lock:
                k = kernels.get(key)
                if k is None:
                    jax = _import_jax()
                    from jax.experimental import pallas as pl

                    shapes = [jax.ShapeDtypeStruct(shape, _jax_dtype(dt)) for dt, shape in key]
                    call_fn = pl.pallas_call(body, out_shape=shapes[0] if single else tuple(shapes), **pl_kwargs)

                    def fn(*xs: Any) -> Any:
                        return call_fn(*xs)

                    fn.__name__ = base
                    k = kernels[key] = JaxKernelFunction(fn, name=base, kind="Pallas kernel")
            return k(*args)

        return call

    return decorator(pallas_kernel) if pallas_kernel is not None else decorator


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
