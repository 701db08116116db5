"""Bad input raises the same exception type as on CPU, and a missing plugin names the package to install."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

CASES = {
    "shape_mismatch_add": lambda d: torch.ones(2, 3, device=d) + torch.ones(4, device=d),
    "mm_inner_dim": lambda d: torch.ones(2, 3, device=d) @ torch.ones(4, 5, device=d),
    "view_incompatible": lambda d: torch.ones(2, 3, device=d).t().view(6),
    "bad_dim": lambda d: torch.ones(2, 3, device=d).sum(5),
    "int_inplace_float": lambda d: torch.ones(3, dtype=torch.int64, device=d).add_(1.5),
    "bitwise_on_float": lambda d: torch.ones(3, device=d) & torch.ones(3, device=d),
    "cat_dtype_rank": lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(3, device=d)]),
    "index_out_of_range": lambda d: torch.ones(3, device=d)[5],
    "softmax_bad_dim": lambda d: torch.softmax(torch.ones(3, device=d), dim=2),
    "embedding_float_index": lambda d: torch.nn.functional.embedding(torch.ones(3, device=d), torch.ones(5, 2, device=d)),
    "layer_norm_shape": lambda d: torch.nn.functional.layer_norm(torch.ones(2, 3, device=d), (4,)),
    "expand_bad": lambda d: torch.ones(2, 3, device=d).expand(4, 4),
    "item_many": lambda d: torch.ones(3, device=d).item(),
}


def _exc_type(fn, device):
    try:
        fn(device)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_exception_type_as_cpu(name):
    cpu = _exc_type(CASES[name], "cpu")
    assert cpu is not None, "case does not fail on CPU"
    tpu = _exc_type(CASES[name], "tpu")
    assert tpu is cpu, f"cpu raised {cpu}, tpu raised {tpu}"


def test_tensors_on_different_devices():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    with pytest.raises(RuntimeError):
        torch.ones(3, 3, device="tpu") @ torch.ones(3, 3)


def test_unsupported_dtype_on_device():
    # Complex tensors can be stored, but ops on them are not lowered: they run (correctly) on the CPU fallback.
    z = torch.tensor([1 + 2j, 3 - 1j])
    torch.testing.assert_close((z.to("tpu") * 2).cpu(), z * 2)


def test_invalid_device_index():
    with pytest.raises((RuntimeError, ValueError)):
        torch.ones(2, device=f"tpu:{torch.tpu.device_count() + 3}")


def test_missing_plugin_names_the_package():
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    code = "import torch, torch_tpu\ntry:\n    torch.ones(2, device='tpu')\nexcept Exception as e:\n    print('ERR', e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert "pip install" in text, text


def test_error_does_not_poison_later_ops():
    a = torch.ones(2, 3, device="tpu")
    with pytest.raises(RuntimeError):
        a + torch.ones(4, device="tpu")
    torch.testing.assert_close((a + 1).cpu(), torch.full((2, 3), 2.0))
