"""PyTorch's own device-generic test files on cpu and on tpu, side by side.

    nice -n 10 python tools/torch_suite.py --upstream /path/to/pytorch              # every file, cpu then tpu
    python tools/torch_suite.py --upstream DIR --files test_sort_and_select --check  # one file, fail on new failures
    python tools/torch_suite.py --subset --check                                     # the CI subset
    python tools/torch_suite.py --report-only                                        # re-render the last results

PyTorch's test files (test/test_torch.py, test/test_binary_ufuncs.py, ...) are not in the torch wheel, and this
repository stores none of them: they come from a checkout of github.com/pytorch/pytorch at the tag of the installed
torch (`--upstream DIR`, or `$TORCH_TPU_TORCH_TESTS`; DIR may also be a folder holding the test files themselves).
tests/torch_suite/README.md names the tag and commit (the installed wheel's `torch.version.git_version`), and the
tool warns when a file's SHA-256 differs from the one recorded there for that commit (another version: results may
differ). The files, with tests/torch_suite/conftest.py beside them, are copied into the build directory
(`$TORCH_TPU_BUILD_DIR`, default `build/`) under torch_suite/tree.

Each file then runs in its own pytest process per device, instantiated by PyTorch's
`instantiate_device_type_tests`: `PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu` with backend autoloading off (the baseline)
and `PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1` with torch_tpu imported by the conftest before the test module
(so PyTorch's `PrivateUse1TestBase` exists when common_device_type is imported). The conftest keeps only the
device-generic tests (classes instantiated per device type); the plain TestCase classes run the same CPU code in
both processes and are left out. JUnit results go to build/torch_suite/results/<file>.<device>.xml.

The report (stdout, and `--report FILE`) gives per file the tests that pass on cpu, of those how many pass, fail or
are skipped on tpu, and lists every tpu failure of a cpu-passing test with its error and a category:
  wrong-result    an assertion on values, dtypes, shapes or strides failed (a silent wrong result)
  missing-check   an exception or warning CPU gives was not given on tpu
  error           tpu raised where CPU works
  other           anything else (a crash or timeout of the process is reported per file)
`--check` exits 1 when a failure is not listed in tests/torch_suite/known_failures.py (each entry gives its
category and reason) or a file passes nothing on cpu.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tool_common import REPO, build_dir, first_line, sha256  # noqa: E402

SUITE_DIR = os.path.join(REPO, "tests", "torch_suite")

# file -> what it covers (the order of the table)
FILES = OrderedDict(
    [
        ("test_torch", "tensor basics, storage, serialization, indexing, dtypes"),
        ("test_binary_ufuncs", "binary elementwise ops, type promotion, out="),
        ("test_unary_ufuncs", "unary elementwise ops"),
        ("test_reductions", "reductions"),
        ("test_sort_and_select", "sort, topk, kthvalue, unique"),
        ("test_foreach", "_foreach_* ops"),
        ("test_autograd", "autograd (device-generic part: TestAutogradDeviceType)"),
        ("test_nn", "nn (device-generic part: TestNNDeviceType)"),
        ("test_dlpack", "DLPack export and import"),
        ("test_indexing", "basic and advanced indexing, index_put"),
        ("test_shape_ops", "flip, rot90, nonzero, clamp and other shape ops"),
        ("test_view_ops", "views: view, as_strided, unfold, flatten, dtype views"),
        ("test_type_promotion", "type promotion of ops, out= and sparse tensors"),
        ("test_tensor_creation_ops", "factories: arange, linspace, logspace, full, cat, ..."),
        ("test_segment_reductions", "segment_reduce: lengths, offsets, initial, backward"),
        ("test_scatter_gather_ops", "gather, scatter, scatter_add, scatter_reduce"),
    ]
)

# The CI subset: per file, a pytest -k expression selecting a stable, fast part of the file (device-generic tests
# only, as everywhere). Chosen to take well under three minutes for both devices on an idle 2-core machine.
SUBSET = OrderedDict(
    [
        ("test_sort_and_select", "test_topk or test_sort_1d or test_kthvalue or test_isin"),
        ("test_unary_ufuncs", "test_reference_numerics_normal and (exp or sin or tanh or sqrt or abs) and float32"),
        ("test_binary_ufuncs", "test_reference_numerics and (add or mul or sub) and float32"),
    ]
)

CATEGORIES = OrderedDict(
    [
        ("wrong-result", "silent wrong result: values, dtype, shape or strides differ from CPU's"),
        ("missing-check", "an exception or warning CPU gives is not given on tpu"),
        ("error", "tpu raises where CPU works"),
        ("other", "other"),
    ]
)

_DEVICE_CLASS = re.compile(r"(CPU|PRIVATEUSE1|TPU)$")
_DEVICE_NAME = re.compile(r"_(cpu|privateuse1|tpu)(?=_|$)")


def recorded_hashes() -> dict:
    """file name -> SHA-256 of the upstream file at the recorded commit (tests/torch_suite/README.md's table)."""
    out = {}
    path = os.path.join(SUITE_DIR, "README.md")
    with open(path) as f:
        for line in f:
            m = re.match(r"\|\s*`(test_\w+\.py)`\s*\|\s*`([0-9a-f]{64})`", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


# -- assembling the tree ---------------------------------------------------------------------------------------


def upstream_dir(arg: str | None) -> str:
    """The folder holding PyTorch's test files: --upstream, else $TORCH_TPU_TORCH_TESTS (a checkout's test/)."""
    upstream = arg or os.environ.get("TORCH_TPU_TORCH_TESTS")
    if not upstream:
        raise SystemExit("tools/torch_suite.py needs PyTorch's test files: --upstream DIR (or TORCH_TPU_TORCH_TESTS), "
                         "a checkout of github.com/pytorch/pytorch at the installed torch's tag (see "
                         "tests/torch_suite/README.md), or a folder holding test_torch.py and the others")
    for candidate in (os.path.join(upstream, "test"), upstream):
        if os.path.isfile(os.path.join(candidate, "test_torch.py")) or \
                any(os.path.isfile(os.path.join(candidate, f + ".py")) for f in FILES):
            return candidate
    raise SystemExit(f"{upstream} is not a PyTorch checkout nor a folder of its test files (no test/test_torch.py)")


def assemble(work: str, upstream: str, files) -> str:
    """build/torch_suite/tree: the chosen upstream files and our conftest; returns the tree."""
    tree = os.path.join(work, "tree")
    os.makedirs(tree, exist_ok=True)  # files are replaced, never removed: a run in progress keeps its tree
    hashes = recorded_hashes()
    for name in files:
        src = os.path.join(upstream, name + ".py")
        if not os.path.isfile(src):
            raise SystemExit(f"{src}: not found (PyTorch's test file {name}.py)")
        digest = sha256(src)
        if hashes.get(name + ".py") not in (None, digest):
            print(f"warning: {name}.py differs from the version recorded in tests/torch_suite/README.md "
                  f"(sha256 {digest[:12]}...); its results may differ from docs/torch_suite.md", file=sys.stderr)
        shutil.copy(src, os.path.join(tree, name + ".py"))
    shutil.copy(os.path.join(SUITE_DIR, "conftest.py"), os.path.join(tree, "conftest.py"))
    return tree


# -- running ---------------------------------------------------------------------------------------------------


def device_env(device: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    for key in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "PYTORCH_TESTING_DEVICE_EXCEPT_FOR",
                "PYTORCH_TESTING_DEVICE_FOR_CUSTOM", "TORCH_TEST_DEVICES"):
        env.pop(key, None)
    env["TORCH_SUITE_DEVICE"] = device
    env["PYTORCH_TEST_WITH_SLOW"] = "0"
    env["PYTORCH_TEST_SKIP_FAST"] = "0"
    env["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"  # failure messages without the repro line
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # the baseline runs without torch_tpu loaded
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
    else:
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
        env.setdefault("TORCH_TPU_NUM_DEVICES", "2")  # deviceCountAtLeast(2) tests run
    return env


def run_pytest(tree: str, results: str, name: str, device: str, timeout: int, select: str | None,
               file_timeout: int) -> dict:
    """One pytest process for one file on one device; JUnit results in results/<name>.<device>.xml."""
    xml = os.path.join(results, f"{name}.{device}.xml")
    log = os.path.join(results, f"{name}.{device}.log")
    if os.path.exists(xml):
        os.remove(xml)
    cmd = [sys.executable, "-m", "pytest", f"{name}.py", "-q", "-rN", "-p", "no:cacheprovider",
           f"--junitxml={xml}", "-o", "junit_family=xunit1", f"--timeout={timeout}"]
    if select:
        cmd += ["-k", select]
    t0 = time.time()
    status = "ok"
    with open(log, "w") as f:
        try:
            proc = subprocess.run(cmd, cwd=tree, env=device_env(device), stdout=f, stderr=subprocess.STDOUT,
                                  timeout=file_timeout)
            if proc.returncode not in (0, 1, 5):
                status = f"pytest exited {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {file_timeout} s"
    elapsed = time.time() - t0
    if not os.path.exists(xml):
        status = status if status != "ok" else "no results (crashed?)"
    print(f"  {name:22s} {device:4s} {elapsed:7.1f}s  {status}  ({os.path.relpath(log)})", file=sys.stderr,
          flush=True)
    return {"file": name, "device": device, "seconds": round(elapsed, 1), "status": status}


# -- report ----------------------------------------------------------------------------------------------------


def normalize(classname: str, name: str) -> str:
    """A device-independent test id: Class::test with the device parts of both replaced by DEV."""
    cls = _DEVICE_CLASS.sub("DEV", classname.split(".")[-1])
    return f"{cls}::{_DEVICE_NAME.sub('_DEV', name)}"


def read_junit(path: str) -> dict:
    """test id -> (outcome, message) of one JUnit file (device-instantiated classes only)."""
    out: dict = {}
    if not os.path.exists(path):
        return out
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return out
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        if not _DEVICE_CLASS.search(classname.split(".")[-1]):
            continue
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = child.get("message") or first_line(child.text)
                text = child.text or ""
                # the exception line of the traceback (pytest's "E   ..." lines) is the most telling
                elines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
                if elines and not message:
                    message = elines[0]
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        out[normalize(classname, case.get("name", ""))] = (outcome, " ".join(message.split())[:400])
    return out


def category(message: str) -> str:
    """The category of a tpu failure from its message (see the module docstring)."""
    if re.search(r"not raised|did not raise|Regex pattern did not match|does not match|not triggered|no warning|"
                 r"Caused no warning|warnings? (was|were) not|expected .* to raise", message, re.I):
        return "missing-check"
    exc = re.match(r"([\w.]*(Error|Exception|Warning))\b", message)
    if exc and not exc.group(1).endswith("AssertionError"):
        return "error"
    if exc or re.search(r"not close|not equal|mismatch|Tensor-likes|Scalars are not|is not true|is not false",
                        message):
        return "wrong-result"
    return "other"


def load_known() -> dict:
    spec = importlib.util.spec_from_file_location("torch_suite_known", os.path.join(SUITE_DIR, "known_failures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.KNOWN_FAILURES


def known_entry(known: dict, file: str, test: str):
    """The known-failures entry covering file::test (exact id or a shell pattern), or None."""
    key = f"{file}::{test}"
    if key in known:
        return known[key]
    for pattern, entry in known.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(key, pattern):
            return entry
    return None


def report(results: str, files, known: dict | None = None) -> tuple[str, bool]:
    """Markdown report of the results of `files`; ok is False for an unlisted failure or a file passing nothing."""
    known = load_known() if known is None else known
    runs = {}
    meta_path = os.path.join(results, "runs.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            runs = {(r["file"], r["device"]): r for r in json.load(f)}
    lines = ["| file | covers | cpu passed | tpu passed | tpu failed | tpu skipped | tpu pass rate | "
             "cpu s | tpu s |", "|---|---|---|---|---|---|---|---|---|"]
    failures = []
    ok = True
    totals = [0, 0, 0, 0]
    for name in files:
        cpu = read_junit(os.path.join(results, f"{name}.cpu.xml"))
        tpu_xml = os.path.join(results, f"{name}.tpu.xml")
        tpu = read_junit(tpu_xml)
        cpu_passed = [t for t, (o, _) in cpu.items() if o == "passed"]
        passed = failed = skipped = 0
        if not os.path.exists(tpu_xml):  # no tpu run (--devices cpu, or the process ended without results)
            ok = False
            lines.append(f"| {name} (no tpu results) | {FILES.get(name, '')} | {len(cpu_passed)} | | | | | | |")
            totals[0] += len(cpu_passed)
            continue
        tpu_finished = runs.get((name, "tpu"), {}).get("status", "ok") == "ok"
        for test in cpu_passed:
            outcome, message = tpu.get(test, ("missing", "not run on tpu (the process ended before it?)"))
            if outcome == "passed":
                passed += 1
            elif outcome == "skipped" or (outcome == "missing" and tpu_finished):
                # (a test the tpu run, finished, never collected is not instantiated for tpu: a dtype only
                # dtypesIfCPU lists)
                skipped += 1
            else:
                failed += 1
                entry = known_entry(known, name, test)
                cat = entry[0] if entry else category(message)
                failures.append((name, test, cat, message, entry))
                if entry is None:
                    ok = False
        compared = passed + failed
        if not cpu_passed:
            ok = False
        rate = f"{100.0 * passed / compared:.1f}" if compared else "-"
        secs = [runs.get((name, d), {}).get("seconds", "") for d in ("cpu", "tpu")]
        status = [runs.get((name, d), {}).get("status", "ok") for d in ("cpu", "tpu")]
        note = "" if status == ["ok", "ok"] else " (" + "; ".join(f"{d}: {s}" for d, s in zip(("cpu", "tpu"), status)
                                                                 if s != "ok") + ")"
        lines.append(f"| {name}{note} | {FILES.get(name, '')} | {len(cpu_passed)} | {passed} | {failed} | {skipped} "
                     f"| {rate} | {secs[0]} | {secs[1]} |")
        for i, v in enumerate((len(cpu_passed), passed, failed, skipped)):
            totals[i] += v
    compared = totals[1] + totals[2]
    lines.append(f"| **all** | | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | "
                 f"{100.0 * totals[1] / compared:.1f} | | |" if compared else "| **all** | | 0 | 0 | 0 | 0 | - | | |")
    lines.append("")
    lines.append("tpu passed + failed = the cpu-passing tests that ran on tpu; skipped = skipped on tpu, or not "
                 "instantiated for it (onlyCPU, onlyNativeDeviceTypes, dtypes only dtypesIfCPU lists, ...).")
    lines.append("")
    if failures:
        lines.append("## tpu failures of cpu-passing tests, by category")
        for cat, what in CATEGORIES.items():
            group = [f for f in failures if f[2] == cat]
            if not group:
                continue
            lines.append("")
            lines.append(f"### {cat}: {what} ({len(group)})")
            lines.append("")
            for name, test, _, message, entry in group:
                mark = f" — known: {entry[1]}" if entry else " — **not in known_failures.py**"
                lines.append(f"- `{name}` `{test}`: {message}{mark}")
    return "\n".join(lines) + "\n", ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", help="a PyTorch checkout (or a folder of its test files); "
                                       "default $TORCH_TPU_TORCH_TESTS")
    ap.add_argument("--files", help="comma-separated test files (default: all of FILES, or SUBSET's with --subset)")
    ap.add_argument("--devices", default="cpu,tpu")
    ap.add_argument("--subset", action="store_true", help="the CI subset (SUBSET's -k expression per file)")
    ap.add_argument("-k", dest="select", help="a pytest -k expression for every file")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test (pytest-timeout)")
    ap.add_argument("--file-timeout", type=int, default=5400, help="seconds per file and device")
    ap.add_argument("--jobs", type=int, default=1, help="pytest processes at once (files x devices)")
    ap.add_argument("--results", help="results folder (default build/torch_suite/results)")
    ap.add_argument("--report", help="also write the report to this file")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 on a failure not in known_failures.py")
    args = ap.parse_args(argv)

    files = [f.strip() for f in args.files.split(",")] if args.files else \
        list(SUBSET) if args.subset else list(FILES)
    for f in files:
        if f not in FILES:
            raise SystemExit(f"unknown file {f!r}; known: {', '.join(FILES)}")
    work = os.path.join(build_dir(), "torch_suite")
    results = os.path.abspath(args.results or os.path.join(work, "results"))
    os.makedirs(results, exist_ok=True)

    if not args.report_only:
        tree = assemble(work, upstream_dir(args.upstream), files)
        jobs = [(f, d) for f in files for d in args.devices.split(",")]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = list(pool.map(lambda job: run_pytest(
                tree, results, job[0], job[1], args.timeout, args.select or (SUBSET.get(job[0]) if args.subset
                                                                             else None), args.file_timeout), jobs))
        meta_path = os.path.join(results, "runs.json")
        previous = []
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                previous = [r for r in json.load(f) if (r["file"], r["device"]) not in {(d["file"], d["device"])
                                                                                          for d in done}]
        with open(meta_path, "w") as f:
            json.dump(previous + done, f, indent=1)

    text, ok = report(results, files)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
