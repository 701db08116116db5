"""Compiled-call overhead: `torch.compile(lambda x: x + 1, backend="tpu")` against `jax.jit` of the same function on
the same XLA:CPU, in one process, with a breakdown of where a call's time goes.

    python benchmarks/compiled_call_overhead.py [--n 20000] [--runs 3] [--numel 16]

Each run measures every row in turn (each row: the best of 5 batches of n/5 calls, which filters out the moments a
shared machine takes the core away) and reports the ratio to `jax.jit` measured in that same run. Rows:

- `jax.jit`: the reference, dispatch only (the result is not waited for, as for the tpu rows);
- `torch.compile`: the whole call as a user makes it;
- `compiled fn called directly`: the callable the `tpu` backend returned to Dynamo (what Dynamo's generated
  bytecode calls after its guards pass): AOTAutograd's runtime wrappers and the backend's runner, or the C++
  graph call of inference graphs;
- `backend runner (Python)` and `C++ run (pybind)`: the layers below, called directly;
- `Dynamo guard check`: the frame's guards evaluated alone;
- `Dynamo pre-graph bytecode`: what Dynamo's generated code runs before the graph on a machine with an accelerator
  (the current stream looked up and stored for stream tracking; the profiler's "Pregraph bytecode" record when
  `torch._dynamo.config.record_runtime_overhead` is on, its default);
- the C++ stages of one call (`_time_stages`: signature, program lookup, launch bookkeeping, PJRT execute, output
  tensors), when the build has them;
- `graph_call=False`: the same function through AOTAutograd's wrappers and the Python runner (the path every graph
  took before the C++ graph call), and `record_runtime_overhead=False` (Dynamo's setting, off);
- `Dynamo floor`: `torch.compile` of a backend that returns a precomputed result, the least any backend can cost;
- `tpu eager x + 1` for scale.

Then the breakdown: the whole call minus the direct call is Dynamo's (frame, guards, pre-graph bytecode), the direct
call minus the runner is AOTAutograd's wrappers, the runner minus the C++ run is the runner's Python.
"""
import argparse
import os

import torch

import torch_tpu
from eager_op_latency import per_call  # this directory is on sys.path when the script runs


def best_per_call(fn, n):
    """Microseconds per call (eager_op_latency.per_call: the best of 5 batches), after 500 untimed calls."""
    return per_call(fn, n, warmup=500) * 1e6


def compiled_fn_of(fn):
    """The callable the backend returned for `fn`'s frame (Dynamo installs it as a global of the frame)."""
    names = [k for k in fn.__globals__ if k.startswith("__compiled_fn")]
    if len(names) != 1:
        raise RuntimeError(f"expected one compiled graph, found {names}")
    return fn.__globals__[names[0]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--numel", type=int, default=16)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np

    from torch_tpu import _dynamo_backend as backend_mod

    host = np.random.randn(args.numel).astype(np.float32)
    xj = jnp.asarray(host)
    jf = jax.jit(lambda x: x + 1)
    jf(xj).block_until_ready()

    x = torch.from_numpy(host).to("tpu")
    runners = []
    init = backend_mod._GraphRunner.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        runners.append(self)

    backend_mod._GraphRunner.__init__ = record
    torch._dynamo.reset()
    fn = lambda x: x + 1  # noqa: E731
    f = torch.compile(fn, backend="tpu", fullgraph=True)
    expect = (torch.from_numpy(host) + 1)
    torch.testing.assert_close(f(x).cpu(), expect)
    backend_mod._GraphRunner.__init__ = init
    if len(runners) != 1:
        raise RuntimeError(f"expected one compiled graph, got {len(runners)}")
    runner = runners[0]
    cg = runner.cg
    direct = compiled_fn_of(fn)  # Dynamo's disable wrapper around what the backend returned
    returned = getattr(direct, "_torchdynamo_orig_callable", None) or direct.__wrapped__
    torch.testing.assert_close(direct(x)[0].cpu(), expect)
    torch.testing.assert_close(returned(x)[0].cpu(), expect)

    # The floor of any backend: Dynamo calling a graph that returns a precomputed result.
    def constant_backend(gm, example_inputs):
        out = gm(*example_inputs)
        return lambda *a: out

    fn_floor = lambda x: x + 1  # noqa: E731
    floor = torch.compile(fn_floor, backend=constant_backend, fullgraph=True)
    floor(x)

    # Dynamo's guards for the frame, and its pre-graph bytecode, alone.
    entries = torch._dynamo.eval_frame._debug_get_cache_entry_list(fn.__code__)
    guard = entries[0].guard_manager
    if not guard.check({"x": x}):
        raise RuntimeError("the guards reject the benchmark's own input")
    from torch._dynamo.graph_bytecode_inputs import store_user_object_weakrefs
    from torch._dynamo.utils import get_current_stream, record_pregraph_bytecode_enter, record_pregraph_bytecode_exit

    stream_tracking = torch.accelerator.is_available()
    dev = torch.device("tpu", 0)

    def pregraph():
        if stream_tracking:
            store_user_object_weakrefs(get_current_stream(torch.device(dev.type, dev.index)))
        if torch._dynamo.config.record_runtime_overhead:
            record_pregraph_bytecode_exit(record_pregraph_bytecode_enter())

    xe = x.clone()
    # The same function through AOTAutograd's runtime wrappers and the Python runner (what every graph did before
    # the C++ graph call).
    fn_wrapped = lambda x: x + 1  # noqa: E731
    wrapped = torch.compile(fn_wrapped, backend="tpu", fullgraph=True, options={"graph_call": False})
    torch.testing.assert_close(wrapped(x).cpu(), expect)
    # Without Dynamo's profiler-record bytecode (a user setting, read when the frame is compiled).
    fn_lean = lambda x: x + 1  # noqa: E731
    lean = torch.compile(fn_lean, backend="tpu", fullgraph=True)
    with torch._dynamo.config.patch(record_runtime_overhead=False):
        torch.testing.assert_close(lean(x).cpu(), expect)

    stages = getattr(cg, "_time_stages", None)
    stats0 = torch_tpu.compile_stats()
    print(f"plugin: {torch_tpu._C._plugin_info()['platform_name']}, jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, {args.numel} float32 elements, {args.n} calls per row and run")
    print(f"load average at start {os.getloadavg()}\n")
    results = []
    for run in range(args.runs):
        r = {}
        r["jax.jit"] = best_per_call(lambda: jf(xj), args.n)
        r["torch.compile (backend tpu)"] = best_per_call(lambda: f(x), args.n)
        r["torch.compile (backend tpu), graph_call=False"] = best_per_call(lambda: wrapped(x), args.n)
        r["torch.compile (backend tpu), record_runtime_overhead=False"] = best_per_call(lambda: lean(x), args.n)
        r["Dynamo floor: torch.compile of a backend returning a constant"] = best_per_call(lambda: floor(x), args.n)
        r["compiled fn called directly"] = best_per_call(lambda: direct(x), args.n)
        r["what the backend returned, called directly"] = best_per_call(lambda: returned(x), args.n)
        r["backend runner (Python)"] = best_per_call(lambda: runner([x]), args.n)
        r["C++ run (pybind)"] = best_per_call(lambda: cg.run([x]), args.n)
        r["Dynamo guard check"] = best_per_call(lambda: guard.check({"x": x}), args.n)
        r["Dynamo pre-graph bytecode"] = best_per_call(pregraph, args.n)
        if stages is not None:
            st = stages([x], args.n)
            for k, v in st.items():
                r[f"C++ stage: {k}"] = v / 1e3
        r["tpu eager x + 1"] = best_per_call(lambda: xe + 1, args.n)
        torch.tpu.synchronize()
        jf(xj).block_until_ready()
        results.append(r)
        print(f"run {run + 1}: torch.compile {r['torch.compile (backend tpu)']:.2f} us, jax.jit {r['jax.jit']:.2f} us, "
              f"ratio {r['torch.compile (backend tpu)'] / r['jax.jit']:.2f}x  (load {os.getloadavg()[0]:.2f})")
    print()
    names = list(results[0])
    head = "| row | " + " | ".join(f"run {i + 1} us (x jax)" for i in range(len(results))) + " |"
    print(head)
    print("|---|" + "---|" * len(results))
    for k in names:
        cells = [f"{r[k]:.2f} ({r[k] / r['jax.jit']:.2f}x)" for r in results]
        print(f"| {k} | " + " | ".join(cells) + " |")

    print("\nbreakdown of the compiled call (us, per run):")
    rows = [
        ("Dynamo: frame, guards, pre-graph bytecode (whole call - direct call)",
         lambda r: r["torch.compile (backend tpu)"] - r["compiled fn called directly"]),
        ("  of which guard check", lambda r: r["Dynamo guard check"]),
        ("  of which pre-graph bytecode", lambda r: r["Dynamo pre-graph bytecode"]),
        ("Dynamo's disable wrapper of the compiled fn (direct call - backend's callable)",
         lambda r: r["compiled fn called directly"] - r["what the backend returned, called directly"]),
        ("the backend's callable (AOTAutograd wrappers + runner + C++, or the C++ graph call)",
         lambda r: r["what the backend returned, called directly"]),
        ("  for scale: runner (Python) alone", lambda r: r["backend runner (Python)"]),
        ("  for scale: C++ run through pybind alone", lambda r: r["C++ run (pybind)"]),
        ("what torch_tpu owns: whole call - Dynamo floor",
         lambda r: r["torch.compile (backend tpu)"] - r["Dynamo floor: torch.compile of a backend returning a constant"]),
    ]
    for label, f_ in rows:
        print(f"| {label} | " + " | ".join(f"{f_(r):.2f}" for r in results) + " |")
    stats = torch_tpu.compile_stats()
    fast = stats.get("fast_calls", 0) - stats0.get("fast_calls", 0)
    print(f"\ncompile_stats: runs {stats['runs'] - stats0['runs']}, fast graph calls {fast}, "
          f"lowerings {stats['lowerings'] - stats0['lowerings']}")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
