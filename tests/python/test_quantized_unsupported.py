"""Quantized tensors on tpu: every path raises NotImplementedError naming what tpu supports instead."""

import pytest
import torch

import torch_tpu  # noqa: F401

CASES = {
    "quantize_per_tensor of a tpu tensor": lambda: torch.quantize_per_tensor(torch.ones(2, device="tpu"), 0.1, 0,
                                                                             torch.quint8),
    "affine-quantized factory": lambda: torch._empty_affine_quantized([2], scale=0.1, zero_point=0,
                                                                      dtype=torch.quint8, device="tpu"),
    "quantized CPU tensor moved to tpu": lambda: torch.quantize_per_tensor(torch.ones(2), 0.1, 0,
                                                                           torch.qint8).to("tpu"),
    "empty with a quantized dtype": lambda: torch.empty(2, dtype=torch.qint32, device="tpu"),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", list(CASES))
def test_quantized_is_a_clear_error(case):
    with pytest.raises(NotImplementedError, match=r"quantized tensors .* are not supported on tpu.*float8_e4m3fn"):
        CASES[case]()
