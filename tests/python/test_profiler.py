"""Device activity in torch.profiler: every program launched on tpu, with its device time and what it came from.

torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) hands Kineto the tpu
activity profiler (csrc/eager/profiler.cpp). Each launched program becomes a device event named after its origin
("eager: aten::mm", "fused: N ops", "compiled: <graph>"), with a duration, linked to the host op that launched it,
and the exported Chrome trace holds them (plus a host "PJRT_LoadedExecutable_Execute" event per launch with a flow
arrow to the device event). Without PrivateUse1 among the activities nothing is traced.
"""

from __future__ import annotations

import json

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _tpu_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def _trace(prof, tmp_path, name="trace.json"):
    path = tmp_path / name
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f)  # valid JSON, as Perfetto and chrome://tracing read it


def _step(x, w):
    return torch.relu(x @ w).sum(0) * 0.5


def test_plugin_is_built():
    assert torch_tpu._C._kineto_plugin_built()
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    assert ProfilerActivity.TPU == ProfilerActivity.PrivateUse1  # PyTorch's alias after the backend's rename


def test_eager_step_shows_device_programs_with_durations_linked_to_ops(tmp_path):
    x = torch.randn(64, 128).to("tpu")
    w = torch.randn(128, 64).to("tpu")
    _step(x, w).cpu()  # compiled before the profile: only launches are measured
    with profile(activities=ACTIVITIES) as prof:
        y = _step(x, w)
        y.cpu()
    dev = _tpu_events(prof)
    names = [e.name for e in dev]
    assert "eager: aten::mm" in names, names
    assert "eager: aten::relu" in names, names
    assert any(n.startswith("eager: aten::mul") for n in names), names
    assert all(e.device_time_total > 0 for e in dev), [(e.name, e.device_time_total) for e in dev]
    # Each device program is linked to the host op that launched it: its device time counts in that op's.
    mm = [e for e in prof.events() if e.name == "aten::mm" and e.device_type == torch.autograd.DeviceType.CPU]
    assert mm and mm[0].device_time_total > 0
    assert any(k.name == "eager: aten::mm" for k in mm[0].kernels)
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=10)
    assert "eager: aten::mm" in table

    trace = _trace(prof, tmp_path)
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    by_name = {e["name"]: e for e in kernels}
    assert "eager: aten::mm" in by_name, sorted(by_name)
    k = by_name["eager: aten::mm"]
    assert k["dur"] > 0 and k["args"]["kind"] == "eager" and k["args"]["op"] == "aten::mm"
    assert k["args"]["device"] == "tpu:0"
    # The device has its own named row, apart from the host process.
    names = [e for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert any(e["pid"] == k["pid"] and e["args"]["name"] == "tpu:0" for e in names), names
    # Host side: the launch call, with a flow arrow to the device program.
    launches = [e for e in events if e.get("name") == "PJRT_LoadedExecutable_Execute"]
    assert len(launches) >= len(kernels) > 0
    assert any(e.get("ph") == "s" and e.get("cat") == "ac2g" for e in events)
    assert any(e.get("ph") == "f" and e.get("cat") == "ac2g" for e in events)


def test_fused_step_shows_one_program_for_the_recorded_ops(tmp_path):
    x = torch.randn(32, 64).to("tpu")
    w = torch.randn(64, 32).to("tpu")
    prev = torch_tpu.eager_mode()
    torch_tpu.set_eager_mode("fused")
    # No speed check: its timed launches alternate with runs op by op, and which launch of the program the profiled
    # step is depends on whether the disk cache already had the program (then even the first step launches it).
    torch_tpu._C._fused_set_speed_check(0, 0.0)
    try:
        for _ in range(3):  # seen, compiled in the background, then launched as one program
            _step(x, w).cpu()
            torch_tpu._C._fused_wait()
        with profile(activities=ACTIVITIES) as prof:
            _step(x, w).cpu()
    finally:
        torch_tpu._C._fused_set_speed_check(-1, 0.0)
        torch_tpu.set_eager_mode(prev)
    dev = _tpu_events(prof)
    fused = [e for e in dev if e.name.startswith("fused: ")]
    assert len(fused) == 1, [e.name for e in dev]
    assert fused[0].name == "fused: 4 ops" and fused[0].device_time_total > 0
    trace = _trace(prof, tmp_path)
    k = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("fused: ")]
    assert len(k) == 1 and k[0]["dur"] > 0
    assert k[0]["args"]["kind"] == "fused"
    assert k[0]["args"]["ops"].split(", ") == ["aten::mm", "aten::relu", "aten::sum.dim_IntList", "aten::mul.Tensor"]


def test_compiled_step_shows_the_graph_program(tmp_path):
    x = torch.randn(16, 32).to("tpu")
    w = torch.randn(32, 16).to("tpu")
    f = torch.compile(_step, backend="tpu", fullgraph=True)
    f(x, w).cpu()
    with profile(activities=ACTIVITIES) as prof:
        f(x, w).cpu()
    dev = _tpu_events(prof)
    graphs = [e for e in dev if e.name.startswith("compiled: ")]
    assert len(graphs) == 1, [e.name for e in dev]
    assert graphs[0].name.endswith(".inference") and graphs[0].device_time_total > 0
    trace = _trace(prof, tmp_path)
    k = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] == graphs[0].name]
    assert len(k) == 1 and k[0]["dur"] > 0
    assert k[0]["args"]["kind"] == "compiled" and k[0]["args"]["graph"] == graphs[0].name[len("compiled: "):]
    assert k[0]["args"]["ops"] == "4 ops"


def test_two_devices_have_their_own_rows(tmp_path):
    a = torch.ones(8, device="tpu:0")
    b = torch.ones(8, device="tpu:1")
    (a + 1).cpu(), (b * 2).cpu()
    with profile(activities=ACTIVITIES) as prof:
        (a + 1).cpu()
        (b * 2).cpu()
    trace = _trace(prof, tmp_path)
    kernels = {e["args"]["device"]: e for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    assert set(kernels) == {"tpu:0", "tpu:1"}
    assert kernels["tpu:0"]["pid"] != kernels["tpu:1"]["pid"]
    rows = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert rows.get(kernels["tpu:0"]["pid"]) == "tpu:0" and rows.get(kernels["tpu:1"]["pid"]) == "tpu:1"


def test_cpu_only_profile_records_no_device_activity(tmp_path):
    x = torch.ones(16, device="tpu")
    (x + 1).cpu()
    with profile(activities=ACTIVITIES):  # registers the device profiler with Kineto
        (x + 1).cpu()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x + 1).cpu()
    assert _tpu_events(prof) == []
    assert any(e.name == "aten::add" for e in prof.events())
    assert not [e for e in _trace(prof, tmp_path)["traceEvents"] if e.get("cat") == "kernel"]
