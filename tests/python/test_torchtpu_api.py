"""TorchTPU's public API beyond the basics (docs/coming_from_torchtpu.md), as its users and integrators call it.

The profiler options (``torch.tpu.profiler.TpuProfilerConfig`` through ``torch.profiler.profile``), the Pallas proxy
(``torch.tpu.pallas.jax_op``), ``_internal.precision``, materialization queries, execution-mode contexts, the
16-byte RNG state (round trip, FakeTensorMode, fork_rng, activation checkpointing), ``torch.compile``'s default
backend on tpu tensors, the integrator calls (device properties, ``topology_aware_mesh``, ``torch.accelerator
.synchronize``, ``initial_seed``, ``device`` / ``device_of``). Results are compared with PyTorch on the CPU.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _C


@pytest.fixture
def strict_after():
    yield
    torch_tpu.set_eager_mode("strict")
    _C._set_launch_blocking(False)


# ---------------------------------------------------------------------------------------------------------------
# torch.tpu.profiler


def test_profiler_module_and_config_string():
    import torch_tpu.profiler
    from torch.tpu.profiler import TpuProfilerConfig

    assert dir(torch.tpu.profiler) == ["TpuProfilerConfig"]
    assert sys.modules["torch.tpu.profiler"] is torch_tpu.profiler is torch.tpu.profiler
    cfg = TpuProfilerConfig()
    assert isinstance(cfg, torch.profiler._ExperimentalConfig)
    assert cfg.custom_profiler_config == "host_tracer_level:2,device_tracer_level:1,python_tracer_level:0"
    cfg = TpuProfilerConfig(run_dir="/tmp/a b", worker_rank="3", device_tracer_level=0,
                            experimental_options={"x": 'q"t', "n": 2, "b": True}, check_experimental_options=False)
    assert cfg.custom_profiler_config == (
        'host_tracer_level:2,device_tracer_level:0,python_tracer_level:0,run_dir:/tmp/a b,worker_rank:"3",'
        'x:"q\\"t",n:2,b:true,check_experimental_options:false')
    with pytest.raises(TypeError, match="worker_rank must be a string"):
        TpuProfilerConfig(worker_rank=3)
    with pytest.raises(ValueError, match="cannot clash with stable option"):
        TpuProfilerConfig(experimental_options={"run_dir": "x"}, check_experimental_options=False)
    with pytest.raises(ValueError, match="unrecognized experimental profiler options"):
        TpuProfilerConfig(experimental_options={"enable_hlo_proto": True})
    with pytest.raises(ValueError, match="device_tracer_level must be between 0 and 1"):
        TpuProfilerConfig(device_tracer_level=2)


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def test_profiler_config_controls_the_device_trace(tmp_path):
    from torch.profiler import ProfilerActivity, profile
    from torch.tpu.profiler import TpuProfilerConfig

    x = torch.randn(32, 32, device="tpu")
    (x @ x).sum().item()  # warm-up: compiles outside the trace
    cfg = TpuProfilerConfig(run_dir=tmp_path / "run", worker_rank="1")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg) as prof:
        (x @ x).sum().item()
    names = [e.name for e in _device_events(prof)]
    assert any("aten::mm" in n for n in names), names
    path = cfg.trace_file()
    assert path is not None and os.path.basename(path).endswith("_1.tpu_trace.json")
    with open(path) as f:
        trace = json.load(f)
    programs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert any(e["args"]["op"] == "aten::mm" for e in programs), programs
    assert all(e["dur"] >= 0 for e in programs)

    off = TpuProfilerConfig(device_tracer_level=0, run_dir=tmp_path / "off")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=off) as prof:
        (x @ x).sum().item()
    assert _device_events(prof) == []
    assert any(e.name == "aten::mm" for e in prof.events())  # host activity is still recorded
    assert not os.path.exists(tmp_path / "off")


# ---------------------------------------------------------------------------------------------------------------
# torch.tpu.pallas, _internal.precision


def test_pallas_proxy_is_the_internal_jax_op():
    import jax.numpy as jnp

    import torch_tpu.pallas
    from torch_tpu._internal.pallas import pallas as internal

    assert torch.tpu.pallas.jax_op is internal.jax_op is torch_tpu.pallas.jax_op
    assert dir(torch.tpu.pallas) == ["jax_op"]
    assert sys.modules["torch.tpu.pallas"] is torch_tpu.pallas
    op = torch.tpu.pallas.jax_op("ttapi::scaled_add", lambda a, b: a * 2 + jnp.sin(b), donate_argnums=(0,))
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    out = op(a.to("tpu"), b.to("tpu"))
    torch.testing.assert_close(out.cpu(), a * 2 + b.sin())
    torch.testing.assert_close(torch.ops.ttapi.scaled_add(a, b), a * 2 + b.sin())


def test_internal_precision_module():
    import importlib

    from torch_tpu._internal import precision

    precision_mod = importlib.import_module("torch_tpu._internal.precision.precision")  # the submodule
    assert precision.Precision is torch.tpu.Precision is precision_mod.Precision
    assert precision.precision is torch.tpu.precision
    before = torch.get_float32_matmul_precision()
    with precision.precision(precision.Precision.DEFAULT):
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == before


# ---------------------------------------------------------------------------------------------------------------
# Materialization, execution modes, torch.accelerator.synchronize


def test_is_materialized_and_is_ready(strict_after):
    from torch_tpu._internal import execution_mode as em
    from torch_tpu._internal import sync

    x = torch.randn(16, 16, device="tpu")
    assert sync.is_materialized(x) and not sync.is_materializing(sync_wait(x))
    with em.set_eager_mode(em.EagerMode.DEFER_AND_FUSE):
        y = (x + 1) * 3
        assert not sync.is_materialized(y) and not sync.is_materializing(y) and not sync.is_ready(y)
        sync.synchronize(y, wait=True)
        assert sync.is_materialized(y) and sync.is_ready(y) and not sync.is_materializing(y)
    torch.testing.assert_close(y.cpu(), (x.cpu() + 1) * 3)
    assert sync.is_materialized(torch.ones(3)) and sync.is_ready(torch.ones(3))


def sync_wait(t):
    torch.tpu.synchronize()
    return t


def test_execution_modes_as_contexts(strict_after):
    from torch_tpu._internal import execution_mode as em

    EM = em.EagerMode
    with em.set_eager_mode(EM.INTERNAL_DEFER_ALL):
        assert em.get_eager_mode() == EM.INTERNAL_DEFER_ALL and torch_tpu.eager_mode() == "fused"
        with em.eager_mode(EM.DEFER_NEVER):
            assert em.get_eager_mode() == EM.DEFER_NEVER
            with em.set_eager_mode(EM.DEFER_AND_FUSE):
                assert em.get_eager_mode() == EM.DEFER_AND_FUSE
            assert em.get_eager_mode() == EM.DEFER_NEVER
        assert em.get_eager_mode() == EM.INTERNAL_DEFER_ALL
    assert em.get_eager_mode() == EM.DEFER_NEVER

    @em.eager_mode(EM.DEFER_AND_FUSE)  # a context manager is also a decorator
    def fused_step(t):
        assert torch_tpu.eager_mode() == "fused"
        return (t * 2).sum()

    x = torch.randn(8)
    torch.testing.assert_close(fused_step(x.to("tpu")).cpu(), (x * 2).sum())
    assert em.get_eager_mode() == EM.DEFER_NEVER
    torch_tpu.set_eager_mode("fused")  # switched outside this module: reported from the runtime's state
    assert em.get_eager_mode() == EM.DEFER_AND_FUSE


def test_accelerator_synchronize_materializes_fused_work(run_python):
    # tpu as torch's accelerator (TPU plugins; the CPU plugin with TORCH_TPU_ACCELERATOR=1), as TorchTPU runs.
    proc = run_python(
        """
        import torch, torch_tpu
        from torch_tpu._internal import sync
        assert torch.accelerator.current_accelerator() == torch.device("tpu")
        torch_tpu.set_eager_mode("fused")
        x = torch.randn(64, device="tpu")
        y = x.exp() + 1
        assert sync.pending_op_count() > 0 and not sync.is_materialized(y)
        torch.accelerator.synchronize()
        assert sync.pending_op_count() == 0 and sync.is_ready(y)
        z = y * 2
        torch.accelerator.synchronize(torch.device("tpu", 0))
        assert sync.is_ready(z)
        torch.testing.assert_close(z.cpu(), (x.cpu().exp() + 1) * 2)
        print("OK")
        """,
        env={"TORCH_TPU_ACCELERATOR": "1"},
    )
    assert "OK" in proc.stdout, proc.stderr


# ---------------------------------------------------------------------------------------------------------------
# RNG: TorchTPU's 16-byte state


def test_rng_state_is_sixteen_bytes_and_round_trips():
    torch.tpu.manual_seed(1234)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 1234
    assert int.from_bytes(bytes(state[8:].tolist()), "little") == 0
    a = torch.randn(100, device="tpu").cpu()
    b = torch.rand(7, 3, device="tpu").cpu()
    assert int.from_bytes(bytes(torch.tpu.get_rng_state()[8:].tolist()), "little") == 2  # one key per random op
    torch.tpu.set_rng_state(state)
    torch.testing.assert_close(torch.randn(100, device="tpu").cpu(), a, rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(7, 3, device="tpu").cpu(), b, rtol=0, atol=0)
    # A generator made by the user has the same state format, and distinct seeds give distinct streams.
    g = torch.Generator(device="tpu")
    g.manual_seed(1234)
    assert torch.equal(g.get_state(), state)
    torch.tpu.manual_seed(1235)
    assert not torch.equal(torch.randn(100, device="tpu").cpu(), a)
    with pytest.raises(RuntimeError, match="must be 16 bytes"):
        torch.tpu.set_rng_state(torch.zeros(5056, dtype=torch.uint8))
    assert torch.tpu.initial_seed() == 1235


def test_rng_state_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.tpu.manual_seed(7)
    with FakeTensorMode():
        state = torch.tpu.get_rng_state()
        assert state.shape == (16,) and state.dtype == torch.uint8
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 7


def test_fork_rng_and_checkpoint_replay_dropout():
    from torch.utils.checkpoint import checkpoint

    torch.tpu.manual_seed(3)
    with torch.random.fork_rng(device_type="tpu"):
        inside = torch.rand(8, device="tpu").cpu()
    after = torch.rand(8, device="tpu").cpu()
    assert torch.equal(inside, after)  # fork_rng restored the state it saved

    def block(t):
        return torch.nn.functional.dropout(t.sin(), p=0.5, training=True) * 3

    x = torch.randn(32, 32, device="tpu", requires_grad=True)
    torch.tpu.manual_seed(11)
    ref = block(x)
    ref.sum().backward()
    ref_grad = x.grad.clone()
    x.grad = None
    torch.tpu.manual_seed(11)
    out = checkpoint(block, x, use_reentrant=False)  # the recomputation must replay the same dropout mask
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach().cpu())
    torch.testing.assert_close(x.grad.cpu(), ref_grad.cpu())


# ---------------------------------------------------------------------------------------------------------------
# torch.compile's default backend on tpu tensors


def test_plain_torch_compile_looks_up_the_tpu_backend(monkeypatch, fresh_dynamo):
    import warnings

    import torch._dynamo.backends.registry as registry
    from torch_tpu import _inductor

    if _inductor.mode() != "tpu":
        pytest.fail("this test needs the CPU plugin (inductor's Pallas code generator runs on TPU plugins)")
    looked_up = []
    original = registry.lookup_backend

    def spy(name):
        looked_up.append(name)
        return original(name)

    monkeypatch.setattr(registry, "lookup_backend", spy)

    def f(a, b):
        return (a @ b).relu() + 1

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.compile(f)(a.to("tpu"), b.to("tpu"))
    assert "tpu" in looked_up
    torch.testing.assert_close(out.cpu(), f(a, b))


# ---------------------------------------------------------------------------------------------------------------
# Integrator calls


def test_device_properties_seed_and_device_contexts():
    n = torch.tpu.device_count()
    assert n >= 2
    for i in range(n):
        props = torch.tpu.get_device_properties(i)
        assert props.total_memory > 0 and props.total_memory == torch.tpu.mem_get_info(i)[1]
    torch.tpu.manual_seed(21)
    assert torch.tpu.initial_seed() == 21
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        t = torch.ones(2, device="tpu")
        assert t.device == torch.device("tpu", 1)
    assert torch.tpu.current_device() == 0
    with torch.tpu.device_of(t):
        assert torch.tpu.current_device() == 1
    with torch.tpu.device_of(torch.ones(2)):  # a CPU tensor: no change
        assert torch.tpu.current_device() == 0
    assert torch.backends.tpu.is_built() and torch.backends.tpu.is_available()
    attrs = torch.tpu.get_local_device_attributes(1)
    assert attrs["id"] == _C._device_attributes(1)["id"] and attrs["process_index"] == 0


def test_topology_aware_mesh_needs_a_process_group():
    import torch.distributed as dist

    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="process group must be initialized"):
        torch.tpu.topology_aware_mesh((2,), topology="single_slice")


def _mesh_job(rank, world):
    from torch.distributed.device_mesh import DeviceMesh

    layout = torch.tpu.topology_aware_mesh((1, world))
    hybrid = torch.tpu.topology_aware_mesh((1, 1), topology="multi_slice", dcn_mesh_shape=(world, 1))
    mesh = DeviceMesh("tpu", mesh=layout, mesh_dim_names=("dp", "tp"))
    return layout.tolist(), hybrid.tolist(), mesh.size(1)


def test_topology_aware_mesh_with_ranks():
    from torch_tpu.distributed import run_ranks_as_threads

    results = run_ranks_as_threads(_mesh_job, 2)
    assert results[0] == results[1] == ([[0, 1]], [[0], [1]], 2)


def test_topology_layouts_follow_physical_coordinates():
    from torch_tpu._topology import DeviceInfo, arrange

    # An 8x8 grid of chips whose ids are scattered (in 2x2 blocks, shuffled): adjacent mesh positions must be
    # adjacent chips (torus wrap-around allowed), whatever the ids.
    grid = [[28, 29, 36, 37, 20, 21, 24, 25], [30, 31, 38, 39, 22, 23, 26, 27], [56, 57, 40, 41, 48, 49, 32, 33],
            [58, 59, 42, 43, 50, 51, 34, 35], [4, 5, 8, 9, 52, 53, 60, 61], [6, 7, 10, 11, 54, 55, 62, 63],
            [16, 17, 44, 45, 0, 1, 12, 13], [18, 19, 46, 47, 2, 3, 14, 15]]
    infos = [None] * 64
    for y in range(8):
        for x in range(8):
            i = grid[y][x]
            infos[i] = DeviceInfo(id=i, coords=(x, y, 0), core_on_chip=0, device_kind="TPU v6e", platform="tpu",
                                  process_index=i, slice_index=0)
    mesh = arrange(infos, (8, 8))
    assert sorted(mesh.flatten().tolist()) == list(range(64))

    def hops(r1, r2):
        return sum(abs(a - b) for a, b in zip(infos[r1].coords, infos[r2].coords))

    for i in range(8):
        for j in range(7):
            assert hops(mesh[j, i].item(), mesh[j + 1, i].item()) in (1, 7)
            assert hops(mesh[i, j].item(), mesh[i, j + 1].item()) in (1, 7)
    # Without coordinates: (slice, process, id) order; multi_slice puts each slice in one block of the dcn mesh.
    flat = [DeviceInfo(id=10 + r, coords=None, core_on_chip=0, device_kind="cpu", platform="cpu",
                       process_index=r // 2, slice_index=(r + 4) % 8 // 4) for r in range(8)]
    assert arrange(flat, (2, 4)).tolist() == [[4, 5, 6, 7], [0, 1, 2, 3]]
    assert arrange(flat, (2, 2), topology="multi_slice", dcn_mesh_shape=(1, 2)).tolist() == [
        [4, 5, 0, 1], [6, 7, 2, 3]]
    with pytest.raises(ValueError, match="requires dcn_mesh_shape"):
        arrange(flat, (8,), topology="multi_slice")
    with pytest.raises(ValueError, match="Unknown topology"):
        arrange(flat, (8,), topology="ring")
    with pytest.raises(ValueError, match="has 8 ranks"):
        arrange(flat, (3,))


# ---------------------------------------------------------------------------------------------------------------
# _internal.optim.patch


def _graph_breaks() -> int:
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def test_patch_optimizer_graph_breaks(fresh_dynamo):
    from torch_tpu._internal.optim import patch

    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 4)
    mod = torch.nn.Linear(8, 4).to("tpu")
    mod.load_state_dict(ref.state_dict())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    opt = torch.optim.AdamW(mod.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    original = torch.optim.AdamW.step
    patch.patch_optimizer_graph_breaks()
    try:
        assert torch.optim.AdamW.step is not original

        @torch.compile(backend="tpu")
        def update():
            opt.step()

        for _ in range(2):
            ref_opt.zero_grad()
            ref(x).square().sum().backward()
            ref_opt.step()
            opt.zero_grad()
            mod(x.to("tpu")).square().sum().backward()
            breaks = _graph_breaks()
            update()
            assert _graph_breaks() == breaks  # the update traced without PyTorch's two graph breaks
        torch.testing.assert_close(mod.weight.detach().cpu(), ref.weight.detach(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(mod.bias.detach().cpu(), ref.bias.detach(), atol=1e-5, rtol=1e-5)
    finally:
        patch.unpatch_optimizer_graph_breaks()
    assert torch.optim.AdamW.step is original
