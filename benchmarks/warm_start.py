"""Warm start: the same program in a cold process (empty disk cache) and in a second process (warm disk cache).

    python benchmarks/warm_start.py [--skip-demo] [--skip-generate] [--markdown]

Runs, each twice in fresh interpreters sharing a new TORCH_TPU_CACHE_DIR:
* examples/demo.py: wall time, eager programs compiled / read from the disk cache, and the demo's own timing of
  the first tiny-Qwen3 generate() (eager, static cache) and the first compiled one;
* benchmarks/hf_generate.py --repeats 1: the warm-up (first) generate() of each row.
Exits 1 if the second process compiled any eager program the first one compiled, or if a run failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, cache):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable] + cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        print(p.stdout[-4000:], p.stderr[-4000:], sep="\n")
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode})")
    return p.stdout, dt


def demo_numbers(out):
    m = re.search(r"eager programs compiled: (\d+) in ([\d.]+) s, read from the disk cache: (\d+) in ([\d.]+) s; "
                  r"built \(meta \+ lowering\) (\d+) in ([\d.]+) s", out)
    gen = re.findall(r"(eager|compiled)\s+first\s*:\s*([\d.]+) s", out)
    firsts = {k: float(v) for k, v in gen}
    return dict(compiles=int(m.group(1)), compile_s=float(m.group(2)), disk_hits=int(m.group(3)),
                disk_s=float(m.group(4)), built=int(m.group(5)), lower_s=float(m.group(6)),
                eager_first=firsts.get("eager"), compiled_first=firsts.get("compiled"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    ok = True
    print(f"# cpus {os.cpu_count()}, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as cache:
        if not args.skip_demo:
            rows = []
            for label in ("cold process", "warm second process"):
                out, dt = run(["examples/demo.py"], cache)
                n = demo_numbers(out)
                rows.append((label, dt, n))
                print(f"# demo, {label}: {dt:.1f} s", flush=True)
            print("\n| examples/demo.py | wall s | eager programs compiled | read from disk | built (meta + lowering) "
                  "| first generate() eager s | first generate() compiled s |")
            print("|---|---|---|---|---|---|---|")
            for label, dt, n in rows:
                print(f"| {label} | {dt:.1f} | {n['compiles']} ({n['compile_s']:.1f} s) | {n['disk_hits']} "
                      f"({n['disk_s']:.1f} s) | {n['built']} ({n['lower_s']:.1f} s) | {n['eager_first']:.2f} "
                      f"| {n['compiled_first']:.2f} |")
            cold, warm = rows[0][2], rows[1][2]
            print(f"\nfirst eager generate(): {cold['eager_first'] / warm['eager_first']:.1f}x faster warm; "
                  f"first compiled generate(): {cold['compiled_first'] / warm['compiled_first']:.1f}x")
            if warm["compiles"] != 0:
                ok = False
                print(f"the warm process compiled {warm['compiles']} eager programs")
        if not args.skip_generate:
            outs = []
            for label in ("cold process", "warm second process"):
                out, dt = run(["benchmarks/hf_generate.py", "--repeats", "1", "--markdown"], cache)
                outs.append((label, out))
                print(f"# hf_generate, {label}: {dt:.1f} s", flush=True)
            for label, out in outs:
                print(f"\nbenchmarks/hf_generate.py, {label}:")
                print("\n".join(l for l in out.splitlines() if l.startswith("|")))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
