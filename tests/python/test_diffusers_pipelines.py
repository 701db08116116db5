"""Diffusers pipelines end to end on tpu, and tensor parallelism the Diffusers way.

Pipelines (tests/python/diffusers_pipes.py: tiny random components built from configs, ``save_pretrained`` to a
temporary directory, ``from_pretrained`` from it): Flux and QwenImage text-to-image, Wan text-to-video (SD3 is
covered by test_hf_diffusers.py). Each is checked against the CPU run of the same weights with the same CPU
generator (2 inference steps, latents compared):

* ``pipe.to("tpu")`` eager;
* the transformer compiled (``pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)``), with a
  second call tracing and compiling nothing;
* the transformer sharded with Diffusers' tensor parallelism (``from_pretrained(...,
  parallel_config=TensorParallelConfig(...))`` and ``enable_parallelism``) over 2 and 4 ranks: ranks as threads of
  one process (the CPU plugin's virtual chips, XLA transport) and processes under torchrun (host transport).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import torch_tpu
from torch_tpu.distributed import get_transport, run_ranks_as_threads
from torch_tpu.testing.dist import free_port

import diffusers_pipes as P
from diffusers import TensorParallelConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATOL = 1e-4


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> directory of the saved pipeline, and its CPU latents."""
    out = {}
    for name in P.NAMES:
        d = str(tmp_path_factory.mktemp(name))
        P.save(name, d)
        out[name] = (d, P.run(P.load(name, d), name))
    return out


def _counts():
    s = torch_tpu._dynamo_backend.compile_stats()
    return {k: s[k] for k in ("graphs", "compiles", "lowerings", "runs", "fallback_nodes", "eager_graphs",
                              "partitioned_graphs")}


# ---------------------------------------------------------------------------------------------------- one device


@pytest.mark.parametrize("name", P.NAMES)
def test_pipeline_to_tpu_matches_cpu(saved, name):
    d, want = saved[name]
    pipe = P.load(name, d).to("tpu")
    assert pipe.device.type == "tpu" and pipe.transformer.device.type == "tpu"
    torch_tpu.reset_fallback_counts()
    got = P.run(pipe, name, device="tpu")
    assert torch_tpu._C._fallback_counts() == {}
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", P.NAMES)
def test_pipeline_compiled_transformer_matches_cpu(saved, fresh_dynamo, name):
    d, want = saved[name]
    pipe = P.load(name, d).to("tpu")
    pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
    torch_tpu.reset_fallback_counts()
    torch_tpu._dynamo_backend.reset_compile_stats()
    got = P.run(pipe, name, device="tpu")
    first = _counts()
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    # One graph per traced signature, every step through the compiled program, nothing left to eager.
    assert first["graphs"] >= 1 and first["runs"] >= 2 and first["eager_graphs"] == 0, first
    assert first["fallback_nodes"] == 0 and first["partitioned_graphs"] == 0, first
    # The second call at the same size traces and compiles nothing and gives the same latents.
    torch_tpu._dynamo_backend.reset_compile_stats()
    again = P.run(pipe, name, device="tpu")
    c = _counts()
    assert c["graphs"] == 0 and c["compiles"] == 0 and c["lowerings"] == 0 and c["runs"] == first["runs"], c
    torch.testing.assert_close(again, got, atol=0, rtol=0)
    assert torch_tpu._C._fallback_counts() == {}


# ---------------------------------------------------------------------------------------------------- tensor parallel

# Loading is process-global state in Transformers (its weight-initialization and tied-weight handling while a model
# is built: loaded concurrently, the T5 encoder's tied embedding comes out missing) and in accelerate's
# init_empty_weights (kept to its own thread by run_ranks_as_threads): the rank threads load one at a time (a
# tensor-parallel load issues no collective; the mesh, whose creation is one, is made before).
_LOAD_LOCK = threading.Lock()


def _tp_pipeline_job(rank, world, name, d, compiled):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    device = torch.device("tpu", rank)
    mesh = init_device_mesh("tpu", (world,))
    with _LOAD_LOCK:
        pipe = P.load(name, d, parallel_config=TensorParallelConfig(mesh=mesh))
    pipe = pipe.to(device)
    sharded = [p for p in pipe.transformer.parameters() if isinstance(p, DTensor)]
    out = {"transport": get_transport(), "sharded": len(sharded),
           "local_devices": sorted({str(p.to_local().device) for p in sharded})}
    to_q = pipe.transformer.transformer_blocks[0].attn.to_q.weight  # colwise: each rank holds 1/world of the rows
    out["to_q_rows"] = (to_q.to_local().shape[0], to_q.shape[0])
    if compiled:
        pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
    out["latents"] = P.run(pipe, name, device=device)
    if compiled:
        # The second call of every rank traces and compiles nothing (the counters are the process's: all ranks).
        import torch.distributed as dist

        dist.barrier()
        if rank == 0:
            torch_tpu._dynamo_backend.reset_compile_stats()
        dist.barrier()
        out["again"] = P.run(pipe, name, device=device)
        dist.barrier()
        out["again_counts"] = _counts()
    return out


def _check_tp(res, want, world):
    for rank, r in enumerate(res):
        assert r["transport"] == "xla", r["transport"]
        assert r["sharded"] > 0 and r["local_devices"] == [f"tpu:{rank}"], (rank, r["sharded"], r["local_devices"])
        assert r["to_q_rows"][0] * world == r["to_q_rows"][1], r["to_q_rows"]
        torch.testing.assert_close(r["latents"], want, atol=ATOL, rtol=0, msg=f"rank {rank} of {world}")
        if "again" in r:
            torch.testing.assert_close(r["again"], r["latents"], atol=0, rtol=0)
            c = r["again_counts"]
            assert c["graphs"] == 0 and c["compiles"] == 0 and c["lowerings"] == 0 and c["runs"] > 0, c


@pytest.mark.parametrize("name", ["flux", "qwenimage"])
def test_tp_pipeline_two_rank_threads_matches_cpu(saved, name):
    d, want = saved[name]
    _check_tp(run_ranks_as_threads(_tp_pipeline_job, 2, args=(name, d, False)), want, 2)


@pytest.mark.slow
def test_tp_pipeline_compiled_two_rank_threads_matches_cpu(saved, fresh_dynamo):
    d, want = saved["flux"]
    torch_tpu._dynamo_backend.reset_compile_stats()
    _check_tp(run_ranks_as_threads(_tp_pipeline_job, 2, args=("flux", d, True)), want, 2)
    assert _counts()["eager_graphs"] == 0


@pytest.mark.slow
def test_tp_pipeline_four_rank_threads_matches_cpu(saved, run_python, tmp_path):
    # Four virtual chips need a fresh process (the session has two).
    d, want = saved["flux"]
    torch.save(want, tmp_path / "want.pt")
    run_python(
        f"""
        import sys
        sys.path.insert(0, "tests/python")
        import torch
        import test_diffusers_pipelines as T
        from torch_tpu.distributed import run_ranks_as_threads
        res = run_ranks_as_threads(T._tp_pipeline_job, 4, args=("flux", {d!r}, False))
        T._check_tp(res, torch.load({str(tmp_path / 'want.pt')!r}), 4)
        """,
        env={"TORCH_TPU_NUM_DEVICES": "4"},
        timeout=400,
    )


def _forward(model, inputs, device):
    """The transformer's output on ``device`` for ``inputs`` (moved there), on the host."""
    with torch.no_grad():
        out = model(**{k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()},
                    return_dict=False)[0]
    return out.cpu()


def _one_device(name):
    """The reference for a parallel run: the tiny transformer's output on one tpu, and its weights on the host
    (built from seed 0 without disturbing the caller's random state)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model, inputs = P.tp_transformer(name)
    torch.random.set_rng_state(state)
    want = _forward(model.to("tpu"), inputs, "tpu")
    return want, {k: v.cpu() for k, v in model.state_dict().items()}


def _enable_parallelism_job(rank, world, name, state):
    from torch.distributed.device_mesh import init_device_mesh

    device = torch.device("tpu", rank)
    model, inputs = P.tp_transformer(name)
    model.load_state_dict(state)
    model.enable_parallelism(config=TensorParallelConfig(mesh=init_device_mesh("tpu", (world,))))
    model = model.to(device)
    return _forward(model, inputs, device)


@pytest.mark.parametrize("name", ["flux", "flux2", "qwenimage", "qwenimage21"])
def test_enable_parallelism_two_rank_threads_matches_one_device(name):
    want, sd = _one_device(name)
    for rank, got in enumerate(run_ranks_as_threads(_enable_parallelism_job, 2, args=(name, sd))):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=f"{name} rank {rank}")


def _ulysses_job(rank, world, name, state):
    from torch.distributed.device_mesh import init_device_mesh

    from diffusers import ContextParallelConfig

    device = torch.device("tpu", rank)
    model, inputs = P.tp_transformer(name)
    model.load_state_dict(state)
    model = model.to(device)
    mesh = init_device_mesh("tpu", (1, world, 1), mesh_dim_names=("ring", "ulysses", "fsdp"))
    model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=world, mesh=mesh))
    return _forward(model, inputs, device)


@pytest.mark.parametrize("name", ["flux", "qwenimage", "wan"])
def test_context_parallel_ulysses_two_rank_threads_matches_one_device(name):
    """Context parallelism (Ulysses: the sequence split across ranks, heads exchanged with all_to_all around the
    native attention) equal to one device."""
    want, sd = _one_device(name)
    for rank, got in enumerate(run_ranks_as_threads(_ulysses_job, 2, args=(name, sd))):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=f"{name} rank {rank}")


def _ring_job(rank, world, state, compiled=False):
    from torch.distributed.device_mesh import init_device_mesh

    from diffusers import ContextParallelConfig

    device = torch.device("tpu", rank)
    model, inputs = P.tp_transformer("flux")
    model.load_state_dict(state)
    model = model.to(device)
    model.set_attention_backend("_native_flash")
    mesh = init_device_mesh("tpu", (world, 1, 1), mesh_dim_names=("ring", "ulysses", "fsdp"))
    model.enable_parallelism(config=ContextParallelConfig(ring_degree=world, mesh=mesh))
    if compiled:
        model = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    return _forward(model, inputs, device)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "fullgraph"])
def test_context_parallel_ring_two_rank_threads_matches_one_device(compiled, fresh_dynamo):
    """Ring attention (the sequence split across ranks, each rank's attention merged with the others' through the
    log-sum-exp of aten::_scaled_dot_product_flash_attention, Diffusers' ``_native_flash`` backend) equal to one
    device."""
    want, sd = _one_device("flux")
    for rank, got in enumerate(run_ranks_as_threads(_ring_job, 2, args=(sd, compiled))):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=f"ring rank {rank}")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_flash_attention_op_matches_cpu(causal, dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g).to(dtype) for _ in range(3))
    want_out, want_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal=causal,
                                                                                      scale=0.3)[:2]
    res = torch.ops.aten._scaled_dot_product_flash_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), 0.0, causal,
                                                             False, scale=0.3)
    out, lse = res[0].cpu(), res[1].cpu()
    assert out.dtype == dtype and lse.dtype == torch.float32 and lse.shape == (2, 3, 5)
    assert res[4] == 5 and res[5] == 5
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, want_out, atol=tol, rtol=tol)
    torch.testing.assert_close(lse, want_lse.float(), atol=1e-5, rtol=1e-5)


def test_flash_attention_op_compiled_fullgraph(fresh_dynamo):
    """In compiled graphs the op decomposes into lowered ops (one program, nothing run eagerly)."""
    def f(q, k, v):
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True, False, scale=0.25)[:2]

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g) for _ in range(3))
    want = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal=True, scale=0.25)[:2]
    torch_tpu._dynamo_backend.reset_compile_stats()
    out, lse = torch.compile(f, backend="tpu", fullgraph=True, dynamic=False)(q.to("tpu"), k.to("tpu"), v.to("tpu"))
    c = _counts()
    assert c["graphs"] == 1 and c["fallback_nodes"] == 0 and c["partitioned_graphs"] == 0, c
    torch.testing.assert_close(out.cpu(), want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.cpu(), want[1], atol=1e-5, rtol=1e-5)


def test_flash_attention_op_errors():
    q = torch.randn(1, 2, 4, 8, device="tpu")
    with pytest.raises(NotImplementedError, match="dropout_p must be 0"):
        torch.ops.aten._scaled_dot_product_flash_attention(q, q, q, 0.1)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.ops.aten._scaled_dot_product_flash_attention(q, q.half(), q)


def test_tensor_parallel_rejects_indivisible_heads():
    """A plan that cannot be split evenly fails before anything is sharded, with Diffusers' ValueError."""
    from torch.distributed.device_mesh import init_device_mesh

    def job(rank, world):
        torch.manual_seed(0)
        model = P.flux_transformer(heads=3)
        with pytest.raises(ValueError, match="must divide the number of attention heads"):
            model.enable_parallelism(config=TensorParallelConfig(mesh=init_device_mesh("tpu", (world,))))
        return True

    assert run_ranks_as_threads(job, 2) == [True, True]


_TORCHRUN_SCRIPT = """
import json, sys
import torch, torch_tpu
import torch.distributed as dist
sys.path.insert(0, sys.argv[3])
import diffusers_pipes as P
from diffusers import TensorParallelConfig
dist.init_process_group("tpu_dist")
# The mesh comes from torch's accelerator (tpu with TORCH_TPU_ACCELERATOR=1 on the CPU plugin), as Diffusers documents.
pipe = P.load(sys.argv[1], sys.argv[2], parallel_config=TensorParallelConfig(tp_degree=dist.get_world_size())).to("tpu")
mesh = pipe.transformer._parallel_config.tensor_parallel_config._mesh
latents = P.run(pipe, sys.argv[1], device="tpu")
if dist.get_rank() == 0:
    torch.save(latents, sys.argv[4])
    json.dump({"world": dist.get_world_size(), "mesh_device": mesh.device_type,
               "transport": torch_tpu.distributed.get_transport()}, open(sys.argv[4] + ".json", "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_tp_pipeline_torchrun_matches_cpu(saved, tmp_path, world):
    d, want = saved["flux"]
    script = tmp_path / "tp_pipe.py"
    script.write_text(textwrap.dedent(_TORCHRUN_SCRIPT))
    out = tmp_path / "latents.pt"
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="1", TORCH_TPU_ACCELERATOR="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--master-addr=127.0.0.1",
           f"--master-port={free_port()}", str(script), "flux", d, os.path.join(REPO, "tests", "python"), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    info = json.loads(open(str(out) + ".json").read())
    assert info == {"world": world, "mesh_device": "tpu", "transport": "host"}, info
    torch.testing.assert_close(torch.load(out), want, atol=ATOL, rtol=0)
