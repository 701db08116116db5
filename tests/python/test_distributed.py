"""The c10d backend ``tpu_dist`` on the real CPU plugin.

* Host transport: real processes (spawn, TCPStore on 127.0.0.1), 2 and 4 ranks, every run bounded in time:
  every collective x (float32, bfloat16, int64) x reduce ops against Gloo on CPU copies (bitwise), sub-groups and
  a 2-D device mesh, the three ways to initialize, a rank that dies and a mismatched shape (clear errors, no
  hang), DDP / FSDP2 / tensor parallel training equal to one process.
* XLA transport: ranks as threads of one process, one virtual device each (collectives are XLA programs): the
  same collective checks, training equalities, errors, and functional collectives in torch.compile graphs.
* Hugging Face: ``from_pretrained(..., tp_plan="auto")`` under torchrun with 2 and 4 processes generates the
  tokens of one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

import dist_jobs
from torch_tpu.distributed import run_ranks_as_threads
from torch_tpu.testing.dist import free_port, run_processes

LOSS_TOL = 1e-5
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _no_failures(results):
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n".join(failures[:40])


def _check_training(res, modes):
    ref = res[0]
    for mode in modes:
        want = ref["tp_reference"] if mode == "tp" else ref["reference"]
        for rank, r in enumerate(res):
            got = r[mode]
            assert len(got) == len(want) == 10
            worst = max(abs(a - b) for a, b in zip(got, want))
            assert worst <= LOSS_TOL, f"{mode} rank {rank}: losses {got} vs one process {want} (max diff {worst})"


def test_backend_registered():
    assert "tpu_dist" in dist.Backend.backend_list
    assert dist.Backend.backend_capability["tpu_dist"] == ["tpu", "cpu"]
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"


# ---------------------------------------------------------------------------------------------------- host


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_host_transport(world):
    res = run_processes(dist_jobs.collectives_job, world, args=(True, world == 4), timeout=240)
    assert all(r["transport"] == "host" for r in res)
    _no_failures(res)


@pytest.mark.parametrize("world", [2, 3])
def test_same_host_direct_allreduce(world):
    res = run_processes(dist_jobs.direct_allreduce_job, world, timeout=240)
    _no_failures(res)
    n = len(dist_jobs._DIRECT_CASES)
    for r in res:
        # every large all_reduce took the direct path (the strided row too); the small one went through Gloo
        assert r["direct"] == [1] * n + [0, 1], r["direct"]
        assert r["digests"] == res[0]["digests"], "ranks differ bitwise"


def test_mismatch_between_gloo_and_direct_sizes_is_an_error_on_every_rank():
    # 160 KB on rank 0 (a Gloo-sized all_reduce), 320 KB on rank 1 (direct-sized): still one clear error.
    res = run_processes(dist_jobs.mismatch_job, 2, args=(40_000,), timeout=60)
    for r in res:
        assert r is not None and "does not match across ranks" in r, r
        assert "[40000]" in r and "[80000]" in r, r


def test_direct_allreduce_can_be_turned_off():
    res = run_processes(dist_jobs.direct_allreduce_job, 2, timeout=240, env={"TORCH_TPU_DIST_DIRECT": "0"})
    _no_failures(res)
    assert all(r["direct"] == [0] * (len(dist_jobs._DIRECT_CASES) + 2) for r in res), [r["direct"] for r in res]


def test_init_variants():
    variants = ["tpu_dist", "device_id", "cpu:gloo,tpu:tpu_dist"]
    res = run_processes(dist_jobs.init_variants_job, 2, args=(free_port(), variants), backend=None, timeout=120)
    for r in res:
        for v in variants:
            assert r[v]["value"] == [3.0, 3.0] and r[v]["transport"] == "host", (v, r[v])
        assert r["tpu_dist"]["backend"] == "tpu_dist"
        assert r["cpu:gloo,tpu:tpu_dist"]["cpu_value"] == [3.0, 3.0]


def test_init_without_backend_on_the_accelerator():
    # init_process_group() picks the backend of torch's accelerator: tpu is one on TPU and GPU plugins, and on the
    # CPU plugin with TORCH_TPU_ACCELERATOR=1.
    res = run_processes(dist_jobs.init_variants_job, 2, args=(free_port(), ["None"]), backend=None, timeout=120,
                        env={"TORCH_TPU_ACCELERATOR": "1"})
    for r in res:
        assert r["None"]["value"] == [3.0, 3.0] and r["None"]["transport"] == "host", r


def test_rank_that_dies_is_an_error():
    res = run_processes(dist_jobs.dies_job, 2, timeout=60, allow_failures=[1])
    assert res[0] is not None, "the surviving rank saw no error"
    assert "Connection" in res[0] or "closed" in res[0] or "reset" in res[0], res[0]


def test_mismatched_shapes_are_an_error_on_every_rank():
    res = run_processes(dist_jobs.mismatch_job, 2, timeout=60)
    for r in res:
        assert r is not None and "does not match across ranks" in r, r
        assert "[4]" in r and "[8]" in r, r


@pytest.mark.parametrize("world", [2, 4])
def test_training_equals_one_process_host_transport(world):
    modes = ("ddp", "fsdp2", "tp") if world == 2 else ("ddp", "fsdp2")
    res = run_processes(dist_jobs.training_job, world, args=(modes,), timeout=480)
    _check_training(res, modes)


def test_ddp_comm_hook_and_no_sync_host_transport():
    res = run_processes(dist_jobs.ddp_features_job, 2, timeout=300)
    for r in res:
        assert max(abs(a - b) for a, b in zip(r["plain"], r["hooked"])) <= LOSS_TOL, r
        assert r["differ_in_no_sync"] and r["equal_after"], r


# ---------------------------------------------------------------------------------------------------- xla


def test_collectives_xla_transport():
    res = run_ranks_as_threads(dist_jobs.collectives_job, 2, args=(False,))
    assert all(r["transport"] == "xla" for r in res)
    _no_failures(res)


def test_collectives_xla_transport_4_devices(run_python):
    # Four virtual devices need a fresh process (the session has two).
    proc = run_python(
        """
        import json, sys
        sys.path.insert(0, "tests/python")
        import dist_jobs
        from torch_tpu.distributed import run_ranks_as_threads
        res = run_ranks_as_threads(dist_jobs.collectives_job, 4, args=(False, True))
        print("RESULT", json.dumps(res))
        """,
        env={"TORCH_TPU_NUM_DEVICES": "4"},
        timeout=300,
    )
    res = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert all(r["transport"] == "xla" for r in res)
    _no_failures(res)


def test_init_empty_weights_in_one_rank_thread_leaves_the_others_alone():
    """accelerate's init_empty_weights (every from_pretrained) patches nn.Module.register_parameter for the whole
    process; under run_ranks_as_threads the patch applies only to the rank thread inside the context."""
    import threading

    import accelerate

    entered, done = threading.Event(), threading.Event()
    original = torch.nn.Module.register_parameter

    def job(rank, world):
        if rank == 1:
            with accelerate.init_empty_weights():
                entered.set()
                assert done.wait(60)
                return str(torch.nn.Linear(2, 2).weight.device)
        assert entered.wait(60)
        try:
            return str(torch.nn.Linear(2, 2).weight.device)  # built while rank 1 is inside the context
        finally:
            done.set()

    assert run_ranks_as_threads(job, 2) == ["cpu", "meta"]
    assert torch.nn.Module.register_parameter is original
    # Outside rank threads accelerate's context works as it always does.
    with accelerate.init_empty_weights():
        assert torch.nn.Linear(2, 2).weight.device.type == "meta"
    assert torch.nn.Linear(2, 2).weight.device.type == "cpu" and torch.nn.Module.register_parameter is original


def test_training_equals_one_process_xla_transport():
    modes = ("ddp", "fsdp2", "tp")
    res = run_ranks_as_threads(dist_jobs.training_job, 2, args=(modes,))
    _check_training(res, modes)


def _xla_mismatch(rank, world):
    return dist_jobs.mismatch_job(rank, world)


def _all_reduce_error(rank):
    t = torch.ones(4, device=dist_jobs._device())
    try:
        dist.all_reduce(t)
        return None
    except Exception as e:  # noqa: BLE001
        return str(e)


def test_xla_transport_errors():
    res = run_ranks_as_threads(_xla_mismatch, 2, timeout=30)
    for r in res:
        assert r is not None and "does not match across ranks" in r and "f32[4]" in r and "f32[8]" in r, r


def test_missing_rank_message_xla_transport():
    results = {}

    def job(rank, world):
        if rank == 1:
            return None
        results[rank] = _all_reduce_error(rank)

    run_ranks_as_threads(job, 2, timeout=5)
    assert "did not reach collective" in results[0] and "rank(s) 1" in results[0], results[0]


def test_functional_collectives_in_compiled_graphs():
    # XLA transport: the collectives are compiled inside the graph's program.
    res = run_ranks_as_threads(dist_jobs.compile_job, 2)
    for r in res:
        assert max(r["diffs"]) == 0.0, r
        assert r["program_collectives"] > 0 and r["collective_nodes"] == 0 and r["fallback_nodes"] == 0, r


def test_functional_collectives_split_compiled_graphs_host_transport(monkeypatch):
    # Host transport (here between threads): the graph is split at its collectives, which run through the group.
    monkeypatch.setenv("TORCH_TPU_DIST_TRANSPORT", "host")
    res = run_ranks_as_threads(dist_jobs.compile_job, 2)
    for r in res:
        assert max(r["diffs"]) == 0.0, r
        assert r["collective_nodes"] > 0 and r["program_collectives"] == 0 and r["fallback_nodes"] == 0, r


def _close(a, b, tol=1e-5):
    return (a - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


def _run_job(job: str, world: int, run_python, tmp_path):
    """dist_jobs.<job> on `world` ranks as threads: in this process for 2 ranks (the session's two devices), in a
    fresh interpreter with `world` virtual devices otherwise."""
    if world == 2:
        return run_ranks_as_threads(getattr(dist_jobs, job), world)
    out = tmp_path / "result.pt"
    run_python(
        f"""
        import sys
        sys.path.insert(0, "tests/python")
        import torch, dist_jobs
        from torch_tpu.distributed import run_ranks_as_threads
        torch.save(run_ranks_as_threads(dist_jobs.{job}, {world}), {str(out)!r})
        """,
        env={"TORCH_TPU_NUM_DEVICES": str(world)},
    )
    return torch.load(out)


@pytest.mark.parametrize("world", [2, 4])
def test_compiled_tp_training_step_is_one_program_per_graph(world, run_python, tmp_path):
    # Forward and backward of a compiled (fullgraph) tensor-parallel step each launch exactly ONE program per rank,
    # their all_reduces inside; the whole step compiled as one function (loss.backward() and the update inside,
    # trace_autograd_ops) launches ONE program per rank; both train as one device does.
    res = _run_job("compiled_tp_training_job", world, run_python, tmp_path)
    for rank, r in enumerate(res):
        assert r["fw_launches"] == [1, 1, 1] and r["bw_launches"] == [1, 1, 1], (rank, r)
        assert r["step_launches"] == [1, 1, 1], (rank, r["step_launches"])
        assert r["program_collectives"] >= 2 and r["collective_nodes"] == 0, (rank, r)
        for losses in (r["losses"], r["step_losses"]):
            assert max(abs(a - b) for a, b in zip(losses, res[0]["ref_losses"])) <= 1e-5, (rank, losses)
        for k, w in res[0]["ref_weights"].items():
            assert _close(r["weights"][k], w) and _close(r["step_weights"][k], w), (rank, k)


def _check_dtensor_results(res):
    ref = res[0]
    for rank, r in enumerate(res):
        for got, want in zip(r["infer_outs"], ref["ref_outs"]):
            assert _close(got, want), rank
        assert max(abs(a - b) for a, b in zip(r["step_losses"], ref["ref_losses"])) <= 1e-5, (rank, r["step_losses"])
        for k, w in ref["ref_weights"].items():
            assert _close(r["step_weights"][k], w), (rank, k)


@pytest.mark.parametrize("world", [2, 4])
def test_compiled_dtensor_mlp_is_one_program(world, run_python, tmp_path):
    # parallelize_module (ColwiseParallel / RowwiseParallel) compiled with fullgraph: the DeviceMesh graph inputs
    # are compile-time constants, so an inference step, a whole training step (backward and update inside) and the
    # forward and the backward of a step whose backward autograd runs each launch ONE program per rank.
    res = _run_job("compiled_dtensor_job", world, run_python, tmp_path)
    for rank, r in enumerate(res):
        assert r["infer_launches"] == [1, 1, 1], (rank, r["infer_launches"])
        assert r["step_launches"] == [1, 1, 1], (rank, r["step_launches"])
        assert r["fw_launches"] == [1, 1, 1] and r["bw_launches"] == [1, 1, 1], (rank, r)
        assert r["program_collectives"] > 0 and r["collective_nodes"] == 0, (rank, r)
    _check_dtensor_results(res)


def test_compiled_dtensor_step_trace_has_one_program_per_device():
    # Issue 31: "a compiled tensor-parallel step runs, in a profiler trace of one warm step, as two device programs
    # per rank (g0 and g1)". It does not: the ranks are threads of one process, and each rank's Dynamo compiles its
    # own graph (its module and DTensor weights are its own), so the process-wide trace and launch counters hold the
    # two ranks' programs, one per device: "g0" on one device, "g1" on the other (which rank compiles first varies).
    # Per device one warm step -- inference, or a whole training step with backward and update inside -- is ONE
    # program, its collectives inside; nothing else runs (no redistribution, no eager partition, no split).
    import threading

    from torch.profiler import ProfilerActivity, profile

    world = 2
    barrier = threading.Barrier(world + 1, timeout=600)
    out: dict = {}

    def ranks():
        try:
            out["res"] = run_ranks_as_threads(dist_jobs.compiled_dtensor_trace_job, world, args=(barrier,))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            out["err"] = e
            barrier.abort()

    t = threading.Thread(target=ranks)
    t.start()
    traces = {}
    try:
        for name in ("infer", "step"):
            barrier.wait()  # the ranks are warm
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                barrier.wait()
                barrier.wait()  # the step ran on every device
            barrier.wait()
            traces[name] = [(e.name, e.device_index) for e in prof.events()
                            if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    except threading.BrokenBarrierError:
        pass
    t.join()
    if "err" in out:
        raise out["err"]
    res = out["res"]
    assert set(traces) == {"infer", "step"}, traces
    for name, programs in traces.items():
        assert sorted(dev for _, dev in programs) == list(range(world)), (name, programs)  # one per device
        assert all(p[0].startswith("compiled: g") for p in programs), (name, programs)
        assert len({p[0] for p in programs}) == world, (name, programs)  # each rank's own graph
        for rank, r in enumerate(res):
            assert r[name + "_launches"] == 1, (name, rank, r[name + "_launches"])
    for rank, r in enumerate(res):
        assert _close(r["infer_out"], res[0]["ref_infer"]), rank
        assert abs(float(r["step_out"]) - res[0]["ref_step"]) <= LOSS_TOL, (rank, r["step_out"])


def test_rank_threads_see_the_callers_torch_config():
    # torch's config overrides are per thread (context variables): the rank threads run in a copy of the caller's.
    import torch._dynamo

    with torch._dynamo.config.patch(trace_autograd_ops=True):
        seen = run_ranks_as_threads(lambda rank, world: torch._dynamo.config.trace_autograd_ops, 2)
    assert seen == [True, True]
    assert run_ranks_as_threads(lambda rank, world: torch._dynamo.config.trace_autograd_ops, 2) == [False, False]


def test_compiled_graph_with_a_process_group_input():
    # A process group graph input is a constant of the program (its collectives inside, one launch), returned as
    # given where the graph returns it; called with another group, the graph refuses.
    res = run_ranks_as_threads(dist_jobs.group_input_job, 2)
    for r in res:
        assert r["value"] == [3.0] * 4 and r["launches"] == 1 and r["handed"], r
        assert "was compiled for process group" in r["other"], r["other"]


def test_compiled_dtensor_mlp_host_transport_splits(monkeypatch):
    # The host transport cannot run collectives inside a program: the same graphs split at their collectives (more
    # than one launch per step) and still equal one device.
    monkeypatch.setenv("TORCH_TPU_DIST_TRANSPORT", "host")
    res = run_ranks_as_threads(dist_jobs.compiled_dtensor_job, 2)
    for rank, r in enumerate(res):
        assert min(r["infer_launches"]) > 1 and min(r["step_launches"]) > 1, (rank, r)
        assert r["collective_nodes"] > 0 and r["program_collectives"] == 0, (rank, r)
    _check_dtensor_results(res)


@pytest.mark.parametrize("world", [2, 4])
def test_compiled_tp_decode_step_is_one_program(world, run_python, tmp_path):
    # Each greedy decode step of a compiled (fullgraph) tensor-parallel decoder (attention over a KV cache, MLP)
    # launches exactly ONE program per rank, with the tokens and logits of one device.
    res = _run_job("compiled_tp_decode_job", world, run_python, tmp_path)
    for rank, r in enumerate(res):
        # (the first step also makes the weights' transposed copies for the CPU plugin, once: core/packed.h)
        assert r["launches"][1:] == [1] * 4, (rank, r["launches"])
        assert r["program_collectives"] >= 4 and r["collective_nodes"] == 0, (rank, r)
        assert r["tokens"] == res[0]["ref_tokens"], (rank, r["tokens"], res[0]["ref_tokens"])
        assert _close(r["logits"], res[0]["ref_logits"]), rank


# ---------------------------------------------------------------------------------------------------- hf

_HF_SCRIPT = """
import json, sys
import torch, torch_tpu
import torch.distributed as dist
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], tp_plan="auto", dtype=torch.float32)
ids = torch.tensor([[1, 5, 9, 3, 7, 2]], device=model.device)
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
if dist.get_rank() == 0:
    json.dump({"tokens": out.cpu().tolist(), "world": dist.get_world_size(), "device": str(model.device),
               "transport": torch_tpu.distributed.get_transport()}, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    path = tmp_path_factory.mktemp("qwen3")
    cfg = Qwen3Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=4, head_dim=8, max_position_embeddings=64,
                      tie_word_embeddings=False)
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg)
    torch.random.set_rng_state(state)
    model.save_pretrained(path)
    with torch.no_grad():
        ref = model.generate(torch.tensor([[1, 5, 9, 3, 7, 2]]), max_new_tokens=8, do_sample=False)
    return str(path), ref.tolist()


@pytest.mark.parametrize("world", [2, 4])
def test_hf_tp_plan_generate_matches_one_process(world, tiny_qwen3, tmp_path):
    path, want = tiny_qwen3
    script = tmp_path / "generate.py"
    script.write_text(textwrap.dedent(_HF_SCRIPT))
    out = tmp_path / "out.json"
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="1", TORCH_TPU_ACCELERATOR="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--master-addr=127.0.0.1",
           f"--master-port={free_port()}", str(script), path, str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    got = json.loads(out.read_text())
    assert got["world"] == world and got["device"] == "tpu:0" and got["transport"] == "host"
    assert got["tokens"] == want
