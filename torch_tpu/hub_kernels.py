"""torch-tpu's fused layers for the Hugging Face ``kernels`` library, shipped inside the package (no hub access).

The kernel repository ``torch_tpu/kernels_repo`` has one build variant, ``build/torch-tpu`` (backend type "tpu"),
whose layers run the project's fused kernels (see its ``layers.py``). When the ``kernels`` library is imported,
:func:`register` adds their mapping for device "tpu", so ``kernelize(model, device="tpu")`` replaces the forward of
layers declared with ``@use_kernel_forward_from_hub(name)`` for these names:

=============== ============================================================ =====================
layer name      replaces                                                     modes
=============== ============================================================ =====================
``RMSNorm``     Transformers' RMSNorm (``weight``, ``variance_epsilon``)      inference, training
``SiluAndMul``  ``silu(x[..., :d]) * x[..., d:]``                            inference, training
``SwiGLUMLP``   ``down_proj(silu(gate_proj(x)) * up_proj(x))``               inference, training
``MoeExperts``  Transformers' experts (``gate_up_proj``, ``down_proj``),     inference
                ``forward(hidden_states, top_k_index, top_k_weights)``
=============== ============================================================ =====================

Every mode may add ``Mode.TORCH_COMPILE``. Layers of other devices and other names are untouched; a mapping the
user registers for the same name wins (it is registered later). ``TORCH_TPU_KERNELS_MAPPING=0`` turns the
automatic registration off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from . import _settings

__all__ = ["LAYERS", "mapping", "register", "repository_path"]

# layer name -> whether it has a backward (training modes)
LAYERS: Dict[str, bool] = {"RMSNorm": True, "SiluAndMul": True, "SwiGLUMLP": True, "MoeExperts": False}


def repository_path() -> Path:
    r"""The local kernel repository (its ``build/torch-tpu`` variant holds ``metadata.json`` and the layers)."""
    return Path(__file__).resolve().parent / "kernels_repo"


def mapping() -> Dict[str, Dict[str, Any]]:
    r"""The ``kernels`` mapping of torch-tpu's layers for device "tpu" (for ``use_kernel_mapping`` or
    ``register_kernel_mapping``)."""
    from kernels import LocalLayerRepository, Mode

    out: Dict[str, Dict[str, Any]] = {}
    for name, has_backward in LAYERS.items():
        repo = LocalLayerRepository(repo_path=repository_path(), layer_name=name)
        modes = {Mode.INFERENCE: repo, Mode.INFERENCE | Mode.TORCH_COMPILE: repo}
        if has_backward:
            modes.update({Mode.TRAINING: repo, Mode.TRAINING | Mode.TORCH_COMPILE: repo})
        out[name] = {"tpu": modes}
    return out


def register() -> None:
    r"""Adds :func:`mapping` to the ``kernels`` library's global mapping (keeping what is registered)."""
    from kernels import register_kernel_mapping

    register_kernel_mapping(mapping(), inherit_mapping=True)


def _on_kernels_import(_mod: Any) -> None:
    if _settings.get("TORCH_TPU_KERNELS_MAPPING"):
        register()


def _install() -> None:
    r"""Registers the mapping when ``kernels`` is imported (now, if it already is)."""
    from .api import _when_imported

    _when_imported("kernels", _on_kernels_import, "torch-tpu's kernel mapping for the kernels library")
