"""The device API: torch.tpu, torch.backends.tpu, torch_tpu.api, plugin discovery, autoload."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu
from torch_tpu import _plugin

# ---------------------------------------------------------------------------------------------------------
# Availability and devices
# ---------------------------------------------------------------------------------------------------------


def test_registered_modules():
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert torch.tpu is sys.modules["torch.tpu"]
    assert torch.get_device_module("tpu") is torch.tpu
    assert torch.backends.tpu is sys.modules["torch.backends.tpu"]
    assert torch.device("tpu:0").type == "tpu"


def test_is_available_and_count():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.backends.tpu.is_built()
    assert torch.backends.tpu.is_available()
    assert torch.backends.tpu.device_count() == torch.tpu.device_count()


def test_transformers_style_detection():
    # transformers' is_torch_tpu_available(): find_spec, torch.tpu.is_available(), device_count() >= 1.
    assert importlib.util.find_spec("torch_tpu") is not None
    assert torch.tpu.is_available() and torch.tpu.device_count() >= 1


def test_kernels_style_detection():
    assert hasattr(torch.backends, "tpu")


def test_init_and_is_initialized():
    torch.tpu.init()
    assert torch.tpu.is_initialized()
    assert not torch.tpu._is_in_bad_fork()


def test_plugin_info():
    info = torch_tpu.plugin_info()
    assert info["kind"] in {"tpu", "cuda", "cpu", "custom"}
    assert os.path.isfile(info["path"])
    assert isinstance(info["options"], dict)
    assert info["platform_name"]
    assert "api_version" in info


def test_current_and_set_device():
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    torch.tpu.set_device("tpu:0")
    torch.tpu.set_device(torch.device("tpu", 0))
    assert torch.tpu.current_device() == 0
    with pytest.raises(ValueError):
        torch.tpu.set_device("cpu")


def test_device_context_manager():
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    with torch.tpu.device(None):  # no-op
        assert torch.tpu.current_device() == 0
    with torch.tpu.device(-1):  # no-op
        assert torch.tpu.current_device() == 0
    assert torch.tpu.current_device() == 0


def test_device_properties():
    props = torch.tpu.get_device_properties(0)
    assert isinstance(props.name, str) and props.name
    assert isinstance(props.total_memory, int) and props.total_memory >= 0
    assert props.platform_name == torch_tpu.plugin_info()["platform_name"]
    assert torch.tpu.get_device_name(0) == props.name
    assert torch.tpu.get_device_name() == props.name
    assert "name=" in repr(props)
    with pytest.raises(AssertionError):
        torch.tpu.get_device_properties(torch.tpu.device_count())


def test_synchronize():
    x = torch.ones(64, 64, device="tpu")
    y = x @ x
    torch.tpu.synchronize()
    torch.tpu.synchronize(0)
    torch.tpu.synchronize("tpu:0")
    assert y.cpu()[0, 0].item() == 64.0


def test_precision_queries():
    assert torch.tpu.is_bf16_supported()
    dtypes = torch.tpu.get_amp_supported_dtype()
    assert torch.bfloat16 in dtypes and torch.float32 in dtypes


def test_multiple_devices_subprocess(run_python):
    proc = run_python(
        """
        import torch, torch_tpu
        assert torch.tpu.device_count() == 2, torch.tpu.device_count()
        assert torch_tpu.plugin_info()["options"].get("cpu_device_count") in (None, 2)
        torch.tpu.set_device(1)
        assert torch.tpu.current_device() == 1
        with torch.tpu.device(0):
            assert torch.tpu.current_device() == 0
            a = torch.ones(4, device="tpu")
        assert torch.tpu.current_device() == 1
        assert a.device == torch.device("tpu", 0), a.device
        b = torch.ones(4, device="tpu:1") * 2
        assert b.device == torch.device("tpu", 1)
        assert torch.equal(b.cpu(), torch.full((4,), 2.0))
        c = a.to("tpu:1") + b
        assert c.device.index == 1 and torch.equal(c.cpu(), torch.full((4,), 3.0))
        assert len(torch.tpu.default_generators) == 2
        torch.tpu.synchronize(1)
        s = torch.tpu.Stream(1)
        with torch.tpu.stream(s):
            assert torch.tpu.current_device() == 1
            assert torch.tpu.current_stream(1) == s
        print("OK")
        """,
        env={"TORCH_TPU_NUM_DEVICES": "2"},
    )
    assert "OK" in proc.stdout


# ---------------------------------------------------------------------------------------------------------
# Random number generation
# ---------------------------------------------------------------------------------------------------------


def test_default_generators():
    gens = torch.tpu.default_generators
    assert isinstance(gens, tuple) and len(gens) == torch.tpu.device_count()
    for i, g in enumerate(gens):
        assert isinstance(g, torch.Generator)
        assert g.device == torch.device("tpu", i)


def test_manual_seed_reproducible():
    torch.manual_seed(1234)
    a = torch.randn(8, 8, device="tpu").cpu()
    b = torch.randn(8, 8, device="tpu").cpu()
    torch.manual_seed(1234)
    c = torch.randn(8, 8, device="tpu").cpu()
    assert torch.equal(a, c)
    assert not torch.equal(a, b)
    torch.tpu.manual_seed(7)
    d = torch.randn(16, device="tpu").cpu()
    torch.tpu.manual_seed_all(7)
    e = torch.randn(16, device="tpu").cpu()
    assert torch.equal(d, e)
    assert torch.tpu.initial_seed() == 7


def test_explicit_generator():
    g = torch.Generator(device="tpu")
    g.manual_seed(99)
    a = torch.randn(10, device="tpu", generator=g).cpu()
    g.manual_seed(99)
    b = torch.randn(10, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)


def test_rng_state_roundtrip():
    torch.tpu.manual_seed(5)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(32, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    b = torch.rand(32, device="tpu").cpu()
    assert torch.equal(a, b)
    states = torch.tpu.get_rng_state_all()
    assert len(states) == torch.tpu.device_count()
    c = torch.rand(32, device="tpu").cpu()
    torch.tpu.set_rng_state_all(states)
    d = torch.rand(32, device="tpu").cpu()
    assert torch.equal(c, d)


def test_seed_and_fork_rng():
    torch.tpu.seed()
    s1 = torch.tpu.initial_seed()
    torch.tpu.seed_all()
    assert isinstance(torch.tpu.initial_seed(), int)
    torch.tpu.manual_seed(11)
    with torch.random.fork_rng(device_type="tpu"):
        torch.rand(4, device="tpu")
    after = torch.rand(4, device="tpu").cpu()
    torch.tpu.manual_seed(11)
    expected = torch.rand(4, device="tpu").cpu()
    assert torch.equal(after, expected)
    del s1


def test_seed_before_first_use_subprocess(run_python):
    # Seeding before the runtime exists is queued and applied by the lazy init that the first tpu tensor
    # triggers (PyTorch calls torch.tpu._lazy_init()); importing does not initialize the runtime.
    run_python(
        """
        import torch, torch_tpu
        assert not torch.tpu.is_initialized()
        torch.manual_seed(42)
        assert not torch.tpu.is_initialized()
        a = torch.randn(6, device="tpu").cpu()
        assert torch.tpu.is_initialized()
        torch.manual_seed(42)
        b = torch.randn(6, device="tpu").cpu()
        assert torch.equal(a, b), (a, b)
        """
    )
    # Same when the first device use is a copy (tensor.to) rather than a factory.
    run_python(
        """
        import torch, torch_tpu
        torch.manual_seed(3)
        x = torch.zeros(6).to("tpu")
        assert torch.tpu.is_initialized()
        a = torch.rand_like(x).cpu()
        torch.manual_seed(3)
        b = torch.rand_like(x).cpu()
        assert torch.equal(a, b), (a, b)
        """
    )


# ---------------------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------------------


def _settle() -> int:
    gc.collect()
    torch.tpu.synchronize()
    return torch.tpu.memory_allocated()


def test_memory_allocated_tracks_tensors():
    _settle()
    nbytes = 1 << 22  # 4 MiB
    x = torch.ones(nbytes // 4, dtype=torch.float32, device="tpu")
    with_x = _settle()
    assert with_x >= nbytes
    assert torch.tpu.max_memory_allocated() >= with_x
    assert torch.tpu.memory_reserved() >= with_x
    assert torch.tpu.max_memory_reserved() >= torch.tpu.memory_reserved()
    del x
    assert _settle() == with_x - nbytes
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    y = torch.zeros(nbytes // 2, dtype=torch.uint8, device="tpu")
    assert torch.tpu.max_memory_allocated() >= with_x - nbytes + nbytes // 2
    del y
    torch.tpu.empty_cache()


def test_memory_stats_and_mem_get_info():
    stats = torch.tpu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current"):
        assert isinstance(stats[key], int)
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    free, total = torch.tpu.mem_get_info()
    assert 0 <= free <= total and total > 0


@pytest.mark.tpu_memory_check
def test_memory_check_marker_passes_for_clean_test():
    y = torch.arange(1000.0).to("tpu")
    z = (y * y).neg()
    assert z.cpu()[10].item() == -100.0


def test_memory_allocated_excludes_internal_caches():
    # memory_allocated() counts tensor memory only (as on CUDA): device constants the runtime caches for
    # scalar operands must not show up there, or at least must be released by empty_cache().
    y = torch.arange(100, device="tpu")
    base = _settle()
    for s in (3, 5.5, -7):
        z = y * s
        del z
    torch.tpu.empty_cache()
    assert _settle() == base


# ---------------------------------------------------------------------------------------------------------
# Streams and events
# ---------------------------------------------------------------------------------------------------------


def _busy_work(n: int = 512, reps: int = 8) -> torch.Tensor:
    x = torch.randn(n, n, device="tpu")
    for _ in range(reps):
        x = torch.tanh(x @ x / n)
    return x


def test_stream_basics():
    d = torch.tpu.default_stream()
    assert isinstance(d, torch.Stream) and isinstance(d, torch.tpu.Stream)
    assert d.device == torch.device("tpu", 0)
    assert torch.tpu.current_stream() == d
    s = torch.tpu.Stream()
    assert s != d
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        y = _busy_work(128, 2)
    assert torch.tpu.current_stream() == d
    with s:
        assert torch.tpu.current_stream() == s
    assert torch.tpu.current_stream() == d
    with torch.tpu.stream(None):
        assert torch.tpu.current_stream() == d
    s.synchronize()
    assert s.query()
    ev = s.record_event()
    assert isinstance(ev, torch.tpu.Event) and ev.is_recorded
    s.wait_event(ev)
    s.wait_stream(d)
    ev.synchronize()
    assert ev.query()
    torch.tpu.set_stream(s)
    assert torch.tpu.current_stream() == s
    torch.tpu.set_stream(d)
    del y


def test_event_ordering():
    e = torch.tpu.Event()
    assert isinstance(e, torch.Event)
    assert e.query()  # never recorded
    a = _busy_work(256, 4)
    e1 = torch.tpu.Event()
    e1.record()
    b = _busy_work(512, 8)
    e2 = torch.tpu.Event()
    e2.record(torch.tpu.current_stream())
    e2.synchronize()
    # Everything launched before e2 (including e1's work) has finished.
    assert e2.query() and e1.query()
    assert e2.device == torch.device("tpu", 0)
    e.wait()
    del a, b


def test_event_elapsed_time():
    _busy_work(64, 1)
    torch.tpu.synchronize()
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    y = _busy_work(512, 16)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert ms > 0.0
    del y


def test_event_elapsed_time_errors():
    a = torch.tpu.Event()
    b = torch.tpu.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        a.elapsed_time(b)
    c = torch.tpu.Event(enable_timing=True)
    d = torch.tpu.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        c.elapsed_time(d)


# ---------------------------------------------------------------------------------------------------------
# Generated methods, autocast
# ---------------------------------------------------------------------------------------------------------


def test_tensor_and_module_methods():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    u = t.tpu()
    assert u.is_tpu and not t.is_tpu
    assert u.device.type == "tpu"
    assert torch.equal(u.cpu(), t)
    assert t.tpu(0).device == torch.device("tpu", 0)
    assert u.untyped_storage().is_tpu
    m = torch.nn.Linear(3, 2).tpu()
    assert all(p.is_tpu for p in m.parameters())
    out = m(u)
    assert out.is_tpu and out.shape == (2, 2)
    m2 = torch.nn.Linear(3, 2).to("tpu")
    assert next(m2.parameters()).device.type == "tpu"


def test_autocast_bf16():
    a = torch.randn(8, 8, device="tpu")
    b = torch.randn(8, 8, device="tpu")
    assert (a @ b).dtype == torch.float32
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.bfloat16
        assert (a @ b).dtype == torch.bfloat16
    with torch.autocast("tpu"):  # bfloat16 is the default on tpu
        assert torch.mm(a, b).dtype == torch.bfloat16
    assert importlib.import_module("torch.tpu.amp") is torch.tpu.amp
    with torch.tpu.amp.autocast():
        assert torch.mm(a, b).dtype == torch.bfloat16
    assert torch.mm(a, b).dtype == torch.float32


def test_torch_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.synchronize()


# ---------------------------------------------------------------------------------------------------------
# Dynamo device interface (torch_tpu.api)
# ---------------------------------------------------------------------------------------------------------


def test_dynamo_device_interface():
    from torch._dynamo import device_interface as di

    iface = di.get_interface_for_device("tpu")
    assert iface is torch_tpu.api.TpuInterface
    assert iface.__module__ == "torch_tpu.api"
    assert iface.is_available()
    assert iface.device_count() == torch.tpu.device_count()
    assert iface.current_device() == 0
    assert iface.Event is torch.tpu.Event and issubclass(iface.Event, torch.Event)
    assert iface.Stream is torch.tpu.Stream and issubclass(iface.Stream, torch.Stream)
    assert iface.device is torch.tpu.device
    iface.synchronize()
    assert iface.get_device_properties(0).name == torch.tpu.get_device_name(0)
    assert iface.Worker.get_device_properties("tpu:0").multi_processor_count >= 1
    assert iface.is_bf16_supported()
    assert not iface.is_dtype_supported(torch.float64)
    assert iface.current_stream() == torch.tpu.current_stream()
    # Re-running torch's lazy registration must not replace it.
    list(di.get_registered_device_interfaces())
    assert di.get_interface_for_device(torch.device("tpu")) is iface


def test_dynamo_imported_before_torch_tpu(run_python):
    run_python(
        """
        import os
        import torch
        import torch._dynamo.device_interface as di
        import torch_tpu
        assert di.get_interface_for_device("tpu") is torch_tpu.api.TpuInterface
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )


def test_api_compat_names():
    from torch_tpu.api import _device_module
    from torch_tpu.api.streams import TpuEvent, TpuStream

    assert TpuEvent is torch.tpu.Event and TpuStream is torch.tpu.Stream
    dm = _device_module._DeviceModule
    assert dm.current_device() == torch.tpu.current_device()
    assert dm.device_count() == torch.tpu.device_count()
    assert dm.is_available()


# ---------------------------------------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------------------------------------


def test_fallback_report_and_cache_stats(capsys):
    torch_tpu.reset_fallback_counts()
    counts = torch_tpu.fallback_report(print_report=False)
    assert isinstance(counts, dict)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in counts.items())
    torch_tpu.fallback_report()
    assert "torch_tpu" in capsys.readouterr().out
    assert isinstance(torch_tpu.fallback_reasons(), dict)
    prev = torch_tpu.fallback_strict()
    try:
        torch_tpu.set_fallback_strict(True)
        assert torch_tpu.fallback_strict()
        torch_tpu.set_fallback_strict(False)
        assert not torch_tpu.fallback_strict()
    finally:
        torch_tpu.set_fallback_strict(prev)
    stats = torch_tpu.cache_stats()
    for key in ("requests", "hits", "compiles", "compile_seconds"):
        assert key in stats
    assert stats["hits"] <= stats["requests"]


# ---------------------------------------------------------------------------------------------------------
# Plugin discovery
# ---------------------------------------------------------------------------------------------------------


def test_parse_options():
    opts = _plugin.parse_options("a=1, b=2.5,c=true,d=False,e=1:2:3,f=bfc,g=-4,h=0x10")
    assert opts == {"a": 1, "b": 2.5, "c": True, "d": False, "e": [1, 2, 3], "f": "bfc", "g": -4, "h": 16}
    assert isinstance(opts["a"], int) and isinstance(opts["c"], bool)
    assert _plugin.parse_options("") == {}
    assert _plugin.parse_options(None) == {}
    with pytest.raises(ValueError):
        _plugin.parse_options("novalue")


def _clean_plugin_env(monkeypatch):
    for k in (_plugin.ENV_PLUGIN, _plugin.ENV_OPTIONS, _plugin.ENV_NUM_DEVICES):
        monkeypatch.delenv(k, raising=False)


def test_find_plugin_cpu(monkeypatch):
    _clean_plugin_env(monkeypatch)
    if _plugin._find_known(("tpu", "cuda")) is not None:
        monkeypatch.setenv(_plugin.ENV_PLUGIN, "cpu")
    path, kind, opts = _plugin.find_plugin()
    assert kind == "cpu" and path.endswith("xla_cpu_pjrt.so") and os.path.isfile(path)
    assert opts == {"cpu_device_count": 1}
    monkeypatch.setenv(_plugin.ENV_NUM_DEVICES, "3")
    monkeypatch.setenv(_plugin.ENV_OPTIONS, "foo=bar")
    _, _, opts = _plugin.find_plugin()
    assert opts == {"cpu_device_count": 3, "foo": "bar"}
    monkeypatch.setenv(_plugin.ENV_OPTIONS, "cpu_device_count=5")
    assert _plugin.find_plugin()[2]["cpu_device_count"] == 5
    monkeypatch.setenv(_plugin.ENV_NUM_DEVICES, "zero")
    with pytest.raises(ValueError):
        _plugin.find_plugin()


def test_find_plugin_explicit_path(monkeypatch, tmp_path):
    _clean_plugin_env(monkeypatch)
    cpu = _plugin._find_known(("cpu",))
    assert cpu is not None, "xla-cpu-pjrt is not installed"
    monkeypatch.setenv(_plugin.ENV_PLUGIN, cpu[0])
    assert _plugin.find_plugin() == (cpu[0], "cpu", {"cpu_device_count": 1})
    custom = tmp_path / "libmy_pjrt.so"
    custom.write_bytes(b"")
    monkeypatch.setenv(_plugin.ENV_PLUGIN, str(custom))
    assert _plugin.find_plugin() == (str(custom), "custom", {})
    monkeypatch.setenv(_plugin.ENV_PLUGIN, str(tmp_path / "missing.so"))
    with pytest.raises(_plugin.PluginNotFoundError, match="pip install"):
        _plugin.find_plugin()


def test_find_plugin_none_installed(monkeypatch):
    _clean_plugin_env(monkeypatch)
    monkeypatch.setattr(_plugin, "_KNOWN", (("cpu", "no_such_pkg_for_torch_tpu_tests", "x.so"),))
    with pytest.raises(_plugin.PluginNotFoundError, match="pip install xla-cpu-pjrt"):
        _plugin.find_plugin()


def test_missing_plugin_subprocess(run_python):
    proc = run_python(
        """
        import torch, torch_tpu
        assert not torch.tpu.is_available()
        assert torch.tpu.device_count() == 0
        assert not torch.backends.tpu.is_available()
        assert torch.tpu.default_generators == ()
        torch.manual_seed(0)  # must not fail without a plugin
        try:
            torch.tpu.init()
        except RuntimeError as e:
            print("INIT-ERROR:", e)
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("FACTORY-ERROR:", e)
        """,
        env={"TORCH_TPU_PJRT_PLUGIN": "/nonexistent.so"},
    )
    lines = proc.stdout.splitlines()
    init = [l for l in lines if l.startswith("INIT-ERROR:")]
    factory = [l for l in lines if l.startswith("FACTORY-ERROR:")]
    assert init and "pip install" in init[0] and "/nonexistent.so" in init[0], proc.stdout
    assert factory and "pip install" in factory[0], proc.stdout


# ---------------------------------------------------------------------------------------------------------
# Import behaviour
# ---------------------------------------------------------------------------------------------------------


def _entry_point_dir(tmp_path: Path) -> Path:
    """A directory holding only dist-info metadata that declares torch_tpu's autoload entry point."""
    d = tmp_path / "ep"
    info = d / "torch_tpu_autoload_probe-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-tpu-autoload-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntorch_tpu = torch_tpu:_autoload\n")
    return d


def test_autoload_entry_point(run_python, tmp_path):
    ep = _entry_point_dir(tmp_path)
    pythonpath = os.pathsep.join([str(ep), os.environ.get("PYTHONPATH", "")])
    code = """
        import sys
        import torch
        print("LOADED" if "torch_tpu" in sys.modules and hasattr(torch, "tpu") else "NOT-LOADED")
        if hasattr(torch, "tpu"):
            assert torch.tpu.is_available()
            assert torch.ones(2, device="tpu").is_tpu
        """
    on = run_python(code, env={"PYTHONPATH": pythonpath, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert "LOADED" in on.stdout.split()
    off = run_python(code, env={"PYTHONPATH": pythonpath, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert "NOT-LOADED" in off.stdout.split()


def test_import_is_lazy_and_reimport_safe(run_python):
    run_python(
        """
        import importlib, sys
        import torch, torch_tpu
        assert "torch._dynamo" not in sys.modules, "importing torch_tpu must not import dynamo"
        assert not torch.tpu.is_initialized()
        importlib.reload(torch_tpu)
        assert torch.tpu is sys.modules["torch.tpu"]
        assert torch.ones(3, device="tpu").is_tpu
        torch_tpu._autoload()
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )


def test_no_fork_reuse(run_python):
    # A forked child of an initialized process must not touch the parent's runtime; seeding there
    # (DataLoader workers call torch.manual_seed) must still work.
    run_python(
        """
        import os, torch, torch_tpu
        torch.ones(1, device="tpu")
        pid = os.fork()
        if pid == 0:
            ok = torch.tpu._is_in_bad_fork() and not torch.tpu.is_initialized()
            torch.manual_seed(1)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        """
    )
