"""Running a compiled graph: :class:`_GraphRunner` (boxed or unboxed calls, constants per device, opaque inputs
handed through, the switch to another runner when a node cannot be lowered) and compiled partitions."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ._args import _real_object
from ._describe import _Desc

log = logging.getLogger("torch_tpu")


def _log_compile(name: str, ev: Tuple) -> None:
    source, ops, seconds, key = ev
    if source == "compile":
        log.info("torch_tpu: compiled graph %s: %d ops in %.3fs", name, ops, seconds)
    else:
        log.info("torch_tpu: graph %s: %d ops, executable from the %s cache in %.3fs", name, ops, source, seconds)


class _GraphRunner:
    """Calls a compiled graph: boxed (AOTAutograd passes a list and lets us clear it) or as a module.

    The graph is lowered when it first runs with an input signature. If some of its nodes cannot be lowered, nothing
    has run yet: ``on_errors(errors)`` then returns the callable that runs the graph from now on (a partitioned or
    eager version), or raises.
    """

    _boxed_call = True

    def __init__(self, d: _Desc, cg: Any, name: str, on_errors: Callable[[List[Tuple[int, str]]], Callable]) -> None:
        self.cg = cg
        self.name = name
        self._boxed_call = True  # in the instance dict: functools.wraps (dynamo's disable wrapper) copies it
        self.constants = d.constants
        self.const_outputs = d.const_outputs
        self.single = d.single_output  # type: ignore[attr-defined]
        self._dev_constants: Dict[Any, List[torch.Tensor]] = {}  # per device: bounded by the devices
        self._on_errors = on_errors
        self._instead: Optional[Callable] = None
        self._dropped = set(d.dropped_inputs)
        self._opaque_outputs = d.opaque_outputs
        self._group_guards = d.group_guards

    def _constants_for(self, inputs: Sequence[Any]) -> List[torch.Tensor]:
        dev = None
        for t in inputs:
            if isinstance(t, torch.Tensor) and t.device.type == "tpu":
                dev = t.device
                break
        if dev is None:
            dev = torch.device("tpu", torch.tpu.current_device())
        c = self._dev_constants.get(dev)
        if c is None:
            c = [t.to(dev) for t in self.constants]
            self._dev_constants[dev] = c
        return c

    def run(self, inputs: List[Any]) -> List[Any]:
        if self._instead is not None:
            return self._instead(inputs)
        given = inputs
        if self._dropped:
            for i, group in self._group_guards:  # the program was built for this group
                got = str(getattr(_real_object(given[i]), "group_name", None))
                if got != group:
                    raise RuntimeError(f"torch_tpu: graph {self.name} was compiled for process group '{group}', "
                                       f"called with process group '{got}'")
            inputs = [x for i, x in enumerate(inputs) if i not in self._dropped]
        args = list(inputs) + self._constants_for(inputs) if self.constants else inputs
        outs, ev, errors = self.cg.run(args)
        if errors:
            self._instead = self._on_errors(errors)
            self.cg.retire()  # a graph call in front of this runner sends every call here from now on
            self.cg = None
            return self._instead(given)
        if ev is not None:
            _log_compile(self.name, ev)
        if self.const_outputs:
            for k, v in self.const_outputs.items():
                outs[k] = v
        for k, i in self._opaque_outputs.items():
            outs[k] = given[i]
        return outs

    def __call__(self, *args: Any) -> List[Any]:
        if len(args) == 1 and isinstance(args[0], list):  # boxed: we own the list and free the inputs early
            inputs = list(args[0])
            args[0].clear()
            return self.run(inputs)
        return self.run(list(args))  # unboxed (e.g. the backward, called through dynamo's disable wrapper)


class _SubgraphModule(torch.nn.Module):
    """A compiled partition inside a partitioned graph."""

    def __init__(self, runner: _GraphRunner) -> None:
        super().__init__()
        self.runner = runner

    def forward(self, *args: Any) -> Any:
        outs = self.runner.run(list(args))
        return outs[0] if self.runner.single else tuple(outs)


def _unboxed(boxed: Callable) -> Callable:
    """A boxed function (takes the input list) as a runner's replacement: called with the inputs, returns a list."""
    return lambda inputs: list(boxed(list(inputs)))
