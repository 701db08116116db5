"""``torch_tpu._internal.utils``: TorchTPU's debugging helpers on this package.

- :class:`OpTracer`: records every ATen op run under it, with the devices of its inputs and outputs and whether
  it ran on the CPU fallback (and why); ``tracer.report()`` / ``pformat_op_tracer(tracer)`` format it.
- :func:`format_model`: a module tree with each module's parameters (count, dtypes, devices).
- :func:`assert_close`: tensor (or nested sequence) comparison across devices with TorchTPU's modes
  (:class:`CheckValueMode`) and a message that suggests tolerances.
- :mod:`.hardware`: the host's accelerator, without starting the runtime.
"""

from . import hardware
from .utils import CheckValueMode, OpTracer, assert_close, format_model, pformat_op_tracer

__all__ = ["CheckValueMode", "OpTracer", "assert_close", "format_model", "hardware", "pformat_op_tracer"]
