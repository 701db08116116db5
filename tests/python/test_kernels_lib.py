"""The Hugging Face ``kernels`` library with tpu (installed: kernels 0.17.2).

What kernels 0.17.2 does for tpu: it detects the backend through ``torch.backends.tpu`` (set by torch_tpu),
accepts ``kernelize(model, device="tpu")`` and mappings keyed "tpu", and loads kernels built for the noarch
variant ``torch-tpu`` (``build/torch-tpu/<package>/`` with a ``metadata.json`` whose backend is ``{"type": "tpu"}``).
No tpu kernels are published on the hub for it to download here (no hub access in CI), so the mapping test uses a
local kernel repository written by the test: a pure-PyTorch layer, which runs through torch_tpu's lowerings.

What it cannot do: Transformers 5.24.0 accepts kernels >=0.18.2,<0.19.0 only (``KERNELS_MIN_VERSION``), so with
0.17.2 Transformers' own hub-kernel integration is switched off (``is_kernels_available()`` is False, model layers
carry no ``kernel_layer_name``, ``use_kernels=True`` is unavailable): ``kernelize`` on a Transformers model is then a
no-op. ``test_transformers_kernels_integration_state`` pins that down so a version change shows up here.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

import kernels  # noqa: E402  (installed by scripts/setup.sh: a missing package fails, never skips)

from kernels import (  # noqa: E402
    LocalLayerRepository,
    Mode,
    kernelize,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
)

_LAYER_SRC = '''
import torch
import torch.nn.functional as F

CALLS = [0]


class SiluAndMul(torch.nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, x):
        CALLS[0] += 1
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]
'''


@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, x):
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), SiluAndMul(), nn.Linear(8, 4))


@pytest.fixture
def tpu_kernel_repo(tmp_path):
    """A local kernel repository with one build variant, torch-tpu, providing layers.SiluAndMul."""
    variant = tmp_path / "build" / "torch-tpu"
    pkg = variant / "tiny_silu_and_mul"
    pkg.mkdir(parents=True)
    (variant / "metadata.json").write_text(json.dumps({
        "id": "tiny-silu-and-mul", "name": "tiny-silu-and-mul", "version": 1, "license": "Apache-2.0",
        "python-depends": [], "backend": {"type": "tpu"}}))
    (pkg / "__init__.py").write_text("from . import layers\n")
    (pkg / "layers.py").write_text(_LAYER_SRC)
    return tmp_path


def test_backend_detected_as_tpu():
    from kernels.backends import _backend

    assert hasattr(torch.backends, "tpu")
    assert _backend().name == "tpu"


@pytest.mark.parametrize("mode", [Mode.INFERENCE, Mode.TRAINING, Mode.INFERENCE | Mode.TORCH_COMPILE],
                         ids=["inference", "training", "inference+compile"])
def test_kernelize_without_mapping_keeps_forward(mode):
    model = _model().to("tpu")
    x = torch.randn(3, 8)
    with torch.no_grad():
        before = model(x.to("tpu")).cpu()
    # No mapping at all (torch_tpu maps its own layers globally, see test_moe.py: leave them out here): falls back
    # to the original forward.
    with use_kernel_mapping({}, inherit_mapping=False):
        kernelize(model, device="tpu", mode=mode)
        kernelize(model, mode=mode)  # device inferred from the parameters (tpu)
    with torch.no_grad():
        torch.testing.assert_close(model(x.to("tpu")).cpu(), before, atol=0, rtol=0)


def test_kernelize_with_tpu_mapping_uses_kernel(tpu_kernel_repo):
    model = _model()
    x = torch.randn(3, 8)
    with torch.no_grad():
        ref = model(x)
    model.to("tpu")
    mapping = {"SiluAndMul": {"tpu": LocalLayerRepository(repo_path=tpu_kernel_repo, layer_name="SiluAndMul")}}
    with use_kernel_mapping(mapping):
        kernelize(model, device="tpu", mode=Mode.INFERENCE, use_fallback=False)
    torch_tpu.reset_fallback_counts()
    with torch.no_grad():
        out = model(x.to("tpu")).cpu()
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    assert torch_tpu._C._fallback_counts() == {}
    calls = model[1].forward.__func__.__globals__.get("CALLS")
    assert calls == [1]  # the tpu kernel's forward (from the local repository) ran, not the original


def test_kernelize_mapping_for_other_devices_only(tpu_kernel_repo):
    model = _model().to("tpu")
    mapping = {"SiluAndMul": {"cuda": LocalLayerRepository(repo_path=tpu_kernel_repo, layer_name="SiluAndMul")}}
    with use_kernel_mapping(mapping, inherit_mapping=False):  # without torch_tpu's own tpu entry for the name
        kernelize(model, device="tpu", mode=Mode.INFERENCE)  # falls back: no tpu entry
        with pytest.raises(ValueError, match="device type"):
            kernelize(model, device="tpu", mode=Mode.INFERENCE, use_fallback=False)


def test_transformers_kernels_integration_state():
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import import_utils
    from transformers.utils.import_utils import is_kernels_available

    from packaging.version import Version

    v = Version(kernels.__version__)
    supported = Version(import_utils.KERNELS_MIN_VERSION) <= v < Version(import_utils.KERNELS_MAX_VERSION)
    assert is_kernels_available() == supported
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2)).to("tpu")
    decorated = hasattr(type(model.model.norm), "kernel_layer_name")
    assert decorated == supported, (transformers.__version__, kernels.__version__)
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        before = model(ids.to("tpu")).logits.cpu()
    kernelize(model, device="tpu", mode=Mode.INFERENCE)  # must not fail either way
    with torch.no_grad():
        torch.testing.assert_close(model(ids.to("tpu")).logits.cpu(), before, atol=0, rtol=0)
