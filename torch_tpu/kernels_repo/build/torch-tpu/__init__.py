"""torch-tpu's kernel repository for the Hugging Face ``kernels`` library (build variant ``torch-tpu``).

Layers whose forward runs the project's fused tpu kernels; ``torch_tpu.hub_kernels`` maps them for
``kernelize(model, device="tpu")`` (no hub access: the repository ships inside the torch_tpu package).
"""

from . import layers

__all__ = ["layers"]
