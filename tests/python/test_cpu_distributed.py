"""Installing torch-tpu does not change what a CPU program does.

Distributed code that names no device asks PyTorch for "the accelerator on this machine"
(``torch._C._get_accelerator()``): ``init_process_group()`` without a backend, FSDP2's default mesh, and
Transformers' distributed helpers and FSDP test utilities all pick their device and collectives backend from it.
The host CPU plugin gives tpu devices that are the CPU itself; if torch-tpu reported them as the machine's
accelerator, a CPU FSDP2 run would put its parameters on tpu and call gloo collectives on tpu tensors ("No backend
type associated with device type tpu"). These tests run CPU distributed work (gloo, two processes, a store on
127.0.0.1, FSDP2 ``fully_shard`` on a small CPU model) with torch_tpu imported and its device available.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import REPO_ROOT, _subprocess_env

WORKER = textwrap.dedent(
    r'''
    import copy, json, os, sys
    import torch
    import torch_tpu  # imported (and autoloaded): its device is there
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn


    def device_type():
        # What Transformers' distributed test helpers (and FSDP2's default mesh, and init_process_group without a
        # backend) use: the accelerator PyTorch detects.
        return torch._C._get_accelerator().type


    def make_model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


    def batch(rank):
        g = torch.Generator().manual_seed(100 + rank)
        return torch.randn(4, 8, generator=g)


    def worker(rank, world, port, out):
        from torch.distributed.fsdp import fully_shard

        assert torch.tpu.is_available() and torch.ones(1, device="tpu").is_tpu
        store = dist.TCPStore("127.0.0.1", port, world_size=world, is_master=False)
        dist.init_process_group(store=store, rank=rank, world_size=world)  # no backend named
        info = {"accelerator": device_type(), "backend": dist.get_backend_config()}
        model = make_model()
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)  # default mesh: FSDP2 picks the device from the accelerator
        info["mesh_device"] = model[0].weight.device_mesh.device_type
        info["param_device"] = str(model[0].weight.to_local().device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            model(batch(rank)).pow(2).mean().backward()
            opt.step()
        flag = torch.tensor([rank + 1.0], device=torch.device(device_type()))  # like the test utilities' error flag
        dist.all_reduce(flag)
        info["all_reduce"] = flag.item()
        full = {k: v.full_tensor().detach() for k, v in model.state_dict().items()}
        dist.barrier()
        if rank == 0:
            ref = make_model()
            ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
            for _ in range(2):
                ref_opt.zero_grad()
                # FSDP averages the ranks' gradients: the mean of the per-rank losses.
                sum(ref(batch(r)).pow(2).mean() for r in range(world)).div(world).backward()
                ref_opt.step()
            info["max_diff"] = max((full[k] - v).abs().max().item() for k, v in ref.state_dict().items())
            info["fallbacks"] = torch_tpu.fallback_counts()
            with open(out, "w") as f:
                json.dump(info, f)
        dist.destroy_process_group()


    if __name__ == "__main__":
        out = sys.argv[1]
        store = dist.TCPStore("127.0.0.1", 0, world_size=None, is_master=True, wait_for_workers=False)
        mp.start_processes(worker, args=(2, store.port, out), nprocs=2, start_method="spawn")
        print("DONE")
    '''
)


def _run(tmp_path, extra_env=None):
    script = tmp_path / "fsdp_cpu.py"
    script.write_text(WORKER)
    out = tmp_path / "result.json"
    env = _subprocess_env(extra_env)
    proc = subprocess.run([sys.executable, str(script), str(out)], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    return proc, out


def test_fsdp2_on_cpu_with_torch_tpu_installed(tmp_path):
    proc, out = _run(tmp_path, {"TORCH_TPU_ACCELERATOR": None, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert proc.returncode == 0 and out.exists(), f"{proc.stdout}\n{proc.stderr}"
    info = json.loads(out.read_text())
    assert info["accelerator"] == "cpu"
    assert info["backend"] == "cpu:gloo"
    assert info["mesh_device"] == "cpu" and info["param_device"] == "cpu"
    assert info["all_reduce"] == 3.0
    assert info["max_diff"] < 1e-5, info
    assert info["fallbacks"] == {}  # nothing went through tpu


def test_accelerator_opt_in_still_reports_tpu(run_python):
    """The opt-in keeps the other behaviour available (tpu as the machine's accelerator on the CPU plugin)."""
    proc = run_python(
        """
        import torch, torch_tpu
        from torch.distributed.distributed_c10d import BackendConfig, Backend
        print("ACC", torch._C._get_accelerator().type)
        """,
        env={"TORCH_TPU_ACCELERATOR": "1"},
    )
    assert "ACC tpu" in proc.stdout.splitlines(), proc.stdout
