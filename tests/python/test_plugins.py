"""Loading each kind of PJRT plugin the way it needs, without its hardware.

* Typed create options: the CUDA plugin rejects an option of the wrong PJRT type (``memory_fraction`` must be a
  float), so values from ``TORCH_TPU_PJRT_OPTIONS`` are converted per known option.
* The CUDA plugin's libraries (nvidia-* wheels) are found and loaded before the plugin; a missing driver or
  library is named in the error. Checked end to end with the CPU plugin standing in for the CUDA one and small
  shared libraries standing in for the driver and the CUDA libraries.
* libtpu's per-process environment derived from RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE, and the hosts'
  addresses exchanged through a c10d store.
* Whether torch's accelerator detection reports tpu.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from torch_tpu import _plugin, _tpu_env

# ---------------------------------------------------------------------------------------------------------
# Typed options
# ---------------------------------------------------------------------------------------------------------


def test_cuda_options_are_typed():
    opts = _plugin.coerce_options(
        "cuda",
        _plugin.parse_options("memory_fraction=1,preallocate=0,visible_devices=3,allocator=bfc,node_id=1"),
    )
    assert opts == {"memory_fraction": 1.0, "preallocate": False, "visible_devices": [3], "allocator": "bfc",
                    "node_id": 1}
    assert type(opts["memory_fraction"]) is float and type(opts["preallocate"]) is bool
    assert type(opts["node_id"]) is int
    opts = _plugin.coerce_options("cuda", _plugin.parse_options("visible_devices=0:2:5,memory_fraction=.75,"
                                                               "preallocate=true"))
    assert opts == {"visible_devices": [0, 2, 5], "memory_fraction": 0.75, "preallocate": True}
    # Python values as a program would pass them.
    assert _plugin.coerce_options("cuda", {"visible_devices": (1, 2), "memory_fraction": 1}) == {
        "visible_devices": [1, 2], "memory_fraction": 1.0}


@pytest.mark.parametrize(
    "text, match",
    [
        ("memory_fraction=lots", "memory_fraction.*float"),
        ("memory_fraction=1.5", r"memory_fraction.*\(0, 1\]"),
        ("memory_fraction=0", r"memory_fraction.*\(0, 1\]"),
        ("preallocate=maybe", "preallocate.*bool"),
        ("preallocate=2", "preallocate.*bool"),
        ("visible_devices=a:b", "visible_devices.*int list"),
        ("visible_devices=true", "visible_devices.*int list"),
        ("allocator=magic", "allocator.*bfc"),
        ("node_id=1.5", "node_id.*int"),
    ],
)
def test_cuda_option_errors(text, match):
    with pytest.raises(ValueError, match=match):
        _plugin.coerce_options("cuda", _plugin.parse_options(text))


def test_cpu_option_typed_and_unknown_options_pass():
    assert _plugin.coerce_options("cpu", {"cpu_device_count": "4", "other": 1.5}) == {"cpu_device_count": 4,
                                                                                    "other": 1.5}
    with pytest.raises(ValueError, match="cpu_device_count"):
        _plugin.coerce_options("cpu", {"cpu_device_count": 0})
    with pytest.warns(UserWarning, match="not a create option the CUDA PJRT plugin is known to take"):
        assert _plugin.coerce_options("cuda", {"mystery": 3}) == {"mystery": 3}


def test_find_plugin_types_options_from_env(monkeypatch, tmp_path):
    fake = tmp_path / "jax_plugins" / "xla_cuda13" / "xla_cuda_plugin.so"
    fake.parent.mkdir(parents=True)
    fake.write_bytes(b"")
    monkeypatch.setenv(_plugin.ENV_PLUGIN, str(fake))
    monkeypatch.setenv(_plugin.ENV_NUM_DEVICES, "2")
    monkeypatch.setenv(_plugin.ENV_OPTIONS, "memory_fraction=1,preallocate=1")
    path, kind, opts = _plugin.find_plugin()
    assert kind == "cuda"
    assert opts == {"preallocate": True, "visible_devices": [0, 1], "memory_fraction": 1.0}
    assert type(opts["memory_fraction"]) is float
    monkeypatch.setenv(_plugin.ENV_OPTIONS, "memory_fraction=x")
    with pytest.raises(ValueError, match="memory_fraction"):
        _plugin.find_plugin()


# ---------------------------------------------------------------------------------------------------------
# CUDA libraries
# ---------------------------------------------------------------------------------------------------------


def _fake_nvidia_tree(root: Path, major: str, with_nvcc: bool = True) -> dict:
    """nvidia/<sub>/lib/<soname> files laid out as the CUDA wheels install them (empty files)."""
    made = {}
    for sub, soname, _ in _plugin._CUDA_LIBRARIES[major]:
        p = root / "nvidia" / sub / "lib" / soname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
        made[soname] = str(p)
    if with_nvcc:
        (root / "nvidia" / ("cu13" if major == "13" else "cuda_nvcc") / "nvvm" / "libdevice").mkdir(parents=True)
    return made


@pytest.mark.parametrize("major", ["13", "12"])
def test_cuda_preload_discovery(monkeypatch, tmp_path, major):
    made = _fake_nvidia_tree(tmp_path, major)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = f"/somewhere/jax_plugins/xla_cuda{major}/xla_cuda_plugin.so"
    libs = _plugin.cuda_preload_libraries(plugin)
    assert libs[0] == ("libcuda.so.1", True, libs[0][2]) and "NVIDIA driver" in libs[0][2]
    got = {os.path.basename(p): (p, req, hint) for p, req, hint in libs[1:]}
    assert set(got) == set(made)
    for soname, (p, required, hint) in got.items():
        assert p == made[soname] and not required
        assert hint.startswith("pip install nvidia-") and f"torch-tpu[cuda{major}]" in hint
    # Load order: the runtime first, cuDNN (which needs the others) last; cublasLt before cublas.
    order = [os.path.basename(p) for p, _, _ in libs[1:]]
    assert order[0].startswith("libcudart") and order[-1] == "libcudnn.so.9"
    assert order.index(f"libcublasLt.so.{major}") < order.index(f"libcublas.so.{major}")
    assert _plugin.cuda_data_dir(major) == str(tmp_path / "nvidia" / ("cu13" if major == "13" else "cuda_nvcc"))


def test_cuda_preload_falls_back_to_sonames(monkeypatch, tmp_path):
    monkeypatch.setattr(_plugin, "_package_dirs", lambda pkg: [])
    libs = _plugin.cuda_preload_libraries("/x/jax_plugins/xla_cuda13/xla_cuda_plugin.so")
    assert [p for p, _, _ in libs[1:]] == [s for _, s, _ in _plugin._CUDA_LIBRARIES["13"]]
    assert _plugin.cuda_preload_libraries("/x/xla_cpu_pjrt/xla_cpu_pjrt.so") == []
    assert _plugin.cuda_preload_libraries("/x/libtpu/libtpu.so") == []


def test_cuda_xla_data_dir(monkeypatch, tmp_path):
    _fake_nvidia_tree(tmp_path, "13")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = "/x/jax_plugins/xla_cuda13/xla_cuda_plugin.so"
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/d")
    set_ = _plugin.prepare_environment(plugin, "cuda")
    want = f"--xla_dump_to=/tmp/d --xla_gpu_cuda_data_dir={tmp_path / 'nvidia' / 'cu13'}"
    assert os.environ["XLA_FLAGS"] == want and set_ == {"XLA_FLAGS": want}
    # A directory the user chose wins.
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_cuda_data_dir=/opt/cuda")
    assert _plugin.prepare_environment(plugin, "cuda") == {}
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_cuda_data_dir=/opt/cuda"


def _compile_shared(path: Path, soname: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / (path.name + ".c")
    src.write_text("int torch_tpu_test_stub_symbol(void) { return 7; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(path), str(src)], check=True)


def _stand_in_cuda_plugin(tmp_path: Path) -> Path:
    """The CPU plugin at the path of a CUDA 13 plugin (torch_tpu treats it as one: kind, preloads, options)."""
    cpu = _plugin._find_known(("cpu",))
    assert cpu is not None, "xla-cpu-pjrt is not installed"
    fake = tmp_path / "plugins" / "jax_plugins" / "xla_cuda13" / "xla_cuda_plugin.so"
    fake.parent.mkdir(parents=True)
    fake.symlink_to(cpu[0])
    return fake


def test_cuda_plugin_without_driver_names_it(run_python, tmp_path):
    fake = _stand_in_cuda_plugin(tmp_path)
    proc = run_python(
        """
        import torch, torch_tpu
        assert torch_tpu.plugin_info()["kind"] == "cuda"
        assert not torch.tpu.is_available()
        try:
            torch.ones(1, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
        """,
        env={"TORCH_TPU_PJRT_PLUGIN": str(fake), "LD_LIBRARY_PATH": str(tmp_path / "nodriver")},
    )
    err = [l for l in proc.stdout.splitlines() if l.startswith("ERROR:")]
    assert err and "NVIDIA driver" in err[0] and "libcuda.so.1" in err[0], proc.stdout


def test_cuda_libraries_preloaded_from_wheels(run_python, tmp_path):
    """A stand-in driver on the library path and stand-in CUDA libraries in an nvidia/cu13/lib tree: every one is
    loaded before the plugin, and those missing are reported with the package that provides them."""
    fake = _stand_in_cuda_plugin(tmp_path)
    driver_dir = tmp_path / "driver"
    _compile_shared(driver_dir / "libcuda.so.1", "libcuda.so.1")
    site = tmp_path / "site"
    present = ["libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"]
    for soname in present:
        _compile_shared(site / "nvidia" / "cu13" / "lib" / soname, soname)
    (site / "nvidia" / "cu13" / "nvvm" / "libdevice").mkdir(parents=True)
    proc = run_python(
        f"""
        import json, os, sys
        sys.path.insert(0, {str(site)!r})
        import torch, torch_tpu
        from torch_tpu import _plugin_state
        info = {{}}
        try:
            info = torch_tpu.plugin_info()
            torch.tpu.device_count()
            info = torch_tpu.plugin_info()
        except Exception as e:
            print("ERROR:", e)
        print("INFO:", json.dumps({{k: info.get(k) for k in ("preloaded", "preload_failed", "kind", "error")}}))
        print("XLA_FLAGS:", os.environ.get("XLA_FLAGS"))
        """,
        env={"TORCH_TPU_PJRT_PLUGIN": str(fake), "LD_LIBRARY_PATH": str(driver_dir), "XLA_FLAGS": None,
             "TORCH_TPU_PJRT_OPTIONS": None},
    )
    out = proc.stdout
    assert f"--xla_gpu_cuda_data_dir={site / 'nvidia' / 'cu13'}" in out, out
    import json

    info = json.loads(next(l for l in out.splitlines() if l.startswith("INFO:"))[5:])
    errors = [l for l in out.splitlines() if l.startswith("ERROR:")]
    if info.get("preloaded") is not None and not info.get("error"):
        # The stand-in plugin started: the preload results are in plugin_info().
        loaded = [os.path.basename(p) for p in info["preloaded"]]
        assert loaded[:1] == ["libcuda.so.1"] and all(s in loaded for s in present), info
        failed = " ".join(info["preload_failed"])
        assert "libnccl.so.2" in failed and "libcudnn.so.9" in failed, info
    else:
        # The plugin refused the CUDA options: the error names the libraries that failed and their packages.
        text = errors[0] if errors else str(info.get("error"))
        assert "libcudnn.so.9 (pip install nvidia-cudnn-cu13 (or torch-tpu[cuda13]))" in text, out
        assert "libcudart.so.13" not in text, out  # it was found in the wheel tree


# ---------------------------------------------------------------------------------------------------------
# libtpu's per-process environment
# ---------------------------------------------------------------------------------------------------------


def test_libtpu_env_single_process_is_empty():
    assert _tpu_env.libtpu_env(0, 0, 1, 1, ["localhost"]) == {}
    assert _tpu_env.apply_libtpu_env({}) == {}
    assert _tpu_env.apply_libtpu_env({"WORLD_SIZE": "1", "RANK": "0"}) == {}


def test_libtpu_env_one_host_four_processes():
    envs = [_tpu_env.libtpu_env(r, r, 4, 4, ["localhost"]) for r in range(4)]
    addresses = "localhost:8476,localhost:8477,localhost:8478,localhost:8479"
    for r, e in enumerate(envs):
        assert e == {
            "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
            "TPU_PROCESS_BOUNDS": "2,2,1",
            "TPU_VISIBLE_CHIPS": str(r),
            "TPU_PROCESS_PORT": str(8476 + r),
            "TPU_PROCESS_ADDRESSES": addresses,
            "CLOUD_TPU_TASK_ID": str(r),
            "TPU_WORKER_ID": "0",
            "TPU_WORKER_HOSTNAMES": "localhost",
        }


def test_libtpu_env_two_hosts_eight_processes():
    hosts = ["10.0.0.1", "10.0.0.2"]
    e = _tpu_env.libtpu_env(6, 2, 8, 4, hosts, base_port=9000)
    assert e["TPU_VISIBLE_CHIPS"] == "2" and e["TPU_PROCESS_PORT"] == "9002"
    assert e["TPU_PROCESS_BOUNDS"] == "2,2,2"  # hosts 1,1,2 times chips 2,2,1
    assert e["CLOUD_TPU_TASK_ID"] == "6" and e["TPU_WORKER_ID"] == "1"
    assert e["TPU_PROCESS_ADDRESSES"].split(",") == [f"{h}:{p}" for h in hosts for p in range(9000, 9004)]
    assert e["TPU_WORKER_HOSTNAMES"] == "10.0.0.1,10.0.0.2"
    e = _tpu_env.libtpu_env(6, 2, 8, 4, hosts, chips_per_host_bounds=(2, 2, 1), host_bounds=(2, 1, 1))
    assert e["TPU_PROCESS_BOUNDS"] == "4,2,1"


def test_libtpu_env_one_process_per_host():
    e = _tpu_env.libtpu_env(1, 0, 2, 1, ["h0", "h1"])
    assert e == {"TPU_PROCESS_PORT": "8476", "TPU_PROCESS_ADDRESSES": "h0:8476,h1:8476", "CLOUD_TPU_TASK_ID": "1",
                 "TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "h0,h1"}
    e = _tpu_env.libtpu_env(1, 0, 2, 1, ["h0", "h1"], chips_per_host_bounds=(2, 2, 1), host_bounds=(1, 1, 2))
    assert e["TPU_PROCESS_BOUNDS"] == "1,1,2" and e["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "2,2,1"


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 0, 6, 4, ["h"]), "multiple of LOCAL_WORLD_SIZE"),
        ((5, 0, 8, 4, ["a", "b"]), "disagree"),
        ((0, 0, 3, 3, ["h"]), "TORCH_TPU_CHIPS_PER_HOST_BOUNDS"),
        ((0, 0, 8, 4, ["only-one"]), "1 host addresses for 2 hosts"),
        ((9, 1, 8, 4, ["a", "b"]), "out of range"),
    ],
)
def test_libtpu_env_errors(args, match):
    with pytest.raises(ValueError, match=match):
        _tpu_env.libtpu_env(*args)


def test_apply_libtpu_env_from_torchrun_variables():
    env = {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "TPU_VISIBLE_CHIPS": "0"}
    set_ = _tpu_env.apply_libtpu_env(env)
    assert "TPU_VISIBLE_CHIPS" not in set_ and env["TPU_VISIBLE_CHIPS"] == "0"  # never overridden
    assert env["TPU_PROCESS_PORT"] == "8479" and env["CLOUD_TPU_TASK_ID"] == "3"
    assert env["TPU_PROCESS_BOUNDS"] == "2,2,1" and env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "1,1,1"
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
           "TORCH_TPU_HOST_ADDRESSES": "a,b", "TORCH_TPU_PROCESS_BASE_PORT": "7000",
           "TORCH_TPU_HOST_BOUNDS": "2,1,1"}
    _tpu_env.apply_libtpu_env(env)
    assert env["TPU_PROCESS_ADDRESSES"] == "a:7000,a:7001,a:7002,a:7003,b:7000,b:7001,b:7002,b:7003"
    assert env["TPU_PROCESS_BOUNDS"] == "4,2,1" and env["TPU_WORKER_ID"] == "1"
    assert _tpu_env.apply_libtpu_env({"WORLD_SIZE": "4", "RANK": "1", "TORCH_TPU_LIBTPU_ENV": "0"}) == {}
    with pytest.raises(ValueError, match="TORCH_TPU_HOST_ADDRESSES"):
        _tpu_env.apply_libtpu_env({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"})
    with pytest.raises(ValueError, match="TORCH_TPU_CHIPS_PER_HOST_BOUNDS"):
        _tpu_env.apply_libtpu_env({"RANK": "0", "WORLD_SIZE": "2", "TORCH_TPU_CHIPS_PER_HOST_BOUNDS": "2,x,1"})


def test_host_addresses_exchanged_through_store():
    """Two hosts of two processes each, as threads: each host's first process publishes its address in a c10d
    store on 127.0.0.1; every process derives the same address list and its own port, chip and task id."""
    from torch.distributed import TCPStore

    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    results, errors = {}, []

    def proc(rank):
        try:
            env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 2), "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master.port),
                   "TORCH_TPU_HOST_ADDRESS": f"127.0.0.{10 + rank // 2}"}
            _tpu_env.apply_libtpu_env(env)  # a client of the store at MASTER_ADDR:MASTER_PORT
            results[rank] = env
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=proc, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    want = "127.0.0.10:8476,127.0.0.10:8477,127.0.0.11:8476,127.0.0.11:8477"
    for r in range(4):
        e = results[r]
        assert e["TPU_PROCESS_ADDRESSES"] == want
        assert e["TPU_VISIBLE_CHIPS"] == str(r % 2) and e["TPU_PROCESS_PORT"] == str(8476 + r % 2)
        assert e["CLOUD_TPU_TASK_ID"] == str(r) and e["TPU_WORKER_ID"] == str(r // 2)
        assert e["TPU_PROCESS_BOUNDS"] == "1,2,2"  # hosts 1,1,2 times chips 1,2,1


def test_libtpu_env_set_before_plugin_loads(run_python, tmp_path):
    """With a plugin of kind tpu, importing torch_tpu sets the variables (the plugin reads them when it starts)."""
    cpu = _plugin._find_known(("cpu",))
    fake = tmp_path / "libtpu" / "libtpu.so"
    fake.parent.mkdir()
    fake.symlink_to(cpu[0])
    proc = run_python(
        """
        import os, torch_tpu
        print("KIND", torch_tpu.plugin_info()["kind"])
        for k in ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_PORT", "TPU_PROCESS_BOUNDS", "CLOUD_TPU_TASK_ID"):
            print(k, os.environ.get(k))
        """,
        env={"TORCH_TPU_PJRT_PLUGIN": str(fake), "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
             "LOCAL_WORLD_SIZE": "2"},
    )
    lines = set(proc.stdout.splitlines())
    assert {"KIND tpu", "TPU_VISIBLE_CHIPS 1", "TPU_PROCESS_PORT 8477", "TPU_PROCESS_BOUNDS 1,2,1",
            "CLOUD_TPU_TASK_ID 1"} <= lines, proc.stdout


# ---------------------------------------------------------------------------------------------------------
# torch's accelerator detection
# ---------------------------------------------------------------------------------------------------------


def test_reports_accelerator(monkeypatch):
    monkeypatch.delenv(_plugin.ENV_ACCELERATOR, raising=False)
    assert not _plugin.reports_accelerator("cpu")
    assert _plugin.reports_accelerator("tpu") and _plugin.reports_accelerator("cuda")
    assert _plugin.reports_accelerator("custom")
    monkeypatch.setenv(_plugin.ENV_ACCELERATOR, "1")
    assert _plugin.reports_accelerator("cpu")
    monkeypatch.setenv(_plugin.ENV_ACCELERATOR, "0")
    assert not _plugin.reports_accelerator("tpu")


@pytest.mark.parametrize("flag, want", [(None, "cpu"), ("0", "cpu"), ("1", "tpu")])
def test_accelerator_detection_on_cpu_plugin(run_python, flag, want):
    proc = run_python(
        """
        import torch, torch_tpu
        assert torch.tpu.is_available() and torch.ones(2, device="tpu").is_tpu  # the device works either way
        print("ACC", torch._C._get_accelerator().type)
        """,
        env={"TORCH_TPU_ACCELERATOR": flag, "TORCH_TPU_PJRT_PLUGIN": "cpu"},
    )
    assert f"ACC {want}" in proc.stdout.split("\n"), proc.stdout
