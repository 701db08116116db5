"""Full OpInfo sweep on `tpu`: writes docs/op_coverage.md (and prints the summary).

    python tools/op_coverage.py [--ops add,mul] [--max-samples 4] [--out docs/op_coverage.md]

One run writes the whole file; its header states the parameters. Samples are generated from fixed seeds, so two
runs give the same file apart from the line stating the time taken. Pass rates count only cases that ran on the
device; cases that were right only thanks to the CPU fallback are counted separately. Expected failures live in
tests/python/opinfo_expected_failures.py, each with a reason; the report lists unexpected failures, unexpected
passes and entries that matched nothing. Exit status 1 when there are unexpected failures or passes.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

import torch

import torch_tpu
from torch_tpu.testing import opinfo as H

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tool_common import outcome_sections, run_workers  # noqa: E402
from opinfo_expected_failures import EXPECTED_FAILURES, MODEL_OPS  # noqa: E402

DEFAULT_SAMPLES = 4


def parse_dtypes(text):
    """`--dtypes float64,int8` -> (torch.float64, torch.int8); None -> the sweep's default dtypes."""
    if not text:
        return H.DTYPES
    out = []
    for name in text.split(","):
        d = getattr(torch, name.strip(), None)
        if not isinstance(d, torch.dtype):
            raise SystemExit(f"--dtypes: {name!r} is not a torch dtype")
        out.append(d)
    return tuple(out)


def sweep(ops, max_samples, xf, dtypes=H.DTYPES, reference=False, log=sys.stderr):
    results = []
    for n, op in enumerate(ops):
        t = time.time()
        try:
            results += H.run_op(op, dtypes=dtypes, max_samples=max_samples, expected_failures=xf,
                                reference=reference)
        except Exception as e:  # noqa: BLE001
            results.append(H.CaseResult(H.op_key(op), "any", "forward", 0, H.ERROR, H._clean(f"harness: {e!r}")))
        print(f"[{n + 1}/{len(ops)}] {H.op_key(op)} {time.time() - t:.1f}s", file=log, flush=True)
    return results


def run_jobs(args, ops, xf):
    """Runs the sweep in `args.jobs` worker processes (ops dealt round-robin) and merges their results in op order."""
    parts = run_workers(__file__, args.jobs,
                        ["--max-samples", str(args.max_samples)] + (["--ops", args.ops] if args.ops else []) +
                        (["--dtypes", args.dtypes] if args.dtypes else []) +
                        (["--reference"] if args.reference else []))
    by_op = {}
    for part in parts:
        for r in part["results"]:
            by_op.setdefault(r["op"], []).append(H.CaseResult(**r))
        for k, v in part["matched"].items():
            xf.matched[id(xf.entries[int(k)])] += v
        for k, v in part["covered"].items():
            xf.covered[id(xf.entries[int(k)])] += v
    return [r for op in ops for r in by_op.get(H.op_key(op), [])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=None, help="comma-separated OpInfo names (default: the whole op database)")
    ap.add_argument("--max-samples", type=int, default=DEFAULT_SAMPLES,
                    help=f"samples per (op, dtype) (default {DEFAULT_SAMPLES}; 0 = all)")
    ap.add_argument("--dtypes", default=None,
                    help="comma-separated dtypes (default: " + ",".join(str(d)[6:] for d in H.DTYPES) + ")")
    ap.add_argument("--reference", action="store_true",
                    help="the OpInfos' reference inputs (extremal, small and large values, non-contiguous and "
                         "broadcast operands), forward only, instead of their samples")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "op_coverage.md"))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (the report does not depend on it)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    max_samples = args.max_samples or None
    dtypes = parse_dtypes(args.dtypes)
    ops = H.find_ops(args.ops.split(",") if args.ops else None)
    xf = H.ExpectedFailures(EXPECTED_FAILURES)
    if args.worker:
        j, n = map(int, args.worker.split("/"))
        results = sweep(ops[j::n], max_samples, xf, dtypes, args.reference)
        index = {id(e): k for k, e in enumerate(xf.entries)}
        with open(args.json, "w") as f:
            json.dump({"results": [dataclasses.asdict(r) for r in results],
                       "matched": {index[i]: c for i, c in xf.matched.items()},
                       "covered": {index[i]: c for i, c in xf.covered.items()}}, f)
        return 0
    t0 = time.time()
    results = run_jobs(args, ops, xf) if args.jobs > 1 else sweep(ops, max_samples, xf, dtypes, args.reference)
    elapsed = time.time() - t0
    run_keys = {H.op_key(o) for o in ops}
    model_keys = {H.op_key(o) for o in ops if o.name in MODEL_OPS or H.op_key(o) in MODEL_OPS}
    info = torch_tpu._C._plugin_info()
    dtype_names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    cmd = "python tools/op_coverage.py" + (f" --ops {args.ops}" if args.ops else "") + \
        (f" --dtypes {args.dtypes}" if args.dtypes else "") + (" --reference" if args.reference else "") + \
        (f" --max-samples {args.max_samples}" if args.max_samples != DEFAULT_SAMPLES else "")
    lines = ["# OpInfo coverage on `tpu`", "",
             f"Generated by `{cmd}` on torch {torch.__version__}, plugin {info['platform_name']} "
             f"(PJRT API {info['api_version']}).", "",
             f"- ops: {len(ops)} OpInfos ({'selected' if args.ops else 'the whole op database'})",
             f"- dtypes: {dtype_names} (those each OpInfo supports on CPU)",
             f"- samples per (op, dtype): {'all' if max_samples is None else f'the first {max_samples}'}; " +
             ("the OpInfos' reference inputs (extremal, small and large values, non-contiguous and broadcast "
              "operands), forward only" if args.reference else
              "forward, backward (floating dtypes, and complex ones where the OpInfo supports complex autograd) "
              "and every error input"),
             f"- expected failures: {len(xf.entries)} entries in tests/python/opinfo_expected_failures.py",
             f"- time: {elapsed / 60:.1f} min ({args.jobs} worker process{'es' if args.jobs > 1 else ''})", "",
             "A case is one (op, dtype, sample, direction). *pass* = correct and computed on the device; *fallback* = "
             "correct only because an op ran on the CPU fallback (not counted as a pass); *xfail* = failed as an "
             "expected-failure entry says; *xpass* = listed as expected to fail but passed. Random ops are compared "
             "by distribution, ops with unspecified tie indices by values and index consistency, empty* by "
             "metadata (see torch_tpu/testing/opinfo.py).", ""]
    for title, sel in (("Ops used by the model suite", model_keys), ("Whole op database", None)):
        fp, ft = H.rate(results, "forward", sel)
        bp, bt = H.rate(results, "backward", sel)
        ep, et = H.rate(results, "error_input", sel)
        lines += [f"## {title}", "",
                  f"- forward: {fp}/{ft} = {100.0 * fp / max(ft, 1):.1f}%",
                  f"- backward: {bp}/{bt} = {100.0 * bp / max(bt, 1):.1f}%",
                  f"- error inputs (same exception type as CPU): {ep}/{et}", ""]
        for d in dtypes:
            dn = str(d).replace("torch.", "")
            dfp, dft = H.rate(results, "forward", sel, dn)
            dbp, dbt = H.rate(results, "backward", sel, dn)
            lines.insert(-1, f"- {dn}: forward {dfp}/{dft} = {100.0 * dfp / max(dft, 1):.1f}%, backward "
                             f"{dbp}/{dbt} = {100.0 * dbp / max(dbt, 1):.1f}%")
    sections, unexpected, xpass = outcome_sections(results, xf, run_keys, H.PASS_FALLBACK,
                                                   (H.FAIL, H.ERROR, H.PASS_FALLBACK), H.XPASS)
    lines += sections
    lines += ["", "## Per op", "", H.markdown_table(results), ""]
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print("\n".join(lines[:40]))
    return 1 if unexpected or xpass else 0


if __name__ == "__main__":
    sys.exit(main())
