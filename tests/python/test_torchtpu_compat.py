"""User code written from Google TorchTPU's documentation, run against this package (docs/coming_from_torchtpu.md).

Device initialization, eager modes, environment variables, kernels by name with registered backward passes,
telemetry, synchronization and the pending fused program, the op tracer, precision controls, the hardware queries
Diffusers' TPU tests use, and a whole script (examples/torchtpu_api.py).
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

import torch_tpu
from torch_tpu import _C, _compat_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def strict_after():
    yield
    torch_tpu.set_eager_mode("strict")
    _C._set_launch_blocking(False)


# ---------------------------------------------------------------------------------------------------------------
# Device initialization


def test_api_tpu_device():
    from torch_tpu import api

    device = api.tpu_device()
    assert device == torch.device("tpu")
    assert torch.tpu.is_initialized()
    t = torch.ones((5, 5)).to(device) + torch.randn((5, 5), device="tpu")
    assert t.device.type == "tpu"
    assert api.tpu_device(1) == torch.device("tpu", 1)
    with pytest.raises(ValueError, match="out of range"):
        api.tpu_device(torch.tpu.device_count())


# ---------------------------------------------------------------------------------------------------------------
# Eager modes


def test_execution_mode_switching(strict_after):
    from torch_tpu._internal import execution_mode as em
    from torch_tpu._internal import sync

    assert em.get_eager_mode() == em.EagerMode.DEFER_NEVER
    x = torch.randn(64, 64)
    xt = x.to("tpu")
    with em.set_eager_mode(em.EagerMode.DEFER_AND_FUSE):
        assert torch_tpu.eager_mode() == "fused"
        y = (xt + 1.0) * 2.0 - 1.0
        assert sync.pending_op_count() >= 3  # recorded, not launched
        torch.testing.assert_close(y.cpu(), (x + 1.0) * 2.0 - 1.0)
    assert em.get_eager_mode() == em.EagerMode.DEFER_NEVER and torch_tpu.eager_mode() == "strict"

    with em.eager_mode(em.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        assert _C._launch_blocking() and torch_tpu.eager_mode() == "strict"
        torch.testing.assert_close((xt * 3).cpu(), x * 3)
    assert not _C._launch_blocking()

    em.eager_mode = em.EagerMode.DEFER_AND_FUSE  # TorchTPU's global form
    assert em.get_eager_mode() == em.EagerMode.DEFER_AND_FUSE
    em.set_eager_mode("DEFER_NEVER")
    assert torch_tpu.eager_mode() == "strict"
    with em.defer_mode(em.DeferMode.DEFER_AND_FUSE):  # the older names
        assert torch_tpu.eager_mode() == "fused"
    with pytest.raises(ValueError, match="eager mode must be one of"):
        em.set_eager_mode("sometimes")


def test_cpu_fallback_mode():
    from torch_tpu._internal import execution_mode as em

    assert em.is_cpu_fallback_enabled()
    with em.cpu_fallback_mode(False):
        assert torch_tpu.fallback_strict()
    assert not torch_tpu.fallback_strict()


# ---------------------------------------------------------------------------------------------------------------
# Synchronization and the pending fused program


def test_sync_and_pending_program_text(strict_after):
    from torch_tpu._internal import sync as tpu_sync

    torch_tpu.set_eager_mode("fused")
    a = torch.randn(8, 8, device="tpu")
    b = (a.sin() * 2).exp()
    text = tpu_sync.computation_mlir(b)
    assert "func.func public @main" in text and "stablehlo.sine" in text and "stablehlo.exponential" in text
    assert tpu_sync.pending_op_count() >= 3
    tpu_sync.synchronize(None, wait=False)  # launches the recorded program
    assert tpu_sync.pending_op_count() == 0 and tpu_sync.computation_mlir(b) == ""
    c = b + 1
    tpu_sync.synchronize([c], wait=True)
    assert tpu_sync.pending_op_count() == 0
    torch.testing.assert_close(c.cpu(), (a.cpu().sin() * 2).exp() + 1)
    tpu_sync.synchronize(torch.ones(2))  # CPU tensors: nothing to do
    with pytest.raises(TypeError, match="takes tensors"):
        tpu_sync.synchronize([c, 3])


# ---------------------------------------------------------------------------------------------------------------
# Environment variables: one precedence rule (ours win), unit-tested on a dict, then end to end


def test_env_aliases_and_precedence():
    env = {"TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_DEFER_AND_FUSE": "1"}
    assert _compat_env.apply(env) == {"TORCH_TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_EAGER_MODE": "fused"}
    env = {"TPU_DEFER_AND_FUSE": "true"}
    _compat_env.apply(env)
    assert env["TORCH_TPU_EAGER_MODE"] == "fused"

    env = {"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_EAGER_MODE": "strict"}
    with pytest.warns(UserWarning, match="TORCH_TPU_EAGER_MODE='strict' is set and takes precedence"):
        assert _compat_env.apply(env) == {}
    assert env["TORCH_TPU_EAGER_MODE"] == "strict"

    env = {"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT": "/data/cc", "TORCH_TPU_TIER2_COMPILATION_CACHE": "mine"}
    with pytest.warns(UserWarning, match="one disk cache tier"):
        _compat_env.apply(env)
    assert env["TORCH_TPU_CACHE_DIR"] == "/data/cc"
    env = {"TORCH_TPU_TIER2_COMPILATION_CACHE": "mine"}
    _compat_env.apply(env)
    assert env["TORCH_TPU_CACHE_DIR"] == os.path.join(_compat_env.TIER2_ROOT, "mine")
    env = {"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT": "gs://bucket/cc"}
    with pytest.warns(UserWarning, match="remote compilation cache has no equivalent"):
        assert _compat_env.apply(env) == {}
    env = {"TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT": "/a", "TORCH_TPU_CACHE_DIR": "/b"}
    with pytest.warns(UserWarning, match="TORCH_TPU_CACHE_DIR='/b' is set and takes precedence"):
        _compat_env.apply(env)
    assert env["TORCH_TPU_CACHE_DIR"] == "/b"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compat_env.apply({"TORCH_TPU_EAGER_MODE": "fused", "TPU_DEFER_AND_FUSE": "1"}) == {}  # agree


def test_xla_options_variable():
    assert _compat_env.parse_xla_options("xla_optimization_level=O3, --xla_cpu_enable_fast_math=false") == [
        ("xla_backend_optimization_level", "3"), ("xla_cpu_enable_fast_math", "false")]
    plugin = torch_tpu.plugin_info()["path"]
    env = {"TORCH_TPU_INTERNAL_XLA_OPTIONS": "xla_optimization_level=O1,xla_no_such_option_here=1",
           "XLA_FLAGS": "--xla_dump_hlo_as_text"}
    with pytest.warns(UserWarning, match="no XLA option 'xla_no_such_option_here'"):
        added = _compat_env.apply_xla_options(plugin, env)
    assert added == {"xla_backend_optimization_level": "1"}
    assert env["XLA_FLAGS"] == "--xla_dump_hlo_as_text --xla_backend_optimization_level=1"
    env = {"TORCH_TPU_INTERNAL_XLA_OPTIONS": "xla_optimization_level=O2",
           "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    with pytest.warns(UserWarning, match="XLA_FLAGS sets --xla_backend_optimization_level=0 and takes precedence"):
        assert _compat_env.apply_xla_options(plugin, env) == {}


def test_env_aliases_take_effect(run_python, tmp_path):
    tier3 = tmp_path / "tier3"
    proc = run_python(
        """
        import torch, torch_tpu
        from torch_tpu._internal import execution_mode as em
        x = torch.randn(4, device="tpu")
        print(em.get_eager_mode().name, torch_tpu.cache_stats()["disk"]["dir"])
        import os; print(os.environ["XLA_FLAGS"])
        """,
        env={"TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_LAUNCH_BLOCKING": None, "TORCH_TPU_EAGER_MODE": None,
             "TORCH_TPU_CACHE_DIR": None, "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT": str(tier3),
             "TORCH_TPU_INTERNAL_XLA_OPTIONS": "xla_optimization_level=O0", "XLA_FLAGS": None},
    )
    lines = proc.stdout.split("\n")
    assert lines[0] == f"DEFER_NEVER_AND_LAUNCH_BLOCKING {tier3}", proc.stdout
    assert lines[1] == "--xla_backend_optimization_level=0"
    proc = run_python(
        "import torch, torch_tpu; print(torch_tpu.eager_mode())",
        env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_EAGER_MODE": None},
    )
    assert proc.stdout.strip() == "fused"


# ---------------------------------------------------------------------------------------------------------------
# Precision controls


def test_precision_context_is_pytorchs_matmul_precision():
    assert torch.get_float32_matmul_precision() == "highest"
    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        assert torch.get_float32_matmul_precision() == "medium"
        with torch.tpu.precision(torch.tpu.Precision.HIGH):
            assert torch.get_float32_matmul_precision() == "high"
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == "highest"
    with pytest.raises(KeyError):
        with torch.tpu.precision("high"):
            raise KeyError("boom")
    assert torch.get_float32_matmul_precision() == "highest"

    @torch.tpu.precision(torch.tpu.Precision.HIGH)
    def inner():
        return torch.get_float32_matmul_precision()

    assert inner() == "high" and torch.get_float32_matmul_precision() == "highest"

    # The emitted products follow it: an f32 matmul inside the context carries HIGH.
    x = torch.randn(8, 16, device="tpu")
    torch_tpu._C._record_program_texts(True)
    try:
        with torch.tpu.precision(torch.tpu.Precision.HIGH):
            (x @ x.T).cpu()
        texts = torch_tpu._C._recorded_program_texts()
    finally:
        torch_tpu._C._record_program_texts(False)
    dots = [line for t in texts for line in t.splitlines() if "stablehlo.dot_general" in line]
    assert dots and all("#stablehlo<precision HIGH>" in d for d in dots), texts
    with pytest.raises(ValueError, match="torch.tpu.Precision"):
        torch.tpu.precision(3)
    a = torch.randn(16, 16)
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        torch.testing.assert_close((a.to("tpu") @ a.to("tpu")).cpu(), a @ a, rtol=1e-5, atol=1e-5)


def test_allow_excess_precision_is_an_xla_option(run_python):
    assert torch.backends.tpu.allow_excess_precision is True  # XLA's default
    torch.backends.tpu.allow_excess_precision = True  # no change: fine at any time
    with pytest.raises(RuntimeError, match="before the tpu runtime starts"):
        torch.backends.tpu.allow_excess_precision = False
    assert torch.backends.tpu.allow_excess_precision is True
    # Before the runtime starts it becomes the plugin's XLA option; a compiled bfloat16 chain then rounds every
    # intermediate result exactly as eager mode (one program per op) does.
    proc = run_python(
        """
        import os, torch, torch_tpu
        torch.backends.tpu.allow_excess_precision = False
        print(os.environ["XLA_FLAGS"], torch.backends.tpu.allow_excess_precision)
        a = torch.eye(8, dtype=torch.bfloat16, device="tpu") * (1 + 2**-6)
        s = torch.tensor(1 + 2**-7, dtype=torch.bfloat16, device="tpu")
        c = torch.ones(1, device="tpu")
        f = torch.compile(lambda a, s, c: (a * s).float() * c, backend="tpu")
        print(f(a, s, c)[0, 0].item() == ((a * s).float() * c)[0, 0].item() == 1 + 2**-6 + 2**-7)
        """,
        env={"XLA_FLAGS": None, "TORCH_TPU_CACHE_DIR": ""},
    )
    assert proc.stdout.split() == ["--xla_allow_excess_precision=false", "False", "True"], proc.stdout


# ---------------------------------------------------------------------------------------------------------------
# Kernels: TorchTPU's name-first jax_op with register_autograd / register_fake, input_output_aliases, custom_kernel


def test_jax_op_by_name_default_and_registered_backward():
    import jax.numpy as jnp
    from torch_tpu._internal import pallas

    @pallas.jax_op("torchtpu_compat::sin_scale")
    def sin_scale(x, y):
        return jnp.sin(x) * y

    x = torch.randn(3, 4, device="tpu", requires_grad=True)
    y = torch.randn(3, 4, device="tpu", requires_grad=True)
    out = sin_scale(x, y)
    assert isinstance(out, torch.Tensor) and sin_scale.op is not None
    assert torch.ops.torchtpu_compat.sin_scale.default is not None
    out.sum().backward()  # default backward: the function's VJP
    xc, yc = x.detach().cpu(), y.detach().cpu()
    torch.testing.assert_close(x.grad.cpu(), torch.cos(xc) * yc, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.grad.cpu(), torch.sin(xc), rtol=1e-5, atol=1e-5)

    calls = []
    square = pallas.jax_op("torchtpu_compat::square", lambda a: a * a)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        calls.append(grad.device.type)
        (a,) = ctx.saved_tensors
        return grad * 2 * a

    square.register_autograd(backward, setup_context=setup_context)
    fake_calls = []

    @square.register_fake
    def _(a):
        fake_calls.append(1)
        return torch.empty_like(a)

    a = torch.randn(5, device="tpu", requires_grad=True)
    square(a).sum().backward()
    assert calls == ["tpu"]
    torch.testing.assert_close(a.grad.cpu(), 2 * a.detach().cpu())

    # Inside torch.compile: one graph, the op lowered into it (its registered fake gives the shapes).
    torch._dynamo.reset()
    before = torch_tpu.compile_stats()["partitioned_graphs"]
    f = torch.compile(lambda u, v: square(sin_scale(u, v)) + 1, backend="tpu", fullgraph=True)
    u, v = x.detach(), y.detach()
    torch.testing.assert_close(f(u, v).cpu(), (torch.sin(xc) * yc) ** 2 + 1, rtol=1e-5, atol=1e-5)
    assert fake_calls and torch_tpu.compile_stats()["partitioned_graphs"] == before
    # On CPU tensors the function runs with JAX on the host.
    torch.testing.assert_close(sin_scale(xc, yc), torch.sin(xc) * yc, rtol=1e-6, atol=1e-6)

    with pytest.raises(ValueError, match="namespace::name"):
        pallas.jax_op("no_namespace", lambda a: a)


def test_jax_op_in_fused_mode(strict_after):
    # A JAX kernel's program composed into fused eager programs: its functions appear once even when two recorded
    # programs (here a contiguous and a transposed read) call the same kernel.
    import jax.numpy as jnp
    from torch_tpu._internal import pallas
    from torch_tpu._internal import sync as tpu_sync

    k = pallas.jax_op("torchtpu_compat::tanh2", lambda a: jnp.tanh(a) * 2)
    x = torch.randn(4, 4)
    xt = x.to("tpu")
    expected = torch.tanh(x) * 2 + torch.tanh(x.t()) * 2
    torch_tpu.set_eager_mode("fused")
    hits = torch_tpu.cache_stats()["fused"]["hits"]
    for _ in range(3):
        y = k(xt) + k(xt.t())
        assert tpu_sync.computation_mlir(y).count('sym_name = "foreign_') == 1
        torch.testing.assert_close(y.cpu(), expected, rtol=1e-6, atol=1e-6)
        torch_tpu._C._fused_wait()
    assert torch_tpu.cache_stats()["fused"]["hits"] > hits  # the fused program (with the kernel inside) ran


def test_custom_jax_kernel_input_output_aliases():
    from torch_tpu._internal import pallas

    k = pallas.custom_jax_kernel(lambda acc, u: (acc + u, acc * u), input_output_aliases={0: 0})
    acc = torch.ones(4, device="tpu")
    u = torch.full((4,), 3.0, device="tpu")
    new_acc, prod = k(acc, u)
    assert new_acc is acc  # the result was written into the donated input
    torch.testing.assert_close(acc.cpu(), torch.full((4,), 4.0))
    torch.testing.assert_close(prod.cpu(), torch.full((4,), 3.0))
    bad = pallas.custom_jax_kernel(lambda a, b: a[:2] + b[:2], input_output_aliases={0: 0})
    with pytest.raises(ValueError, match="shapes and dtypes must match"):
        bad(torch.ones(4, device="tpu"), torch.ones(4, device="tpu"))
    with pytest.raises(TypeError, match="unsupported jax.jit option"):
        pallas.custom_jax_kernel(lambda a: a, keep_unused=True)


def test_custom_kernel_pallas_body():
    from torch_tpu._internal import pallas

    @pallas.custom_kernel(lambda x, y: torch.empty_like(x), interpret=True)
    def add_vectors(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    x = torch.ones(8, device="tpu")
    y = torch.arange(8.0, device="tpu")
    torch.testing.assert_close(add_vectors(x, y).cpu(), torch.arange(8.0) + 1)


# ---------------------------------------------------------------------------------------------------------------
# Telemetry


def test_telemetry_names():
    x = torch.randn(32, 128, device="tpu")
    _ = (x @ x.T).cpu()
    first = torch.tpu._get_cache_stats()
    x2 = torch.randn(32, 128, device="tpu")
    _ = (x2 @ x2.T).cpu()
    stats = torch.tpu._get_cache_stats()
    assert stats.num_cache_reqs > first.num_cache_reqs
    assert stats.num_cache_hits > first.num_cache_hits  # the same programs again
    assert stats.num_cache_misses == first.num_cache_misses  # nothing compiled
    assert stats["requests"] == torch_tpu.cache_stats()["requests"]
    summary = torch.tpu._hbm_usage_summary()
    assert "tpu:0: in use" in summary and "cached programs" in summary
    assert torch.tpu._get_autocast_dtype() == torch.bfloat16
    assert torch_tpu.cache_stats()["entries"] > 0
    torch.tpu._clear_cache()
    assert torch_tpu.cache_stats()["entries"] == 0
    torch.testing.assert_close((x @ x.T).cpu(), x.cpu() @ x.cpu().T, rtol=1e-5, atol=1e-5)  # rebuilt


def test_per_entry_stats_list_the_programs_held(strict_after):
    """TorchTPU's per-program counters (what vLLM's recompilation check reads): one entry per program the caches
    hold, its launches, the time of the latest, its compile time; gone once the caches drop it."""
    import datetime

    torch_tpu.set_eager_mode("strict")
    x = torch.randn(3, 37, 11, device="tpu")  # a shape no other test uses: sin's program is new here
    torch.tpu.synchronize()
    before = {e.key: e.read_count for e in torch.tpu._get_cache_stats().per_entry_stats}
    start = datetime.datetime.now() - datetime.timedelta(seconds=1)
    y = x.sin()
    torch.tpu.synchronize()
    made = [e for e in torch.tpu._get_cache_stats().per_entry_stats if e.key not in before]
    assert len(made) == 1, made
    sin = made[0]
    assert sin.read_count == 1 and sin.source in ("compiled", "disk")
    assert start <= sin.last_read <= datetime.datetime.now() + datetime.timedelta(seconds=1)
    assert isinstance(sin.compilation_duration, datetime.timedelta)
    assert (sin.compilation_duration > datetime.timedelta(0)) == (sin.source == "compiled")
    for _ in range(4):
        y = x.sin()
    torch.tpu.synchronize()
    now = {e.key: e for e in torch.tpu._get_cache_stats().per_entry_stats}
    assert now[sin.key].read_count == 5 and now[sin.key].last_read >= sin.last_read
    assert all(now[k].read_count == n for k, n in before.items() if k in now)  # nothing else launched
    torch.testing.assert_close(y.cpu(), x.cpu().sin())
    assert "read_count=5" in repr(now[sin.key])
    _C._flush_disk_cache()  # a queued disk-cache write holds the executable until it is written
    torch.tpu._clear_cache()
    assert sin.key not in {e.key for e in torch.tpu._get_cache_stats().per_entry_stats}


# ---------------------------------------------------------------------------------------------------------------
# Debugging utilities


def test_op_tracer_reports_placement_and_fallbacks():
    from torch_tpu._internal.utils import OpTracer, pformat_op_tracer

    x = torch.randn(4, 4, device="tpu")
    z = torch.randn(3, 3).to("tpu")
    with OpTracer() as tracer:
        y = (x @ x).relu()
        w = torch.linalg.eigvals(z)  # no lowering (linalg_eig): runs on the CPU fallback
        c = torch.ones(2) + 1
    by_op = tracer.summary()
    assert by_op["aten::mm"] == {"tpu": 1} and by_op["aten::relu"] == {"tpu": 1}
    assert tracer.fallbacks() == {"aten::linalg_eig": 1}
    assert by_op["aten::add.Tensor"] == {"cpu": 1}
    report = pformat_op_tracer(tracer)
    assert "aten::linalg_eig" in report and "cpu fallback: 1" in report
    assert y.device.type == "tpu" and w.device.type == "tpu" and c.device.type == "cpu"


def test_format_model_and_assert_close():
    from torch_tpu._internal.utils import CheckValueMode, assert_close, format_model

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).to("tpu")
    text = format_model(model)
    assert "0: Linear  [15 elements; float32; tpu:0]" in text and "total parameters: 15" in text

    a = torch.tensor([1.0, 2.0, 0.0])
    assert_close(a.to("tpu"), a)
    assert_close([a.to("tpu"), a], [a, a])
    with pytest.raises(AssertionError, match="Tolerance suggestions"):
        assert_close(a.to("tpu") + 1e-3, a)
    assert_close(a + 1e-3, a, rtol=0.0, atol=2e-3, check_value=CheckValueMode.LOOSE)
    with pytest.raises(AssertionError):  # strict: the relative bound fails at the zero
        assert_close(a + 1e-3, a, rtol=1e-2, atol=2e-3, check_value=CheckValueMode.STRICT)
    assert_close(a + 5.0, a, check_value=CheckValueMode.SKIP)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_close(a.double(), a)
    assert_close(a.double(), a, check_dtype=False)
    assert_close(a + 0.01, a, atol=lambda e: 0.02)


def test_hardware_queries_for_diffusers_tp_tests():
    from torch_tpu._internal.utils import hardware

    assert hardware.get_tpu_device_count() == torch.tpu.device_count() == 2  # conftest's virtual chips
    assert hardware.get_tpu_device_name() == "cpu"
    assert hardware.get_tpu_topology() is None and hardware.get_tpu_version() == hardware.TpuVersion.UNKNOWN


def test_diffusers_tp_worker_imports(run_python):
    # What Diffusers' tests/models/transformers/_tpu_tp_worker.py and its launcher import and call, in a process
    # whose runtime has not started: the chip count comes without starting it.
    proc = run_python(
        """
        import torch_tpu
        from torch_tpu._internal import sync as tpu_sync
        from torch_tpu._internal.utils import hardware
        print(hardware.get_tpu_device_count(), torch_tpu._C._plugin_load_tried())
        import torch
        x = torch.ones(3, device="tpu") * 2
        tpu_sync.synchronize(None, wait=True)
        print(x.sum().item())
        """,
        env={"TORCH_TPU_NUM_DEVICES": "4"},
    )
    assert proc.stdout.split() == ["4", "False", "6.0"], proc.stdout


# ---------------------------------------------------------------------------------------------------------------
# A whole script written against TorchTPU's documented API


def test_torchtpu_api_example_runs_unchanged(run_python):
    with open(os.path.join(REPO, "examples", "torchtpu_api.py")) as f:
        code = f.read()
    proc = run_python(code, env={"TORCH_TPU_CACHE_DIR": ""}, timeout=600)
    assert proc.stdout.rstrip().endswith("OK"), proc.stdout
    assert "TPU Initialization complete. Primary device: tpu" in proc.stdout
