"""Full ModuleInfo and OptimInfo sweeps on `tpu`: writes docs/module_coverage.md (and prints the summary).

    python tools/module_coverage.py [--jobs 2] [--modules nn.Linear,nn.LSTM] [--optims Adam,SGD] [--max-samples N]

One run writes the whole file; its header states the parameters. Modules (torch_tpu/testing/modules.py): every
sample of every ModuleInfo, float32 and bfloat16, train mode (and eval mode where the ModuleInfo says they differ),
forward (outputs and buffers) and backward (input and parameter gradients). Optimizers
(torch_tpu/testing/optims.py): every configuration of every OptimizerInfo, several steps, parameters and state.
Everything is seeded, so two runs give the same file apart from the line stating the time taken. A case that was
right only thanks to the CPU fallback is counted separately, not as a pass. Expected failures live in
tests/python/module_expected_failures.py, each with its samples, kind and reason; the report lists unexpected
failures, unexpected passes and entries that matched nothing. Exit status 1 when there are unexpected failures or
passes.
"""
import argparse
import dataclasses
import json
import os
import sys
import time
import warnings

import torch

import torch_tpu
from torch_tpu.testing import modules as M
from torch_tpu.testing import opinfo as H
from torch_tpu.testing import optims as O

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tool_common import outcome_sections, run_workers  # noqa: E402
from module_expected_failures import EXPECTED_FAILURES  # noqa: E402


def _names(arg):
    if arg is None:
        return None
    return [] if arg == "none" else arg.split(",")


def units(args):
    """The work: ("module", info) and ("optim", info) in report order."""
    mods = M.find_modules(_names(args.modules)) if args.modules != "none" else []
    opts = O.find_optims(_names(args.optims)) if args.optims != "none" else []
    return [("module", m) for m in mods] + [("optim", o) for o in opts]


def unit_key(u):
    return u[1].name


def unit_cost(u, max_samples):
    """Roughly the unit's cases: a module's samples (up to max_samples) over its dtypes and modes; an optimizer's
    configurations (each a few small steps: a third of a module case)."""
    kind, info = u
    if kind == "optim":
        return len(O.configs(info)) / 3
    n = 0
    for training in M.modes(info):
        for dtype in M.DTYPES:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    k = len(info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                                    training=training))
            except Exception:  # noqa: BLE001
                k = 0
            n += min(k, max_samples) if max_samples else k
    return n


def share(work, j, n, max_samples):
    """Worker j's units out of n workers: the most costly unit first to the least loaded worker (deterministic, so
    every worker computes the same split)."""
    if n == 1:
        return work
    costs = [unit_cost(u, max_samples) for u in work]
    load = [0.0] * n
    mine = []
    for k in sorted(range(len(work)), key=lambda k: (-costs[k], k)):
        w = min(range(n), key=lambda w: (load[w], w))
        load[w] += costs[k] + 1
        if w == j:
            mine.append(k)
    return [work[k] for k in sorted(mine)]


def sweep(work, max_samples, log=sys.stderr):
    """Raw results (no expected failure applied: whether a backward case runs depends only on the raw forward
    outcome, so classifying afterwards gives what classifying during the run would)."""
    results = []
    for n, (kind, info) in enumerate(work):
        t = time.time()
        try:
            if kind == "module":
                results += M.run_module(info, max_samples=max_samples)
            else:
                results += O.run_optim(info)
        except Exception as e:  # noqa: BLE001
            results.append(H.CaseResult(info.name, "any", "harness", 0, H.ERROR, H._clean(f"harness: {e!r}")))
        print(f"[{n + 1}/{len(work)}] {kind} {info.name} {time.time() - t:.1f}s", file=log, flush=True)
    return results


def run_jobs(args, work):
    """Runs the sweep in `args.jobs` worker processes (units shared by their number of cases) and merges their results
    in order."""
    extra = ["--max-samples", str(args.max_samples)]
    for opt in ("modules", "optims"):
        if getattr(args, opt) is not None:
            extra += [f"--{opt}", getattr(args, opt)]
    parts = run_workers(__file__, args.jobs, extra)
    by_unit = {}
    for part in parts:
        for r in part:
            by_unit.setdefault(r["op"], []).append(H.CaseResult(**r))
    return [r for u in work for r in by_unit.get(unit_key(u), [])]


def classify(results, xf):
    out = []
    for r in results:
        if r.outcome == H.SKIP:
            out.append(r)
            continue
        outcome, detail, _ = xf.classify(r.op, r.dtype, r.direction, r.index, r.outcome, r.detail)
        out.append(H.CaseResult(r.op, r.dtype, r.direction, r.index, outcome, H._clean(detail)))
    return out


def _pct(p, t):
    return f"{p}/{t} = {100.0 * p / max(t, 1):.1f}%"


def report(args, work, results, xf, elapsed):
    mod_results = [r for r in results if r.direction != "step"]
    opt_results = [r for r in results if r.direction == "step"]
    n_mod = sum(k == "module" for k, _ in work)
    n_opt = len(work) - n_mod
    info = torch_tpu._C._plugin_info()
    cmd = "python tools/module_coverage.py" + "".join(
        f" --{o} {getattr(args, o)}" for o in ("modules", "optims") if getattr(args, o) is not None) + \
        (f" --max-samples {args.max_samples}" if args.max_samples else "")
    lines = ["# ModuleInfo and OptimInfo coverage on `tpu`", "",
             f"Generated by `{cmd}` on torch {torch.__version__}, plugin {info['platform_name']} "
             f"(PJRT API {info['api_version']}).", "",
             f"- modules: {n_mod} ModuleInfos ({'selected' if args.modules else 'the whole module database'}); "
             f"samples: {'all' if not args.max_samples else f'the first {args.max_samples}'}; dtypes: float32, "
             "bfloat16; train mode, and eval mode for the modules whose ModuleInfo says the two differ; forward "
             "(outputs, and buffers after the call) and backward (gradients of the inputs and parameters)",
             f"- optimizers: {n_opt} OptimizerInfos ({'selected' if args.optims else 'the whole optimizer database'}); "
             f"every configuration (the OptimizerInfo's own, each with foreach / differentiable / fused in turn, and "
             f"its accelerator-only ones such as capturable), {O.STEPS} steps, parameters and optimizer state",
             f"- expected failures: {len(xf.entries)} entries in tests/python/module_expected_failures.py",
             f"- time: {elapsed / 60:.1f} min ({args.jobs} worker process{'es' if args.jobs > 1 else ''})", "",
             "A case is one (module, dtype, mode, sample, direction) or one (optimizer, configuration). *pass* = correct "
             "and computed on the device; *fallback* = correct only because an op ran on the CPU fallback or a host "
             "round trip happened (not counted as a pass); *xfail* = failed as an expected-failure entry says; *xpass* "
             "= listed as expected to fail but passed. Cases CPU itself cannot run are not counted. Tolerances are "
             "the OpInfo sweep's (torch_tpu/testing/tolerances.py); a bfloat16 case that misses both CPU's result and CPU's "
             "float32 computation rounded passes if its relative error against the float32 computation is at most "
             f"{M.HALF_ERROR_RATIO:g} times CPU's own (torch_tpu/testing/modules.py); random modules are compared by "
             "distribution.", ""]
    fp, ft = M.rate(mod_results, "forward")
    bp, bt = M.rate(mod_results, "backward")
    op_, ot = H.rate(opt_results, "step")
    lines += ["## Summary", "",
              f"- modules, forward: {_pct(fp, ft)}",
              f"- modules, backward: {_pct(bp, bt)}"]
    for d in M.DTYPES:
        dn = str(d).replace("torch.", "")
        dfp, dft = M.rate(mod_results, "forward", dn)
        dbp, dbt = M.rate(mod_results, "backward", dn)
        lines.append(f"  - {dn}: forward {_pct(dfp, dft)}, backward {_pct(dbp, dbt)}")
    lines += [f"- optimizer configurations: {_pct(op_, ot)}", ""]
    sections, unexpected, xpass = outcome_sections(results, xf, {unit_key(u) for u in work}, H.PASS_FALLBACK,
                                                   (H.FAIL, H.ERROR, H.PASS_FALLBACK), H.XPASS)
    lines += sections
    lines += ["", "## Expected failures (the cases not passing, with their reasons)", "",
              "| module or optimizer | dtype | direction | samples / configurations | kind | cases | reason |",
              "|---|---|---|---|---|---|---|"]
    for e in xf.entries:
        if e.op not in {unit_key(u) for u in work}:
            continue
        kind = "fallback" if e.fallback is not None else "error" if e.error is not None else "mismatch"
        samples = "all" if e.samples is None else ", ".join(map(str, e.samples))
        lines.append(f"| {e.op} | {e.dtype} | {e.direction} | {samples} | {kind} | {xf.matched[id(e)]} | "
                     f"{e.reason.replace('|', '/')} |")
    lines += ["", "## Per module", "", M.markdown_table(mod_results) if mod_results else "(none run)", ""]
    lines += ["## Per optimizer configuration", "", "| optimizer | # | configuration | outcome |", "|---|---|---|---|"]
    descs = {info.name: [d for d, _, _ in O.configs(info)] for kind, info in work if kind == "optim"}
    for r in opt_results:
        lines.append(f"| {r.op} | {r.index} | {descs[r.op][r.index]} | {r.outcome} |")
    lines.append("")
    return lines, unexpected, xpass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default=None,
                    help="comma-separated ModuleInfo names, e.g. nn.Linear (default: all; 'none': no modules)")
    ap.add_argument("--optims", default=None,
                    help="comma-separated OptimizerInfo names, e.g. Adam (default: all; 'none': no optimizers)")
    ap.add_argument("--max-samples", type=int, default=0, help="samples per (module, dtype, mode) (default 0 = all)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "module_coverage.md"))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (the report does not depend on it)")
    ap.add_argument("--raw", default=None, help="also save the raw results (before expected failures) here")
    ap.add_argument("--from-raw", default=None,
                    help="report from raw results saved by --raw instead of running (expected failures re-applied)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    max_samples = args.max_samples or None
    work = units(args)
    if args.worker:
        j, n = map(int, args.worker.split("/"))
        results = sweep(share(work, j, n, args.max_samples), max_samples)
        with open(args.json, "w") as f:
            json.dump([dataclasses.asdict(r) for r in results], f)
        return 0
    if args.from_raw:
        with open(args.from_raw) as f:
            saved = json.load(f)
        results, elapsed = [H.CaseResult(**r) for r in saved["results"]], saved["elapsed"]
        args.jobs = saved["jobs"]
        for opt in ("modules", "optims", "max_samples"):  # the run's own parameters (for the report's header)
            if opt in saved:
                setattr(args, opt, saved[opt])
        work = units(args)
    else:
        t0 = time.time()
        results = run_jobs(args, work) if args.jobs > 1 else sweep(work, max_samples)
        elapsed = time.time() - t0
        if args.raw:
            with open(args.raw, "w") as f:
                json.dump({"elapsed": elapsed, "jobs": args.jobs, "modules": args.modules, "optims": args.optims,
                           "max_samples": args.max_samples, "results": [dataclasses.asdict(r) for r in results]}, f)
    xf = H.ExpectedFailures(EXPECTED_FAILURES)
    results = classify(results, xf)
    lines, unexpected, xpass = report(args, work, results, xf, elapsed)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:30]))
    return 1 if unexpected or xpass else 0


if __name__ == "__main__":
    sys.exit(main())
