"""``python -m torch_tpu``: what torch-tpu runs on, and whether it works.

Prints the torch and torch-tpu versions, the PJRT plugin (path, kind, C API version, platform, StableHLO versions,
create options in force, libraries loaded before it), the devices and their memory, the executable cache (directory,
size, statistics), the environment variables that matter, then runs a self-test (a few ops and a tiny
``torch.compile(backend="tpu")`` graph, each compared with the CPU) and ends with ``PASS`` or ``FAIL``.

Exit status: 0 when every check passes, 1 when the plugin cannot be loaded or a check fails, 2 for bad usage.

Options: ``--json`` prints one JSON object instead (for scripts); ``--no-self-test`` only reports;
``--settings-doc [PATH]`` prints (or writes to PATH) docs/settings.md, the list of every setting.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

# Variables that change what torch-tpu does (prefixes and names).
_ENV_PREFIXES = ("TORCH_TPU_", "PJRT_", "TPU_", "LIBTPU_", "XLA_", "JAX_", "CLOUD_TPU_")
_ENV_NAMES = (
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "TF_CPP_MIN_LOG_LEVEL",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


def _environment() -> Dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def _dir_size(path: str) -> Tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(root, n))
                files += 1
            except OSError:
                pass
    return total, files


def _human(n: Optional[int]) -> str:
    if n is None or n < 0:
        return "unknown"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return str(n)


# ---------------------------------------------------------------------------------------------------------
# Self-test
# ---------------------------------------------------------------------------------------------------------


def _close(a: Any, b: Any, tol: float = 1e-4) -> None:
    import torch

    torch.testing.assert_close(a.cpu(), b, rtol=tol, atol=tol)


def _check_transfer() -> None:
    import torch

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = x.to("tpu")
    assert y.device.type == "tpu", y.device
    _close(y, x, 0)


def _check_ops() -> None:
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 32, generator=g)
    b = torch.randn(32, 8, generator=g)
    ta, tb = a.to("tpu"), b.to("tpu")
    _close(ta @ tb, a @ b)
    _close((ta * 2 + 1).relu().sum(dim=1), (a * 2 + 1).relu().sum(dim=1))
    _close(torch.softmax(ta, dim=-1), torch.softmax(a, dim=-1))
    _close(torch.nn.functional.layer_norm(ta, (32,)), torch.nn.functional.layer_norm(a, (32,)))
    _close(ta.to(torch.bfloat16).float(), a.to(torch.bfloat16).float(), 0)
    _close(ta.max(dim=0).values, a.max(dim=0).values, 0)


def _check_autograd() -> None:
    import torch

    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 4, generator=g)
    x = torch.randn(5, 8, generator=g)
    wc = w.clone().requires_grad_()
    (x @ wc).tanh().sum().backward()
    wt = w.to("tpu").requires_grad_()
    (x.to("tpu") @ wt).tanh().sum().backward()
    _close(wt.grad, wc.grad)


def _check_random() -> None:
    import torch

    torch.manual_seed(123)
    a = torch.rand(64, device="tpu").cpu()
    torch.manual_seed(123)
    b = torch.rand(64, device="tpu").cpu()
    assert torch.equal(a, b), "manual_seed does not replay tpu random numbers"
    assert 0.0 <= float(a.min()) and float(a.max()) < 1.0, "uniform draws outside [0, 1)"


def _check_compile() -> None:
    import torch

    import torch_tpu

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(6, 16)
    want = model(x)
    before = torch_tpu.compile_stats().get("graphs", 0)
    compiled = torch.compile(model.to("tpu"), backend="tpu", fullgraph=True)
    with torch.no_grad():
        got = compiled(x.to("tpu"))
    _close(got, want.detach())
    assert torch_tpu.compile_stats().get("graphs", 0) > before, "torch.compile did not lower a graph"


SELF_TESTS: List[Tuple[str, Callable[[], None]]] = [
    ("host <-> device copy", _check_transfer),
    ("ops vs CPU (matmul, elementwise, reductions, softmax, layer_norm, bf16)", _check_ops),
    ("autograd vs CPU", _check_autograd),
    ("random numbers (manual_seed replays)", _check_random),
    ('torch.compile(backend="tpu") vs CPU', _check_compile),
]


def self_test() -> List[Dict[str, Any]]:
    results = []
    for name, fn in SELF_TESTS:
        t0 = time.perf_counter()
        try:
            fn()
            ok, err = True, None
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            ok, err = False, f"{type(e).__name__}: {e}"
            from . import _settings

            if _settings.get("TORCH_TPU_DEBUG"):
                err += "\n" + traceback.format_exc()
        results.append({"name": name, "ok": ok, "seconds": round(time.perf_counter() - t0, 3), "error": err})
    return results


# ---------------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------------


def collect(run_self_test: bool = True) -> Dict[str, Any]:
    report: Dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        report["error"] = f"cannot import torch: {e}. Install it: pip install torch"
        report["status"] = "FAIL"
        return report
    report["torch"] = {"version": torch.__version__, "path": os.path.dirname(torch.__file__)}
    try:
        import torch_tpu
    except Exception as e:  # noqa: BLE001
        report["error"] = f"cannot import torch_tpu: {e}"
        report["status"] = "FAIL"
        return report
    from . import _plugin, _plugin_state, device

    build: Dict[str, Any] = {}
    try:
        from . import _build_info

        build = {k: getattr(_build_info, k) for k in dir(_build_info) if k.isupper()}
    except ImportError:
        pass
    report["torch_tpu"] = {
        "version": torch_tpu.__version__,
        "path": os.path.dirname(torch_tpu.__file__),
        "built_with_torch": build.get("TORCH_FULL_VERSION"),
    }
    plugin: Dict[str, Any] = {
        "path": _plugin_state.get("path"),
        "kind": _plugin_state.get("kind"),
        "options": dict(_plugin_state.get("options") or {}),
        "accelerator": bool(_plugin_state.get("accelerator", False)),
        "environment_set": dict(_plugin_state.get("environment") or {}),
    }
    report["plugin"] = plugin
    report["environment"] = _environment()
    error = device._plugin_error
    if error is None:
        n = device.device_count()
        if n == 0:
            error = device._unavailable_message()
    if error is not None:
        if "pip install" not in error:
            error += " " + _plugin.INSTALL_HINT
        plugin["error"] = error
        report["error"] = error
        report["status"] = "FAIL"
        return report

    info = torch_tpu.plugin_info()
    attrs = dict(info.get("attributes") or {})
    plugin.update(
        api_version=info.get("api_version"),
        platform_name=info.get("platform_name"),
        platform_version=info.get("platform_version"),
        stablehlo_current_version=attrs.get("stablehlo_current_version"),
        stablehlo_minimum_version=attrs.get("stablehlo_minimum_version"),
        attributes=attrs,
        preloaded=list(info.get("preloaded") or []),
        preload_failed=list(info.get("preload_failed") or []),
        extensions=list(info.get("extensions") or []),
        device_profiler="torch.profiler (Kineto)" if torch_tpu._C._kineto_plugin_built() else "not built",
    )
    devices = []
    for i in range(n):
        d: Dict[str, Any] = {"index": i}
        try:
            d["name"] = torch.tpu.get_device_name(i)
            raw = device._raw_memory_stats(i)
            d["memory_allocated"] = int(raw.get("allocated", 0))
            d["memory_limit"] = int(raw.get("limit", -1))
            d["memory_from_plugin"] = bool(raw.get("from_plugin", False))
            free, total = torch.tpu.mem_get_info(i)
            d["memory_free"], d["memory_total"] = int(free), int(total)
        except Exception as e:  # noqa: BLE001
            d["error"] = f"{type(e).__name__}: {e}"
        devices.append(d)
    report["devices"] = devices

    from ._dynamo_backend import cache_dir

    cdir = cache_dir()
    size, files = _dir_size(cdir) if cdir and os.path.isdir(cdir) else (0, 0)
    report["cache"] = {
        "directory": cdir or None,
        "bytes": size,
        "files": files,
        "eager_stats": torch_tpu.cache_stats(),
    }
    if run_self_test:
        tests = self_test()
        report["self_test"] = tests
        report["cache"]["eager_stats"] = torch_tpu.cache_stats()
        report["cache"]["compile_stats"] = torch_tpu.compile_stats()
        fallbacks = torch_tpu.fallback_counts()
        if fallbacks:
            report["self_test_fallbacks"] = fallbacks
        report["status"] = "PASS" if all(t["ok"] for t in tests) else "FAIL"
    else:
        report["status"] = "PASS"
    return report


def _print_text(r: Dict[str, Any], out: Any) -> None:
    def line(k: str, v: Any) -> None:
        print(f"  {k:<26} {v}", file=out)

    print("torch-tpu environment", file=out)
    line("python", f"{r.get('python')} ({r.get('platform')})")
    if "torch" in r:
        line("torch", f"{r['torch']['version']}  {r['torch']['path']}")
    if "torch_tpu" in r:
        t = r["torch_tpu"]
        line("torch-tpu", f"{t['version']}  {t['path']}  (built with torch {t.get('built_with_torch') or '?'})")
    p = r.get("plugin")
    if p:
        print("PJRT plugin", file=out)
        line("path", p.get("path"))
        line("kind", p.get("kind"))
        for key in ("api_version", "platform_name", "platform_version", "stablehlo_current_version",
                    "stablehlo_minimum_version"):
            if key in p:
                line(key.replace("_", " "), p[key])
        line("create options", p.get("options"))
        line("torch accelerator", "tpu" if p.get("accelerator") else "not reported (TORCH_TPU_ACCELERATOR=1 to report)")
        if p.get("environment_set"):
            line("environment set", p["environment_set"])
        if p.get("preloaded"):
            line("libraries preloaded", len(p["preloaded"]))
        for f in p.get("preload_failed") or []:
            line("library not loaded", f)
        if "extensions" in p:
            line("PJRT extensions", ", ".join(p["extensions"]) or "none")
        if "device_profiler" in p:
            line("device profiler", p["device_profiler"])
    if "devices" in r:
        print(f"Devices ({len(r['devices'])})", file=out)
        for d in r["devices"]:
            if "error" in d:
                line(f"tpu:{d['index']}", d["error"])
                continue
            src = "plugin" if d.get("memory_from_plugin") else "torch-tpu accounting"
            line(
                f"tpu:{d['index']}",
                f"{d.get('name')}  allocated {_human(d.get('memory_allocated'))}, free {_human(d.get('memory_free'))}"
                f" of {_human(d.get('memory_total'))} ({src})",
            )
    c = r.get("cache")
    if c:
        print("Executable cache", file=out)
        line("directory", f"{c.get('directory')}  ({_human(c.get('bytes'))} in {c.get('files')} files)")
        line("eager programs", c.get("eager_stats"))
        if "compile_stats" in c:
            cs = c["compile_stats"]
            line("compiled graphs", {k: cs[k] for k in ("graphs", "compiles", "memory_hits", "disk_hits") if k in cs})
    env = r.get("environment") or {}
    print("Environment", file=out)
    if not env:
        line("(none set)", "")
    for k, v in env.items():
        line(k, v)
    if "self_test" in r:
        print("Self-test", file=out)
        for t in r["self_test"]:
            status = "ok  " if t["ok"] else "FAIL"
            print(f"  [{status}] {t['name']} ({t['seconds']:.2f} s)", file=out)
            if t["error"]:
                print(f"         {t['error']}", file=out)
        if r.get("self_test_fallbacks"):
            line("ops run on the CPU fallback", r["self_test_fallbacks"])
    if r.get("error"):
        print(f"Error: {r['error']}", file=out)
    print(r.get("status", "FAIL"), file=out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    parser.add_argument("--no-self-test", action="store_true", help="report only; run no ops")
    parser.add_argument("--settings-doc", nargs="?", const="-", metavar="PATH",
                        help="print (or write to PATH) the list of settings, docs/settings.md")
    args = parser.parse_args(argv)
    if args.settings_doc is not None:
        from ._settings import markdown

        text = markdown()
        if args.settings_doc == "-":
            sys.stdout.write(text)
        else:
            with open(args.settings_doc, "w") as f:
                f.write(text)
        return 0
    report = collect(run_self_test=not args.no_self_test)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
    else:
        _print_text(report, sys.stdout)
    return 0 if report.get("status") == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
