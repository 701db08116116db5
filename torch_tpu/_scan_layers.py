"""A stack of identical layers run as one loop: ``torch_tpu.scan_layers(layers, x)``.

Equal to ``for layer in layers: x = layer(x)``, forward and backward, eager and compiled. The layers' parameters
(and buffers) are stacked along a new leading dimension and ``torch._higher_order_ops.scan`` runs one layer's
forward over them. Under ``torch.compile(backend="tpu")`` that scan is one ``stablehlo.while`` whose body is one
layer, lowered and compiled by XLA once whatever the depth; its backward is a second loop. Stacking is an ordinary
differentiable ``torch.stack``, so gradients reach each layer's own parameters and an optimizer over the model is
unchanged. (The same idea as torch_xla's ``scan_layers`` and JAX's ``nn.scan``.)

Requirements, checked in eager calls (a compiled call leaves them to ``torch.stack`` and Dynamo's guards, so that
Dynamo does not trace the checks layer by layer): at least one layer; every layer of the same class with the same parameter and buffer names,
shapes, dtypes and devices; each layer maps its first argument (a tensor or a pytree of tensors) to a value of the
same structure, shapes and dtypes. Further positional and keyword arguments (an attention mask, position ids) are
passed unchanged to every layer. Layers must not keep Python state between calls, as scan traces one of them.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

__all__ = ["scan_layers"]


def _names(layer: torch.nn.Module) -> list[str]:
    return [n for n, _ in layer.named_parameters()] + [n for n, _ in layer.named_buffers()]


def _get(layer: torch.nn.Module, name: str) -> torch.Tensor:
    # a chain of attribute reads: cheap for Dynamo to trace (one module traversal per layer is not)
    obj = layer
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _check_same(layers: list[torch.nn.Module], names: list[str]) -> None:
    first = layers[0]
    for i, layer in enumerate(layers[1:], 1):
        if type(layer) is not type(first):
            raise ValueError(f"scan_layers: layer {i} is a {type(layer).__name__}, layer 0 a {type(first).__name__}; "
                             "all layers must be of one class")
        other = _names(layer)
        if sorted(other) != sorted(names):
            missing = sorted(set(names) ^ set(other))
            raise ValueError(f"scan_layers: layer {i} has other parameters or buffers than layer 0: {missing}")
        for name in names:
            t, r = _get(layer, name), _get(first, name)
            if t.shape != r.shape or t.dtype != r.dtype or t.device != r.device:
                raise ValueError(f"scan_layers: {name} of layer {i} is {tuple(t.shape)} {t.dtype} on {t.device}, "
                                 f"of layer 0 {tuple(r.shape)} {r.dtype} on {r.device}")


def scan_layers(layers: Iterable[torch.nn.Module], x: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs ``x = layer(x, *args, **kwargs)`` for each layer in order, as one loop over stacked weights."""
    from torch._higher_order_ops.scan import scan
    from torch.func import functional_call

    layers = list(layers)
    if not layers:
        raise ValueError("scan_layers: no layers")
    if len(layers) == 1:
        return layers[0](x, *args, **kwargs)
    template = layers[0]
    names = _names(template)
    if not torch.compiler.is_compiling():
        # (Dynamo would trace these checks layer by layer: a compiled call relies on the stack to reject other
        # shapes, and on Dynamo's guards for the layers' tensors)
        _check_same(layers, names)
    stacked = {n: torch.stack([_get(layer, n) for layer in layers]) for n in names}

    leaves = [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]
    if not leaves:
        raise TypeError("scan_layers: the first argument must be a tensor or a pytree of tensors")

    def body(carry, weights):
        out = functional_call(template, weights, (carry,) + args, kwargs, strict=True)
        # scan's per-step output: one 0-d tensor (compiled scans need a tensor there), dropped
        return out, torch.utils._pytree.tree_leaves(out)[0].new_zeros(())

    carry, _ = scan(body, x, stacked)
    return carry
