"""The dynamo backend "tpu" (:func:`tpu_backend`) and the C++ graph call of inference graphs (:func:`_graph_call`)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from .. import _C
from ._runner import _GraphRunner
from ._collectives import _collectives_in_program_default
from . import _decomp
from ._optim import functionalize_fused_optimizers
from ._partition import _compile_aten_graph


_graph_ids = itertools.count()


def _current_fullgraph() -> bool:
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:
        return False
    if tx is None:
        return False
    return bool(getattr(tx, "one_graph", False) or getattr(tx, "error_on_graph_break", False))


def tpu_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Optional[Dict[str, Any]] = None,
                **kwargs: Any) -> Callable:
    r"""The dynamo backend "tpu": AOTAutograd (core ATen, functionalized) + one XLA program per graph.

    ``options`` (``torch.compile(..., options={...})``): ``fallback`` (default True: ops without a rule run
    eagerly; False makes them an error, as ``fullgraph=True`` does); ``collectives_in_program`` (default True,
    unless ``TORCH_TPU_COLLECTIVES_IN_PROGRAM=0``: functional collectives of XLA-transport groups are compiled into
    the graph's program; False splits the graph at them); ``graph_call`` (default True: inference graphs that
    AOTAutograd's runtime wrappers would pass through unchanged are called from C++, see :func:`_graph_call`).
    """
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    opts = dict(options or {})
    opts.update(kwargs)
    fullgraph = _current_fullgraph() or not opts.get("fallback", True)
    in_program = bool(opts.get("collectives_in_program", _collectives_in_program_default()))
    gid = next(_graph_ids)

    inference: Dict[str, Any] = {}  # what the inference compiler saw (for the graph call, see _graph_call)

    def compiler(kind: str) -> Callable:
        def fn(g: torch.fx.GraphModule, ex: Sequence[Any]) -> Callable:
            compiled = _compile_aten_graph(g, ex, f"g{gid}.{kind}", fullgraph, inference=kind == "inference",
                                           collectives_in_program=in_program)
            if kind == "inference":
                ctx = torch._guards.TracingContext.try_get()
                inference.update(runner=compiled, num_inputs=sum(1 for n in g.graph.nodes if n.op == "placeholder"),
                                 meta=getattr(ctx, "fw_metadata", None) if ctx is not None else None)
            return compiled

        return fn

    if _decomp._decomp_cache is None:  # shared with _decomp._inline_flex_attention
        _decomp._decomp_cache = _decomp._decompositions()
    decompositions = _decomp._decomp_cache
    # Custom ops implemented by a JAX kernel (torch_tpu._jax): traced through to tpu::stablehlo_call.
    from .._jax import kernel_op_decompositions

    kernel_ops = kernel_op_decompositions()
    late = _decomp.late_decompositions()
    if kernel_ops or late:
        decompositions = {**_decomp._decomp_cache, **late, **kernel_ops}
    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decompositions,
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )
    functionalize_fused_optimizers(gm)
    compiled = backend(gm, example_inputs)
    call = _graph_call(compiled, inference, gm, example_inputs) if opts.get("graph_call", True) else None
    return call if call is not None else compiled


def _graph_call(compiled: Callable, inference: Dict[str, Any], gm: torch.fx.GraphModule,
                example_inputs: Sequence[Any]) -> Optional[Callable]:
    """The C++ graph call (``_C._GraphCall``) that replaces AOTAutograd's runtime wrappers for an inference graph
    whose wrappers would pass every call through unchanged, else None.

    AOTAutograd wraps the backend's compiled graph in Python that, per call, reorders and regenerates what the graph
    could not return itself: outputs that alias inputs or intermediates (views), input mutations applied outside the
    graph, subclass wrapping, effect tokens, deduplicated or aliased inputs, grad-mode changes. A graph with none of
    that (most inference graphs: fresh outputs, in-graph mutations such as a static KV cache's) needs only the launch:
    the graph call takes Dynamo's tensors straight to the program and returns its outputs, and falls back to the
    wrapped path for any call it does not serve (a new input signature, whose program that path builds; CPU
    tensors). Dynamo's guards (grad mode, requires_grad, sizes, dtypes, devices, aliasing) keep every call that reaches
    it an inference call of the same kind. ``options={"graph_call": False}`` keeps the wrappers.
    """
    runner = inference.get("runner")
    meta = inference.get("meta")
    if not isinstance(runner, _GraphRunner) or meta is None or runner.cg is None:
        return None
    if runner.constants or runner._dropped or runner.const_outputs or runner._instead is not None:
        return None
    try:
        plain = (meta.num_mutated_inp_runtime_indices == 0 and meta.num_outputs_aliased == 0
                 and meta.num_intermediate_bases == 0 and not meta.dynamic_outputs
                 and meta.grad_enabled_mutation is None and not meta.tokens and not meta.is_rng_op_functionalized
                 and not getattr(meta, "unsafe_view_out_indices", None)
                 and all(isinstance(m, int) or type(m).__name__ == "PlainTensorMeta" for m in meta.subclass_inp_meta))
        bump = [int(i) for i in meta.mutated_graph_handled_indices_seen_by_autograd]
    except AttributeError:  # another torch's metadata: keep its wrappers
        return None
    if not plain or inference.get("num_inputs") != len(example_inputs):
        return None
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        return None  # AOTAutograd passes lifted parameters first
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if not all(isinstance(x, torch.Tensor) and not is_traceable_wrapper_subclass(x) for x in example_inputs):
        return None
    outs: List[Any] = []
    for n in gm.graph.find_nodes(op="output"):
        torch.fx.node.map_arg(n.args, lambda a: outs.append(a.meta.get("val")))
    if any(isinstance(v, torch.Tensor) and is_traceable_wrapper_subclass(v) for v in outs):
        return None
    if bump:
        # A mutated input that shares its storage with another input is AOTAutograd's synthetic-base case.
        mutated = {i for i, info in enumerate(meta.input_info) if info.mutates_data or info.mutates_metadata}
        storages = [x.untyped_storage()._cdata for x in example_inputs]
        if any(storages.count(storages[i]) > 1 for i in mutated):
            return None
    return _C._GraphCall(runner.cg, compiled, bump)
