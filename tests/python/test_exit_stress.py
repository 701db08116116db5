"""Exit safety: processes that end with work in flight exit cleanly, every time.

At exit, the plugin's static destructors (LLVM's and MLIR's global tables among them, thousands of them) run in
the reverse order of their registration, and those LLVM registers lazily, during the first compile that needs
them, come before our own exit handlers: a background fused compile still running then used destroyed LLVM state
(a crash, or "LLVM ERROR: Cannot implicitly convert a scalable size ..."), and the static caches of executables and
buffers were destroyed after the plugin's statics, calling into a torn-down plugin. Now the extension shuts the
runtime down once the interpreter has finalized (before any static destructor): background compiles and disk-cache
writes finish, executions and copies in flight are awaited, then no PJRT call is made any more.

Longer runs: ``python -m torch_tpu.testing.exit_stress --runs 300``.
"""
import os
import subprocess
import sys
import textwrap

from torch_tpu.testing import exit_stress

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_processes_exit_cleanly_with_work_in_flight():
    # Eight processes, two at a time (about 60 s of CPU): compiles, queued cache writes, a background fused compile,
    # unawaited launches, a backward, both virtual devices, a collective (seeds 1 and 5), sys.exit(0) and
    # sys.exit(3).
    results = exit_stress.run(8, jobs=2, seed=0)
    failed = [r for r in results if not r["ok"]]
    assert not failed, "\n\n".join(
        f"seed {r['seed']}: exit {r['rc']} (expected {exit_stress.expected_status(r['seed'])}), bad output "
        f"{r['bad']}\n{r['output'][-4000:]}" for r in failed)


def test_runtime_refuses_work_after_shutdown(tmp_path):
    # What exit does, called early: afterwards every use raises a clear error (no crash), executables and buffers
    # destroyed later are left to the OS, and the process still exits 0.
    code = textwrap.dedent("""
        import torch, torch_tpu
        x = torch.arange(6.0, device="tpu")
        y = (x * 2).sum()
        print("before", y.item())
        torch_tpu._C._shutdown()
        torch_tpu._C._shutdown()  # idempotent
        try:
            (x + 1).cpu()
        except RuntimeError as e:
            print("refused:", e)
        else:
            print("ran after shutdown")
        del x, y  # buffers destroyed after shutdown: no PJRT call
        torch_tpu._C._clear_cache()  # executables too
    """)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p))
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "before 30.0" in out, out
    assert "refused:" in out and "shut down" in out, out
