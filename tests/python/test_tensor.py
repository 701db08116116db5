"""Storage, views, in-place writes through aliases, copies between cpu and tpu, and host interop."""
import io
import warnings

import pytest
import torch

import torch_tpu


def close(a, b, **kw):
    torch.testing.assert_close(a.cpu(), b, **kw)


@pytest.fixture
def x():
    return torch.arange(24, dtype=torch.float32).reshape(4, 6)


VIEWS = {
    "transpose": lambda t: t.t(),
    "permute": lambda t: t.reshape(2, 3, 4).permute(2, 0, 1),
    "slice_step": lambda t: t[1:3, ::2],
    "select": lambda t: t[2],
    "narrow": lambda t: t.narrow(1, 2, 3),
    "expand": lambda t: t[:, :1].expand(4, 6),
    "squeeze_unsqueeze": lambda t: t.unsqueeze(0).unsqueeze(2).squeeze(0),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.reshape(-1).unfold(0, 4, 3),
    "view": lambda t: t.view(6, 4),
    "as_strided": lambda t: t.as_strided((3, 3), (5, 2), 1),
    "alias": lambda t: t.alias() if hasattr(t, "alias") else torch.ops.aten.alias(t),
    "reverse_slices": lambda t: t[1:, 1:][::2, ::3],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_storage_and_read(x, name):
    t = x.to("tpu")
    v = VIEWS[name](t)
    assert v.device.type == "tpu"
    assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    close(v, VIEWS[name](x))
    close(v * 2 + 1, VIEWS[name](x) * 2 + 1)  # consumed by a program


@pytest.mark.parametrize("name", ["transpose", "slice_step", "select", "narrow", "diagonal", "view", "as_strided"])
def test_inplace_through_view_is_seen_by_aliases(x, name):
    t = x.clone().to("tpu")
    ref = x.clone()
    VIEWS[name](t).mul_(10).add_(1)
    VIEWS[name](ref).mul_(10).add_(1)
    close(t, ref)
    close(t.t(), ref.t())


def test_setitem_and_fill_into_views(x):
    t = x.clone().to("tpu")
    ref = x.clone()
    t[:, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    ref[:, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    t[0] = 7
    ref[0] = 7
    t[2:, 3:].zero_()
    ref[2:, 3:].zero_()
    t[1, ::2] = t[3, 1::2]
    ref[1, ::2] = ref[3, 1::2]
    close(t, ref)


def test_out_variant_resizes_and_writes(x):
    t = x.to("tpu")
    out = torch.empty(0, device="tpu")
    torch.add(t, t, out=out)
    close(out, x + x)
    out2 = torch.zeros(4, 12, device="tpu")
    torch.mul(t, 3, out=out2[:, ::2])  # a strided out= view
    ref = torch.zeros(4, 12)
    torch.mul(x, 3, out=ref[:, ::2])
    close(out2, ref)


@pytest.mark.parametrize("src_dtype,dst_dtype", [(torch.float32, torch.bfloat16), (torch.float32, torch.int64),
                                                 (torch.int64, torch.float32), (torch.bool, torch.float32),
                                                 (torch.float32, torch.bool), (torch.bfloat16, torch.float32)])
def test_copy_dtype_conversion(src_dtype, dst_dtype):
    x = (torch.randn(5, 7) * 4).to(src_dtype)
    close(x.to("tpu").to(dst_dtype), x.to(dst_dtype))  # tpu -> tpu
    d = torch.empty(5, 7, dtype=dst_dtype, device="tpu")
    d.copy_(x)  # cpu -> tpu converting
    close(d, x.to(dst_dtype))
    h = torch.empty(5, 7, dtype=dst_dtype)
    h.copy_(x.to("tpu"))  # tpu -> cpu converting
    torch.testing.assert_close(h, x.to(dst_dtype))


def test_copy_strided_both_directions():
    x = torch.randn(6, 8)
    t = torch.empty(8, 6, device="tpu").t()  # non-contiguous destination
    t.copy_(x)
    close(t, x)
    host = torch.empty(8, 6).t()
    host.copy_(t)
    torch.testing.assert_close(host, x)
    torch.testing.assert_close(x.to("tpu")[:, 1::3].cpu(), x[:, 1::3])


def test_copy_broadcast():
    t = torch.zeros(3, 4, device="tpu")
    t.copy_(torch.arange(4.0))
    close(t, torch.arange(4.0).expand(3, 4))


def test_non_blocking_copies():
    x = torch.randn(128, 64)
    t = x.to("tpu", non_blocking=True)
    y = (t * 2).to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    torch.testing.assert_close(y, x * 2)


def test_item_print_and_tolist():
    t = torch.tensor([[1.5, -2.0], [3.0, 4.0]], device="tpu")
    assert t[1, 0].item() == 3.0
    assert t.sum().item() == 6.5
    assert t.tolist() == [[1.5, -2.0], [3.0, 4.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = repr(t)
    assert "device='tpu:0'" in s and "1.5000" in s


def test_save_load_map_location():
    t = torch.randn(3, 5, device="tpu")
    buf = io.BytesIO()
    torch.save({"w": t, "v": t[1]}, buf)
    buf.seek(0)
    back = torch.load(buf, map_location="tpu")
    assert back["w"].device.type == "tpu"
    close(back["w"], t.cpu())
    buf.seek(0)
    cpu = torch.load(buf, map_location="cpu")
    torch.testing.assert_close(cpu["v"], t.cpu()[1])


def test_tensor_data_assignment_across_devices():
    p = torch.nn.Parameter(torch.randn(4))
    p.data = p.data.to("tpu")
    assert p.device.type == "tpu"
    back = torch.randn(4)
    p.data = back
    assert p.device.type == "cpu"
    torch.testing.assert_close(p.data, back)


def test_resize_and_set():
    t = torch.arange(4.0, device="tpu")
    t.resize_(8)
    assert t.shape == (8,)
    close(t[:4], torch.arange(4.0))
    t[4:] = torch.arange(4.0, 8.0)
    u = torch.empty(0, device="tpu")
    u.set_(t.untyped_storage(), 2, (2, 2), (2, 1))
    close(u, t.cpu()[2:6].reshape(2, 2))
    u.add_(1)
    close(t[2:6], torch.arange(2.0, 6.0) + 1)


def test_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3, device="tpu")
    assert (e + 1).shape == (0, 3)
    assert e.sum(0).cpu().tolist() == [0.0, 0.0, 0.0]
    s = torch.tensor(2.5, device="tpu")
    assert (s * s).item() == 6.25
    assert (s * torch.ones(3, device="tpu")).cpu().tolist() == [2.5, 2.5, 2.5]


def test_memory_released_when_tensors_die():
    torch.tpu.synchronize()
    import gc

    gc.collect()
    start = torch.tpu.memory_allocated()
    a = torch.randn(1024, 256, device="tpu")
    b = a * 2
    assert torch.tpu.memory_allocated() >= start + 2 * 1024 * 256 * 4
    del a, b
    gc.collect()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == start


def test_two_virtual_devices():
    assert torch.tpu.device_count() >= 2, "conftest.py sets TORCH_TPU_NUM_DEVICES=2"
    x = torch.randn(5, 5)
    a = x.to("tpu:0")
    b = a.to("tpu:1")
    assert b.device == torch.device("tpu:1")
    c = (b @ b).relu()
    assert c.device == torch.device("tpu:1")
    close(c, (x @ x).relu(), rtol=1e-5, atol=1e-5)
    back = c.to("tpu:0")
    close(back + a, (x @ x).relu() + x, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with torch.tpu.device(1):
        z = torch.zeros(2, device="tpu")
    assert z.device.index == 1


def test_launch_blocking_mode_subprocess():
    import subprocess
    import sys

    code = ("import torch, torch_tpu; x = torch.randn(50, 50, device='tpu'); "
            "print(float(((x @ x) - (x.cpu() @ x.cpu()).to('tpu')).abs().max()) < 1e-3)")
    env = dict(__import__("os").environ, TORCH_TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("True")
