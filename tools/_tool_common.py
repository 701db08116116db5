"""Plumbing shared by the conformance tools (tools/op_coverage.py, tools/module_coverage.py, tools/hf_suite.py,
tools/torch_suite.py): the build folder, file digests, worker processes and their result files, and the report
sections every coverage report has (outcomes, CPU fallbacks, unexpected failures and passes, stale expected-failure
entries). The tools import it as a sibling module (they put tools/ on sys.path first).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_dir() -> str:
    """The CMake build folder: TORCH_TPU_BUILD_DIR, else build/ in the checkout."""
    return os.environ.get("TORCH_TPU_BUILD_DIR") or os.path.join(REPO, "build")


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def first_line(text: str) -> str:
    """The first non-blank line of a failure message (stripped), or ""."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def run_workers(script: str, jobs: int, args) -> list:
    """Runs `script --worker j/jobs --json FILE ARGS...` for j in 0..jobs-1 at once; returns each worker's JSON
    result file, in worker order. A worker that fails ends the run (SystemExit)."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for j in range(jobs):
            out = os.path.join(tmp, f"{j}.json")
            cmd = [sys.executable, script, "--worker", f"{j}/{jobs}", "--json", out] + list(args)
            procs.append((subprocess.Popen(cmd), out))
        parts = []
        for p, out in procs:
            if p.wait() != 0:
                raise SystemExit(f"worker failed with exit status {p.returncode}")
            with open(out) as f:
                parts.append(json.load(f))
    return parts


def outcome_sections(results, xf, run_keys, fallback_outcome: str, unexpected_outcomes, xpass_outcome: str):
    """The report sections common to the coverage reports: outcome counts, ops reached through the CPU fallback,
    unexpected failures and fallbacks, unexpected passes, and expected-failure entries (of the units that ran) that
    matched no case. Returns (lines, unexpected results, unexpected passes)."""
    outcomes = Counter((r.direction, r.outcome) for r in results)
    lines = ["## Outcomes", "", "| direction | outcome | cases |", "|---|---|---|"]
    lines += [f"| {d} | {o} | {c} |" for (d, o), c in sorted(outcomes.items())]
    fb = Counter()
    for r in results:
        if r.outcome == fallback_outcome:
            for o in r.detail.split(","):
                fb[o] += 1
    lines += ["", "## Ops reached through the CPU fallback outside expected failures (cases)", ""]
    lines += [f"- `{o}`: {c}" for o, c in sorted(fb.items(), key=lambda kv: (-kv[1], kv[0]))] or ["- none"]
    unexpected = [r for r in results if r.outcome in unexpected_outcomes]
    xpass = [r for r in results if r.outcome == xpass_outcome]
    lines += ["", "## Unexpected failures and fallbacks", ""]
    lines += [f"- {r.op} [{r.dtype}] {r.direction} #{r.index}: {r.outcome}: {r.detail}" for r in unexpected] \
        or ["- none"]
    lines += ["", "## Unexpected passes", ""]
    lines += [f"- {r.op} [{r.dtype}] {r.direction} #{r.index}: {r.detail}" for r in xpass] or ["- none"]
    lines += ["", "## Expected-failure entries that matched no case", ""]
    stale = [e for e in xf.entries if e.op in run_keys and not xf.matched[id(e)]]
    lines += [f"- {e.describe()}" for e in stale] or ["- none"]
    return lines, unexpected, xpass
