"""PyTorch's storage API on tpu: byte slices of an UntypedStorage alias the sliced storage, and the legacy typed
storage classes live in torch.tpu as CUDA's live in torch.cuda."""

import io
import warnings

import pytest
import torch
from torch.testing._internal.common_utils import bytes_to_scalar

import torch_tpu  # noqa: F401


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage's deprecation warnings
        yield


def test_byte_slices_read_as_on_cpu():
    x = torch.randn(3, 5)
    t = x.to("tpu")
    s, c = t.untyped_storage(), x.untyped_storage()
    assert len(s) == len(c) == 60
    assert [s[i] for i in range(len(s))] == [c[i] for i in range(len(c))]
    assert list(s[4:12]) == list(c[4:12])
    assert list(s[4:12][2:6]) == list(c[4:12][2:6])  # a slice of a slice
    assert list(s[-8:]) == list(c[-8:])
    for k in range(15):  # test_torch's test_storage: each element from its bytes
        assert bytes_to_scalar(s[4 * k:4 * k + 4], torch.float32, "tpu").item() == x.view(-1)[k].item()


def test_tensors_on_a_slice_alias_the_storage():
    t = torch.arange(6, dtype=torch.float32, device="tpu")
    sl = t.untyped_storage()[8:16]  # elements 2 and 3
    v = torch.empty(0, dtype=torch.float32, device="tpu").set_(sl)
    assert v.tolist() == [2.0, 3.0]
    v.fill_(-1)  # writes through to the sliced storage
    assert t.tolist() == [0.0, 1.0, -1.0, -1.0, 4.0, 5.0]
    b = torch.empty(0, dtype=torch.uint8, device="tpu").set_(sl, 1, (2,), (1,))
    b.zero_()
    ref = torch.tensor([0.0, 1.0, -1.0, -1.0, 4.0, 5.0])
    ref.untyped_storage()[9:11] = 0  # CPU's slice assignment as the reference
    assert torch.equal(t.cpu(), ref)
    t.add_(1)  # and writes into the storage are seen through the slice
    assert torch.equal(v.cpu(), ref[2:4] + 1)
    sl.fill_(0)  # UntypedStorage methods on the slice
    assert t.tolist()[2:4] == [0.0, 0.0]


def test_slice_errors():
    s = torch.zeros(4, device="tpu").untyped_storage()
    with pytest.raises(RuntimeError, match="not resizable"):  # as CPU: a slice cannot grow
        torch.empty(0, dtype=torch.uint8, device="tpu").set_(s[0:4], 0, (8,), (1,))
    with pytest.raises(RuntimeError, match="multiple of its 4-byte elements"):
        torch.empty(0, dtype=torch.float32, device="tpu").set_(s[2:10])


@pytest.mark.parametrize("name,dtype", [("FloatStorage", torch.float32), ("LongStorage", torch.int64),
                                        ("BoolStorage", torch.bool), ("ComplexFloatStorage", torch.complex64),
                                        ("BFloat16Storage", torch.bfloat16), ("ByteStorage", torch.uint8)])
def test_legacy_storage_classes(name, dtype):
    cls = getattr(torch.tpu, name)
    t = torch.ones(4, dtype=dtype, device="tpu")
    assert t.storage_type() is cls
    assert isinstance(t.storage(), cls)
    assert not isinstance(t.storage(), getattr(torch, name))
    assert not isinstance(t.cpu().storage(), cls)
    assert cls.dtype == dtype
    s = cls(3)
    assert s.device.type == "tpu" and s.dtype == dtype and s.size() == 3
    vals = [1, 0, 1]
    s2 = cls(vals)
    assert s2.tolist() == torch.tensor(vals, dtype=dtype).tolist()
    with pytest.raises(RuntimeError, match="device"):
        cls(3, device="cpu")


def test_typed_storage_round_trips():
    t = torch.arange(5.0, device="tpu")
    s = t.storage()
    assert s[1] == 1.0
    s[2] = 7
    assert t[2].item() == 7.0
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    r = torch.load(buf, weights_only=False)
    assert r.device.type == "tpu" and r.tolist() == [0.0, 1.0, 7.0, 3.0, 4.0]
    assert torch.tensor(s, device="tpu").tolist() == [0.0, 1.0, 7.0, 3.0, 4.0]
