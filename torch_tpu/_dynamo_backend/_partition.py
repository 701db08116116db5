"""An ATen graph to what runs it: one program (:class:`_GraphRunner`), one program per concrete input signature
(graphs with symbolic sizes), compiled partitions with eager fallbacks between them, or the eager graph."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .. import _C
from ._stats import _py_stats
from ._args import UnsupportedGraph, _is_symbolic, _op_name
from ._regions import _inline_control_deps, _inline_regions, _node_supported, _prepare_regions, _region_kind
from ._describe import _make_graph
from ._runner import _GraphRunner, _SubgraphModule, _unboxed
from ._collectives import _base_collective, _collectives_inside, _is_collective, _is_stream_op
from ._decomp import _inline_flex_attention

log = logging.getLogger("torch_tpu")


def _graph_device(gm: torch.fx.GraphModule) -> torch.device:
    """The tpu device a graph's program runs on: its first tpu input's (else the current device)."""
    for n in gm.graph.nodes:
        v = n.meta.get("val", None) if n.op == "placeholder" else None
        if isinstance(v, torch.Tensor) and v.device.type == "tpu":
            return torch.device("tpu", v.device.index if v.device.index is not None else torch.tpu.current_device())
    return torch.device("tpu", torch.tpu.current_device())


def _made_elsewhere(node: torch.fx.Node, dev: torch.device) -> Optional[str]:
    """Why a node runs eagerly because its result is asked for on another device than the graph's (another chip,
    meta: full_like(x, 1, device="tpu:1")), else None. Results on the cpu are graph outputs copied to the host."""
    if node.op != "call_function":
        return None
    v = node.meta.get("val", None)
    for t in (v if isinstance(v, (list, tuple)) else [v]):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            d = t.device
            if d.type == "tpu" and d.index is None:
                d = torch.device("tpu", torch.tpu.current_device())
            if d != dev:
                name = _op_name(node.target) or str(node.target)
                return _C._no_lowering(name, f"its result is on {t.device}, the graph runs on {dev}")
    return None


def _fail_message(name: str, bad: Dict[torch.fx.Node, str]) -> str:
    # Each message is the lowering layer's "no lowering for <op> (<reason>)".
    return f"torch_tpu: graph {name} cannot be one program (fullgraph=True): " + "; ".join(sorted(set(bad.values())))


# Specialisations kept per dynamic graph (least recently used first out; their programs stay in the executable caches).
_MAX_SPECIALIZATIONS = 64


def _is_dynamic(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph has symbolic sizes (``dynamic=True``, or automatic dynamic shapes after a recompile)."""
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        if _is_symbolic(n.meta.get("val", None)):
            return True
    return False


def _global_state_key() -> Tuple:
    """torch's settings a traced graph's result types and program depend on (the C++ caches key on the same,
    core/global_state.h): a specialisation traced under one default dtype, deterministic mode, matmul precision or
    autocast state never serves another."""
    return (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_float32_matmul_precision(),
            torch.is_autocast_enabled("tpu"), torch.get_autocast_dtype("tpu"))


def _input_key(x: Any) -> Tuple:
    if isinstance(x, torch.Tensor):
        return ("T", x.dtype, x.device, tuple(x.shape), tuple(x.stride()), x.storage_offset())
    return ("V", type(x).__name__, x)


class _ShapeSpecializedGraph:
    """A graph with symbolic sizes, run as one program per distinct concrete input signature.

    XLA programs have static shapes, so a graph traced with ``dynamic=True`` (or marked dynamic by dynamo after a
    shape change) is specialised when it first meets a new input signature (tensor sizes and strides, the values
    of its integer inputs): it is re-traced with those inputs as fake tensors, which turns every ``sym_size`` /
    ``sym_sum`` / symbolic arithmetic node into a constant, and the resulting static graph is compiled as any other
    (and cached in process and on disk). Dynamo itself does not recompile: the symbolic graph stays one guard set.
    Each new specialisation is logged at INFO on the ``torch_tpu`` logger and counted in
    ``compile_stats()["shape_specializations"]``.
    """

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, name: str, fullgraph: bool, inference: bool,
                 collectives_in_program: bool = True) -> None:
        from collections import OrderedDict

        self.gm = gm
        self.name = name
        self.fullgraph = fullgraph
        self.collectives_in_program = collectives_in_program
        self.inference = inference
        self._boxed_call = True
        self.specs: "OrderedDict[Tuple, Callable]" = OrderedDict()
        self.count = 0

    def _specialize(self, inputs: List[Any]) -> Callable:
        from torch.fx.experimental.proxy_tensor import make_fx

        tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        others = {i: x for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        for i, x in others.items():
            if x is not None and not isinstance(x, (bool, int, float)):
                raise RuntimeError(f"torch_tpu: graph {self.name}: cannot specialise on input {i} of type "
                                   f"{type(x).__name__}")
        n = len(inputs)
        gm = self.gm

        def static(*tensors: torch.Tensor) -> Any:
            full: List[Any] = [None] * n
            for i, t in zip(tensor_pos, tensors):
                full[i] = t
            for i, x in others.items():
                full[i] = x
            return gm(*full)

        self.count += 1
        sname = f"{self.name}.s{self.count}"
        shapes = ", ".join(f"{tuple(inputs[i].shape)}" for i in tensor_pos[:6]) + (", ..." if len(tensor_pos) > 6
                                                                                      else "")
        log.info("torch_tpu: graph %s has symbolic sizes: specialising it as %s for inputs %s%s", self.name, sname,
                 shapes, f" and integers {sorted(others.values(), key=str)}" if others else "")
        _py_stats["shape_specializations"] += 1
        with torch.no_grad():
            sgm = make_fx(static, tracing_mode="fake", _allow_non_fake_inputs=False)(
                *[inputs[i] for i in tensor_pos])
        sgm.graph.eliminate_dead_code()
        sgm.recompile()
        tensors_ex = [inputs[i] for i in tensor_pos]
        # specialise=False: sizes that stay symbolic (data-dependent ones, e.g. after nonzero) take the static path's
        # handling of them (partitions or eager, or the fullgraph error) instead of another specialisation
        compiled = _compile_aten_graph(sgm, tensors_ex, sname, self.fullgraph, self.inference, specialise=False,
                                       collectives_in_program=self.collectives_in_program)

        def run(args: List[Any]) -> List[Any]:
            outs = compiled([args[i] for i in tensor_pos])
            return list(outs) if isinstance(outs, (list, tuple)) else [outs]

        return run

    def run(self, inputs: List[Any]) -> List[Any]:
        key = (_global_state_key(),) + tuple(_input_key(x) for x in inputs)
        fn = self.specs.get(key)
        if fn is None:
            fn = torch._dynamo.disable(self._specialize)(inputs)
            self.specs[key] = fn
            while len(self.specs) > _MAX_SPECIALIZATIONS:
                self.specs.popitem(last=False)
        else:
            self.specs.move_to_end(key)
        return fn(inputs)

    def __call__(self, *args: Any) -> List[Any]:
        if len(args) == 1 and isinstance(args[0], list):  # boxed
            inputs = list(args[0])
            args[0].clear()
            return self.run(inputs)
        return self.run(list(args))


def _compile_aten_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], name: str,
                        fullgraph: bool, inference: bool = False, specialise: bool = True,
                        collectives_in_program: bool = True) -> Callable:
    _inline_control_deps(gm)
    _inline_flex_attention(gm)
    _prepare_regions(gm)
    if specialise and _is_dynamic(gm):
        _py_stats["dynamic_graphs"] += 1
        log.info("torch_tpu: graph %s has symbolic sizes; it is compiled once per concrete input signature", name)
        return _ShapeSpecializedGraph(gm, name, fullgraph, inference, collectives_in_program)
    # Ops without a rule partition the graph now; nodes whose rule cannot lower their call are found when the graph
    # is lowered for its first input signature.
    bad: Dict[torch.fx.Node, str] = {}
    inside = _collectives_inside(gm, name) if collectives_in_program else set()
    dev = _graph_device(gm)
    for n in gm.graph.nodes:
        if n in inside:
            continue
        why = _node_supported(n) or _made_elsewhere(n, dev)
        if why is not None:
            bad[n] = why
    if bad and _inline_regions(gm):
        # a partitioned graph runs its regions' nodes inline (partitions take no subgraphs)
        return _compile_aten_graph(gm, example_inputs, name, fullgraph, inference, specialise, collectives_in_program)
    if inside and bad:  # the graph is partitioned anyway: its collectives split it too
        bad.update({n: _op_name(n.target) or str(n.target) for n in inside})
        inside = set()
    if inside:
        _py_stats["program_collectives"] += sum(1 for n in inside if _base_collective(n) != "wait_tensor")
    if bad:
        # Collectives (functional collectives from DTensor, FSDP2, tensor parallelism or user code) split the
        # graph: they run through their process group (tpu_dist) between the compiled partitions, even with
        # fullgraph=True.
        collectives = {n for n in bad if _is_collective(n)}
        # Stream and event operations dynamo records (streams::fork/join/record_event/wait_event/synchronize_*,
        # record_stream; e.g. Diffusers' group offloading hooks inside a compiled model) act on the host's view of
        # the device queue: they run eagerly where the graph has them, between compiled partitions, even with
        # fullgraph=True (a tpu device is one in-order queue, so they order nothing inside a program).
        stream_ops = {n for n in bad if _is_stream_op(n)}
        collectives |= stream_ops
        others = {n: m for n, m in bad.items() if n not in collectives}
        if fullgraph and others:
            raise RuntimeError(_fail_message(name, others))
        if others:
            log.warning("torch_tpu: graph %s: ops without a lowering run eagerly: %s", name,
                        ", ".join(sorted({(_op_name(n.target) or str(n.target)) for n in others})))
        if stream_ops:
            _py_stats["stream_nodes"] += len(stream_ops)
            log.info("torch_tpu: graph %s: %d stream/event operations run between compiled partitions", name,
                     len(stream_ops))
            collectives -= stream_ops
        if collectives:
            _py_stats["collective_nodes"] += len(collectives)
            log.info("torch_tpu: graph %s: %d collectives run through their process group between compiled "
                     "partitions", name, len(collectives))
        return _partitioned(gm, name, set(bad), fullgraph, inference)
    try:
        d, cg = _make_graph(gm, name, example_inputs, inference)
    except UnsupportedGraph as e:
        if inside:
            # Not one program (e.g. an opaque graph input that an op takes as an argument): split at the
            # collectives, which run through their process group.
            log.info("torch_tpu: graph %s: collectives run through their process group (%s)", name, e)
            _py_stats["program_collectives"] -= sum(1 for n in inside if _base_collective(n) != "wait_tensor")
            _py_stats["collective_nodes"] += len(inside)
            return _partitioned(gm, name, set(inside), fullgraph, inference)
        return _eager_graph(gm, name, str(e), fullgraph)

    def on_errors(errors: List[Tuple[int, str]]) -> Callable:
        whole = [m for idx, m in errors if idx < 0]
        if whole:
            return _unboxed(_eager_graph(gm, name, whole[0], fullgraph))
        failed = {d.node_of_desc[idx]: msg for idx, msg in errors}
        regions = {n for n in failed if _region_kind(n) == "invoke_subgraph"}
        if regions:
            # a region's function could not be built (a random op or a device-side check inside it): its call
            # sites compile its nodes inline
            log.info("torch_tpu: graph %s: regions compiled inline: %s", name, "; ".join(sorted(set(
                failed[n] for n in regions))))
            _inline_regions(gm, regions)
            return _unboxed(_compile_aten_graph(gm, example_inputs, name, fullgraph, inference, specialise,
                                                collectives_in_program))
        # A collective that cannot run inside the program (uneven all_to_all splits, ...): the graph is split at
        # every collective instead, as on the host transport.
        split = {n: m for n, m in failed.items() if n in inside}
        others = {n: m for n, m in failed.items() if n not in inside}
        if fullgraph and others:
            raise RuntimeError(_fail_message(name, others))
        if others:
            log.warning("torch_tpu: graph %s: ops that cannot be lowered run eagerly: %s", name,
                        ", ".join(sorted({(_op_name(n.target) or str(n.target)) for n in others})))
        if split:
            log.info("torch_tpu: graph %s: collectives run through their process group (%s)", name,
                     "; ".join(sorted(set(split.values()))))
            _py_stats["collective_nodes"] += len(inside)
        return _unboxed(_partitioned(gm, name, set(others) | set(inside), fullgraph, inference))

    log.debug("torch_tpu: graph %s: %d ops", name, d.num_ops)
    return _GraphRunner(d, cg, name, on_errors)


def _eager_graph(gm: torch.fx.GraphModule, name: str, why: str, fullgraph: bool) -> Callable:
    if fullgraph:
        raise RuntimeError(f"torch_tpu: graph {name} cannot be compiled: {why}")
    log.warning("torch_tpu: graph %s runs eagerly: %s", name, why)
    _py_stats["eager_graphs"] += 1
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm)


def _partitioned(gm: torch.fx.GraphModule, name: str, bad: set, fullgraph: bool, inference: bool = False) -> Callable:
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupport
    from torch._functorch.aot_autograd import make_boxed_func

    _py_stats["partitioned_graphs"] += 1
    _py_stats["fallback_nodes"] += sum(1 for n in bad if not (_is_collective(n) or _is_stream_op(n)))
    bad_names = {n.name for n in bad}

    class _Support(OperatorSupport):
        def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
            # Input mutations (copy_) stay outside the partitions: a partition may run before a later reader of
            # the input's old value, so the writes run eagerly where the graph has them (at its end).
            return (node.op == "call_function" and node.name not in bad_names and _node_supported(node) is None
                    and node.target is not torch.ops.aten.copy_.default)

    part = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True)
    partitions = part.propose_partitions()
    fused = part.fuse_partitions(partitions)
    count = 0
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        vals = [a.meta.get("val", None) if isinstance(a, torch.fx.Node) else a for a in node.args]
        for ph, v in zip([n for n in sub.graph.nodes if n.op == "placeholder"], vals):
            if "val" not in ph.meta and v is not None:
                ph.meta["val"] = v
        sname = f"{name}.{node.target}"
        try:
            d, cg = _make_graph(sub, sname, None, inference)
        except UnsupportedGraph as e:
            log.warning("torch_tpu: partition %s runs eagerly: %s", sname, e)
            continue

        def on_errors(errors: List[Tuple[int, str]], sub: torch.fx.GraphModule = sub, sname: str = sname,
                      single: bool = d.single_output) -> Callable:  # type: ignore[attr-defined]
            log.warning("torch_tpu: partition %s runs eagerly: %s", sname, "; ".join(m for _, m in errors))

            def eager(inputs: List[Any]) -> List[Any]:
                r = sub(*inputs)
                return [r] if single else list(r)

            return eager

        setattr(fused, node.target, _SubgraphModule(_GraphRunner(d, cg, sname, on_errors)))
        count += 1
    fused.recompile()
    log.info("torch_tpu: graph %s: %d compiled partitions", name, count)
    return make_boxed_func(fused)
