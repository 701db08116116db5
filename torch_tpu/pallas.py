"""``torch.tpu.pallas`` (also ``torch_tpu.pallas``): TorchTPU's public Pallas API, ``jax_op``.

``torch.tpu.pallas.jax_op("ns::name", fn, donate_argnums=(...))`` registers the JAX or Pallas function ``fn`` as the
PyTorch custom op ``torch.ops.ns.name`` (eager, fused eager, ``torch.compile``; ``register_autograd`` /
``register_fake`` as in ``torch.library``). It is :func:`torch_tpu._internal.pallas.pallas.jax_op`, i.e.
:func:`torch_tpu.jax_op`. ``donate_argnums`` is accepted and has no effect: the inputs stay valid PyTorch tensors.
"""

from ._internal.pallas.pallas import jax_op

__all__ = ["jax_op"]


def __dir__() -> list:
    return list(__all__)
