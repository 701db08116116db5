"""Transformers' and Diffusers' model tests on cpu and on tpu, side by side.

    nice -n 10 python tools/hf_suite.py                       # all families, cpu then tpu, table on stdout
    python tools/hf_suite.py --families bert,vit --subset      # the CI subset of two families
    python tools/hf_suite.py --report-only                     # re-render the table from the last results
    python tools/hf_suite.py --suite diffusers --upstream DIR  # Diffusers' model tests (DIR: a diffusers checkout)

Assembles a runnable test tree offline, under the build directory (`$TORCH_TPU_BUILD_DIR`, default `build/`):

* the `tests/` directory of the PyPI sdist of transformers 5.24.0 (downloaded once with `pip download`, checked
  against its sha256, cached as build/hf_suite/transformers-5.24.0.tar.gz): Transformers' own common mixins,
  `ModelTesterMixin` (test_modeling_common.py), `ConfigTester` and friends;
* this repository's tests/hf_suite/ over it: the model test files (tests/models/<family>/), the pieces the sdist
  leaves out (`GenerationTesterMixin`, `ExportTesterMixin`, `config_common_kwargs`) and a conftest;
* with `--upstream DIR` (a checkout of github.com/huggingface/transformers at v5.24.0), that checkout's own
  model test files, generation tests and helpers over both, so the run is Transformers' full upstream suite for
  the chosen families;
* tests/transformers_device_spec.py at the root (`TRANSFORMERS_TEST_DEVICE_SPEC`).

Then runs every family in its own pytest process per device: cpu with `TRANSFORMERS_TEST_DEVICE=cpu` and backend
autoloading off (a plain CPU baseline), tpu with `TRANSFORMERS_TEST_DEVICE=tpu`, `TRANSFORMERS_TEST_BACKEND=torch_tpu`
and the device spec. The hub is offline for both (`HF_HUB_OFFLINE=1`): tests that need downloads fail or skip on
both devices alike. Results are JUnit files in build/hf_suite/results/; the report (stdout, and `--report FILE`)
counts per family what passed, failed and was skipped on each device, and lists every test that passes on cpu and
fails on tpu with its error. `--check` exits 1 if any such test falls outside the known categories (KNOWN below) or
a family passes nothing on cpu.

`--suite diffusers` runs Diffusers' own model tests the same way. Diffusers' sdist ships no tests, so the test files
come from a checkout of github.com/huggingface/diffusers given with `--upstream DIR` (or `$TORCH_TPU_DIFFUSERS_TESTS`),
at the tag matching the installed diffusers (DIFFUSERS_VERSION): its `tests/` top-level helpers (conftest.py,
testing_utils.py) and `tests/models/` are copied into build/hf_suite/diffusers/tree, and each family
(DIFFUSERS_FAMILIES: one test file each) runs on cpu (`DIFFUSERS_TEST_DEVICE=cpu`, backend autoloading off) and on tpu
(`DIFFUSERS_TEST_DEVICE=tpu`, `DIFFUSERS_TEST_BACKEND=torch_tpu`). The report adds, per family, the accelerator-only
tests (skipped on cpu, run on tpu) that pass and fail on tpu, and lists the failures of those too.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tool_common import REPO, build_dir, first_line, sha256  # noqa: E402

TRANSFORMERS_VERSION = "5.24.0"
SDIST = f"transformers-{TRANSFORMERS_VERSION}.tar.gz"
SDIST_SHA256 = "906cb8c3cb2123575e263962586a4d21a979ce97feeb95fe6aaf66fe6ae88bf3"

# family -> what it stands for in the table
FAMILIES = OrderedDict(
    [
        ("qwen3", "decoder-only, dense"),
        ("qwen3_moe", "decoder-only, mixture of experts"),
        ("bert", "encoder-only"),
        ("t5", "encoder-decoder (and T5 encoder)"),
        ("vit", "vision"),
        ("clip", "CLIP text encoder (diffusion pipelines)"),
    ]
)

# The CI subset: a handful of tests per family (forward, loss and backward, save/load, attention outputs, export,
# generation where the family generates), run in one pytest process per device. Test ids within
# tests/models/<family>/test_modeling_<family>.py.
SUBSET = {
    "qwen3": [
        "Qwen3ModelTest::test_model",
        "Qwen3ModelTest::test_causal_lm_loss_and_backward",
        "Qwen3ModelTest::test_attention_outputs",
        "Qwen3ModelTest::test_eager_matches_sdpa_inference_09_fp32_pad_left",
        "Qwen3ModelTest::test_greedy_generate_matches_forward",
        "Qwen3ModelTest::test_generate_compiled_static_cache",
    ],
    "qwen3_moe": [
        "Qwen3MoeModelTest::test_model",
        "Qwen3MoeModelTest::test_moe_router_logits_and_aux_loss",
        "Qwen3MoeModelTest::test_causal_lm_loss_and_backward",
        "Qwen3MoeModelTest::test_greedy_generate",
    ],
    "bert": [
        "BertModelTest::test_model",
        "BertModelTest::test_model_masked_lm",
        "BertModelTest::test_save_load",
        "BertModelTest::test_attention_outputs",
        "BertModelTest::test_torch_export",
    ],
    "t5": [
        "T5ModelTest::test_model",
        "T5ModelTest::test_decoder_past_matches_full_forward",
        "T5ModelTest::test_greedy_generate_matches_forward",
        "T5EncoderOnlyModelTest::test_encoder_only_matches_encoder_of_full_model",
    ],
    "vit": [
        "ViTModelTest::test_model",
        "ViTModelTest::test_model_image_classification_loss_and_backward",
        "ViTModelTest::test_attention_outputs",
        "ViTModelTest::test_interpolate_pos_encoding",
    ],
    "clip": [
        "CLIPTextModelTest::test_model",
        "CLIPTextModelTest::test_model_with_projection",
        "CLIPTextModelTest::test_hidden_states_output",
        "CLIPTextModelTest::test_save_load",
    ],
}

# Failure categories owned elsewhere: counted separately, allowed by --check.
KNOWN = OrderedDict(
    [
        # eager tpu runs PyTorch's composite _grouped_mm loop; under fake tensors (torch.export, compile) PyTorch's
        # meta function applies the CUDA rule (bf16 only) to every non-CPU device
        ("grouped_mm", (r"_grouped_mm|Expected inputs of BF16 type but got mat_a",
                        "aten::_grouped_mm (MoE experts) has no tpu lowering nor tpu meta function yet")),
        ("inductor", (r"No module named 'jax'|InductorError", "torch.compile with backend inductor on tpu (Pallas path)")),
    ]
)


DIFFUSERS_VERSION = "0.42.1"

# family -> (test file under the checkout's tests/, what it stands for in the table)
DIFFUSERS_FAMILIES = OrderedDict(
    [
        ("flux", ("models/transformers/test_models_transformer_flux.py", "Flux transformer")),
        ("flux2", ("models/transformers/test_models_transformer_flux2.py", "Flux 2 transformer")),
        ("sd3", ("models/transformers/test_models_transformer_sd3.py", "SD3 / SD3.5 transformer")),
        ("wan", ("models/transformers/test_models_transformer_wan.py", "Wan video transformer")),
        ("ltx", ("models/transformers/test_models_transformer_ltx.py", "LTX video transformer")),
        ("hunyuan_video", ("models/transformers/test_models_transformer_hunyuan_video.py",
                           "HunyuanVideo transformer")),
        ("cogvideox", ("models/transformers/test_models_transformer_cogvideox.py", "CogVideoX transformer")),
        ("sana", ("models/transformers/test_models_transformer_sana.py", "Sana transformer")),
        ("qwenimage21", ("models/transformers/test_models_transformer_qwenimage21.py", "QwenImage 2.1 transformer")),
        ("unet2d_condition", ("models/unets/test_models_unet_2d_condition.py", "UNet 2D condition model")),
        ("autoencoder_kl", ("models/autoencoders/test_models_autoencoder_kl.py", "AutoencoderKL (VAE)")),
        ("anyflow_far", ("models/transformers/test_models_transformer_anyflow_far.py",
                         "AnyFlow FAR transformer (flex attention)")),
        ("wan_animate_2", ("models/transformers/test_models_transformer_wan_animate_2.py",
                           "Wan-Animate 2 transformer (complex128 rotary, flex attention)")),
    ]
)

# The CI subset of Diffusers' tests: forward, save/load, determinism, training step, and the accelerator-only group
# offloading with streams (record_stream) and compile with dynamic shapes, where the family has them.
DIFFUSERS_SUBSET = {
    "flux": [
        "TestFluxTransformer::test_from_save_pretrained",
        "TestFluxTransformer::test_determinism",
        "TestFluxTransformer::test_output",
        "TestFluxTransformerTraining::test_training",
        "TestFluxTransformerMemory::test_group_offloading[True]",
        "TestFluxTransformerMemory::test_group_offloading_with_disk[block_level-False]",
        "TestFluxTransformerMemory::test_layerwise_casting_memory",
    ],
    "autoencoder_kl": [
        "TestAutoencoderKL::test_output",
        "TestAutoencoderKL::test_from_save_pretrained",
        "TestAutoencoderKLMemory::test_group_offloading[True]",
    ],
}

# Failure categories of Diffusers' tests that tpu cannot pass here, allowed by --check. (complex64 rotary embeddings
# and float8 storage for layerwise casting were categories until those dtypes existed on tpu; they pass now.)
DIFFUSERS_KNOWN = OrderedDict(
    [
        ("hub", (r"does not appear to have a file named|LocalEntryNotFoundError|offline mode|requests_mock",
                 "needs the Hugging Face hub (or requests_mock); the runs are offline")),
        ("aoti", (r"aoti|AOTInductor|aot_compile|_inductor\.package|cpp_wrapper|No module named 'jax'",
                  "ahead-of-time compile (AOTInductor C++ packages) has no tpu code generator")),
    ]
)


# -- assembling the tree ---------------------------------------------------------------------------------------


def fetch_sdist(cache: str) -> str:
    """The transformers sdist, downloaded from the package index once and cached."""
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path) or sha256(path) != SDIST_SHA256:
        os.makedirs(cache, exist_ok=True)
        cmd = [
            sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
            "--no-binary", ":all:", "--no-build-isolation", f"transformers=={TRANSFORMERS_VERSION}", "-d", cache,
        ]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
    digest = sha256(path)
    if digest != SDIST_SHA256:
        raise SystemExit(f"{path}: sha256 {digest} is not the one of transformers {TRANSFORMERS_VERSION}'s sdist")
    return path


def _copy_tree(src: str, dst: str) -> None:
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out = os.path.join(dst, os.path.relpath(root, src))
        os.makedirs(out, exist_ok=True)
        for name in files:
            shutil.copy2(os.path.join(root, name), os.path.join(out, name))


def assemble(work: str, families, upstream: str | None) -> str:
    tree = os.path.join(work, "tree")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    prefix = f"transformers-{TRANSFORMERS_VERSION}/tests/"
    with tarfile.open(fetch_sdist(work)) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        for m in members:
            m.name = "tests/" + m.name[len(prefix):]
        tar.extractall(tree, members=members, filter="data")
    if not os.path.exists(os.path.join(tree, "tests", "test_modeling_common.py")):
        raise SystemExit(f"{SDIST} has no tests/test_modeling_common.py")
    _copy_tree(os.path.join(REPO, "tests", "hf_suite"), os.path.join(tree, "tests"))
    if upstream:
        _overlay_upstream(upstream, tree, families)
    shutil.copy2(os.path.join(REPO, "tests", "transformers_device_spec.py"), tree)
    with open(os.path.join(tree, "pytest.ini"), "w") as f:
        # the tree is its own pytest root (not the torch-tpu checkout above it, whose testpaths point elsewhere)
        f.write("[pytest]\n")
    return tree


def _overlay_upstream(upstream: str, tree: str, families) -> None:
    src = os.path.join(upstream, "tests")
    if not os.path.exists(os.path.join(src, "generation", "test_utils.py")):
        raise SystemExit(f"--upstream {upstream}: not a transformers checkout (no tests/generation/test_utils.py)")
    dst = os.path.join(tree, "tests")
    for name in os.listdir(src):
        if name.endswith(".py"):
            shutil.copy2(os.path.join(src, name), dst)
    for sub in ("generation", "utils", "exporters", "fixtures"):
        if os.path.isdir(os.path.join(src, sub)):
            _copy_tree(os.path.join(src, sub), os.path.join(dst, sub))
    shutil.copy2(os.path.join(src, "models", "__init__.py"), os.path.join(dst, "models"))
    for family in families:
        if os.path.isdir(os.path.join(src, "models", family)):
            shutil.rmtree(os.path.join(dst, "models", family), ignore_errors=True)
            _copy_tree(os.path.join(src, "models", family), os.path.join(dst, "models", family))
    if os.path.exists(os.path.join(upstream, "conftest.py")):
        shutil.copy2(os.path.join(upstream, "conftest.py"), tree)


def diffusers_upstream(arg: str | None) -> str:
    """The diffusers checkout whose tests run: --upstream, else $TORCH_TPU_DIFFUSERS_TESTS."""
    upstream = arg or os.environ.get("TORCH_TPU_DIFFUSERS_TESTS")
    if not upstream:
        raise SystemExit("--suite diffusers needs the upstream test files: --upstream DIR (or TORCH_TPU_DIFFUSERS_TESTS), "
                         f"a checkout of github.com/huggingface/diffusers at v{DIFFUSERS_VERSION} (its PyPI sdist has no "
                         "tests)")
    if not os.path.exists(os.path.join(upstream, "tests", "models", "testing_utils", "__init__.py")):
        raise SystemExit(f"{upstream}: not a diffusers checkout (no tests/models/testing_utils/__init__.py)")
    return upstream


def assemble_diffusers(tree: str, upstream: str) -> str:
    """Diffusers' model-test tree in `tree`: the checkout's tests/*.py (conftest, testing_utils), tests/models/ and
    tests/others/."""
    shutil.rmtree(tree, ignore_errors=True)
    src = os.path.join(upstream, "tests")
    dst = os.path.join(tree, "tests")
    os.makedirs(dst)
    for name in os.listdir(src):
        if name.endswith(".py"):
            shutil.copy2(os.path.join(src, name), dst)
    for sub in ("models", "others"):  # tests/models/test_modeling_common.py imports tests/others/test_utils.py
        if os.path.isdir(os.path.join(src, sub)):
            _copy_tree(os.path.join(src, sub), os.path.join(dst, sub))
    with open(os.path.join(tree, "pytest.ini"), "w") as f:
        # markers Diffusers' testing_utils applies but its conftest does not register
        f.write("[pytest]\nmarkers =\n    cache: cache tests\n    autoround: autoround tests\n")
    import importlib.util

    if importlib.util.find_spec("requests_mock") is None:
        # tests/models/test_modeling_common.py imports it at module level (for its hub tests); without it the
        # UNet tests cannot even be collected. A stand-in whose use fails: those few tests fail on both devices.
        with open(os.path.join(tree, "requests_mock.py"), "w") as f:
            f.write('"""Stand-in written by tools/hf_suite.py: requests_mock is not installed."""\n\n\n'
                    "class Mocker:\n    def __init__(self, *args, **kwargs):\n"
                    '        raise RuntimeError("requests_mock is not installed")\n')
    return tree


# -- running ---------------------------------------------------------------------------------------------------


def device_env(device: str, slow: bool = False, suite: str = "transformers") -> dict:
    env = dict(os.environ)
    if slow:
        env["RUN_SLOW"] = "1"  # @slow tests (integration tests among them need the hub)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    for key in ("TRANSFORMERS_TEST_BACKEND", "TRANSFORMERS_TEST_DEVICE_SPEC", "TORCH_DEVICE_BACKEND_AUTOLOAD",
                "DIFFUSERS_TEST_BACKEND", "DIFFUSERS_TEST_DEVICE"):
        env.pop(key, None)
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # the baseline runs without torch_tpu loaded
    if suite == "diffusers":
        env["DIFFUSERS_TEST_DEVICE"] = device
        if device != "cpu":
            env["DIFFUSERS_TEST_BACKEND"] = "torch_tpu"
        return env
    env["TRANSFORMERS_TEST_DEVICE"] = device
    if device != "cpu":
        env["TRANSFORMERS_TEST_BACKEND"] = "torch_tpu"
        env["TRANSFORMERS_TEST_DEVICE_SPEC"] = "transformers_device_spec.py"
    return env


def test_file(family: str) -> str:
    return f"tests/models/{family}/test_modeling_{family}.py"


def run_pytest(tree: str, results: str, name: str, device: str, timeout: int, targets, extra, slow=False,
               suite: str = "transformers") -> float:
    """One pytest process on one device; JUnit results in results/<name>.<device>.xml, output in .log."""
    xml = os.path.join(results, f"{name}.{device}.xml")
    log = os.path.join(results, f"{name}.{device}.log")
    if os.path.exists(xml):
        os.remove(xml)
    cmd = [sys.executable, "-m", "pytest", *targets, "-q", "-rN", "-p", "no:cacheprovider",
           f"--junitxml={xml}", "-o", "junit_family=xunit1", f"--timeout={timeout}", *extra]
    t0 = time.time()
    with open(log, "w") as f:
        subprocess.run(cmd, cwd=tree, env=device_env(device, slow, suite), stdout=f, stderr=subprocess.STDOUT)
    elapsed = time.time() - t0
    print(f"  {name:10s} {device:4s} {elapsed:7.1f}s  ({os.path.relpath(log)})", file=sys.stderr, flush=True)
    return elapsed


# -- report ----------------------------------------------------------------------------------------------------


def _family_of(parts) -> str | None:
    """The family of a JUnit classname split at dots: tests.models.<family>.test_modeling_<family>.<Class>
    (Transformers), or tests.models.<kind>.<module>.<Class> with the module of a DIFFUSERS_FAMILIES file."""
    if len(parts) < 5 or parts[:2] != ["tests", "models"]:
        return None
    module = "/".join(parts[1:-1]) + ".py"
    for family, (path, _) in DIFFUSERS_FAMILIES.items():
        if path == module:
            return family
    return parts[2]


def read_results(results: str, device: str) -> dict:
    """family -> test id (Class::test) -> (outcome, message), from every JUnit file of `device`."""
    out: dict = {}
    if not os.path.isdir(results):
        return out
    for name in sorted(os.listdir(results)):
        if not name.endswith(f".{device}.xml"):
            continue
        for case in ET.parse(os.path.join(results, name)).getroot().iter("testcase"):
            parts = case.get("classname", "").split(".")
            family = _family_of(parts)
            if family is None:
                continue
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome, message = "failed", child.get("message") or first_line(child.text)
                    break
                if child.tag == "skipped":
                    outcome, message = "skipped", child.get("message") or ""
            out.setdefault(family, {})[f"{parts[-1]}::{case.get('name')}"] = (outcome, " ".join(message.split())[:300])
    return out


def category(message: str, known=KNOWN) -> str | None:
    for name, (pattern, _) in known.items():
        if re.search(pattern, message):
            return name
    return None


def report(results: str, families, suite: str = "transformers") -> tuple[str, bool]:
    """The per-family table and the tests that pass on cpu and not on tpu; ok is False if one of those is outside
    the known categories or a family passed nothing on cpu. The last column counts the accelerator-only tests
    (skipped on cpu, run on tpu) that pass and fail on tpu; their failures are listed too (informative only)."""
    known_cats = DIFFUSERS_KNOWN if suite == "diffusers" else KNOWN
    described = {f: w for f, (_, w) in DIFFUSERS_FAMILIES.items()} if suite == "diffusers" else FAMILIES
    cpu, tpu = read_results(results, "cpu"), read_results(results, "tpu")
    known_names = " and ".join(known_cats)
    lines = [
        "| family | what | cpu pass / fail / skip | tpu pass / fail / skip | cpu-passing tests passing on tpu | % "
        f"| % without {known_names} | accelerator-only on tpu: pass / fail |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    lost_all = []
    accel_failures = []
    missing = []  # families without tpu results
    tot_cpu = tot_both = tot_known = tot_acc_pass = tot_acc_fail = 0

    def counts(runs):
        if not runs:
            return "not run"
        return " / ".join(str(sum(1 for o, _ in runs.values() if o == k)) for k in ("passed", "failed", "skipped"))

    for family in families:
        c, t = cpu.get(family, {}), tpu.get(family, {})
        cpu_pass = [k for k, (o, _) in c.items() if o == "passed"]
        ok &= bool(cpu_pass)
        both = [k for k in cpu_pass if t.get(k, ("not run", ""))[0] == "passed"]
        known = 0
        ok &= bool(t)
        for k in cpu_pass if t else ():
            outcome, message = t.get(k, ("not run", ""))
            if outcome != "passed":
                cat = category(message, known_cats)
                known += cat is not None
                ok &= cat is not None
                lost_all.append((family, k, outcome, cat, message))
        accel = [k for k, (o, _) in c.items() if o == "skipped" and t.get(k, ("", ""))[0] in ("passed", "failed")]
        acc_pass = sum(1 for k in accel if t[k][0] == "passed")
        acc_fail = len(accel) - acc_pass
        for k in accel:
            if t[k][0] == "failed":
                accel_failures.append((family, k, category(t[k][1], known_cats), t[k][1]))
        pct = f"{100.0 * len(both) / len(cpu_pass):.1f}" if cpu_pass and t else "-"
        rest = len(cpu_pass) - known
        pct_wo = f"{100.0 * len(both) / rest:.1f}" if rest and t else "-"
        lines.append(f"| {family} | {described.get(family, '')} | {counts(c)} | {counts(t)} | "
                     f"{f'{len(both)} / {len(cpu_pass)}' if t else '-'} | {pct} | {pct_wo} | "
                     f"{f'{acc_pass} / {acc_fail}' if t and c else '-'} |")
        if t:
            tot_cpu, tot_both, tot_known = tot_cpu + len(cpu_pass), tot_both + len(both), tot_known + known
            tot_acc_pass, tot_acc_fail = tot_acc_pass + acc_pass, tot_acc_fail + acc_fail
        else:
            missing.append(family)
    if tot_cpu:
        rest = tot_cpu - tot_known
        lines.append(f"| **all** | | | | {tot_both} / {tot_cpu} | {100.0 * tot_both / tot_cpu:.1f} | "
                     f"{100.0 * tot_both / rest:.1f} | {tot_acc_pass} / {tot_acc_fail} |" if rest
                     else "| **all** | | | | | | | |")
    lines.append("")
    if lost_all:
        lines += ["Tests that pass on cpu and not on tpu:", ""]
        for family, k, outcome, cat, message in lost_all:
            lines.append(f"- `{family}` `{k}` ({outcome}): " + (f"[{cat}] " if cat else "") + message)
    elif not missing:
        lines.append("Every test that passes on cpu passes on tpu.")
    if accel_failures:
        lines += ["", "Accelerator-only tests (skipped on cpu) that fail on tpu:", ""]
        for family, k, cat, message in accel_failures:
            lines.append(f"- `{family}` `{k}`: " + (f"[{cat}] " if cat else "") + message)
    if lost_all or accel_failures:
        lines += ["", "Known categories: " + "; ".join(f"{k}: {d}" for k, (_, d) in known_cats.items()) + "."]
    if missing:
        lines += ["", "No tpu results for: " + ", ".join(missing) + "."]
    return "\n".join(lines), ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=("transformers", "diffusers"), default="transformers")
    ap.add_argument("--families", default=None, help="comma-separated model families (default: all of the suite)")
    ap.add_argument("--devices", default="cpu,tpu")
    ap.add_argument("--subset", action="store_true", help="only the CI subset (SUBSET), one process per device")
    ap.add_argument("-k", dest="kexpr", default=None, help="pytest -k expression for every family")
    ap.add_argument("--timeout", type=int, default=900, help="per-test timeout in seconds (pytest-timeout)")
    ap.add_argument("--slow", action="store_true", help="also run the suite's @slow tests (RUN_SLOW=1)")
    ap.add_argument("--upstream", default=None,
                    help=f"a transformers v{TRANSFORMERS_VERSION} checkout whose model tests to run, or with "
                         f"--suite diffusers a diffusers v{DIFFUSERS_VERSION} checkout (required there)")
    ap.add_argument("--results", default=None, help="results directory (default build/hf_suite/results[-subset])")
    ap.add_argument("--report", default=None, help="also write the report (markdown) to this file")
    ap.add_argument("--report-only", action="store_true", help="render the report from the last results")
    ap.add_argument("--check", action="store_true", help="exit 1 on an unexpected tpu failure")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)

    diffusers = args.suite == "diffusers"
    all_families = DIFFUSERS_FAMILIES if diffusers else FAMILIES
    families = [f for f in (args.families or ",".join(all_families)).split(",") if f]
    unknown = [f for f in families if f not in all_families and (diffusers or not (args.upstream or args.report_only))]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; this tree has {list(all_families)}")
    devices = [d for d in args.devices.split(",") if d]
    work = os.path.join(build_dir(), "hf_suite", "diffusers") if diffusers else os.path.join(build_dir(), "hf_suite")
    # results of earlier runs of other families stay, so families can be run one at a time and reported together
    results = os.path.abspath(args.results or os.path.join(work, "results-subset" if args.subset else "results"))
    if not args.report_only:
        if diffusers:
            # one tree per results directory: runs into different results (the CI subset, a full run) can overlap
            tree = assemble_diffusers(results.rstrip(os.sep) + "-tree", diffusers_upstream(args.upstream))
            files = {f: f"tests/{DIFFUSERS_FAMILIES[f][0]}" for f in families}
            subset = DIFFUSERS_SUBSET
        else:
            tree = assemble(work, families, args.upstream)
            files = {f: test_file(f) for f in families}
            subset = SUBSET
        os.makedirs(results, exist_ok=True)
        t0 = time.time()
        extra = list(args.pytest_args) + (["-k", args.kexpr] if args.kexpr else [])
        if args.subset:
            targets = [f"{files[f]}::{t}" for f in families for t in subset.get(f, [])]
            for device in devices:
                run_pytest(tree, results, "subset", device, args.timeout, targets, extra, args.slow, args.suite)
        else:
            for family in families:
                target = files[family] if diffusers else f"tests/models/{family}"
                if diffusers and not os.path.exists(os.path.join(tree, target)):
                    print(f"  {family}: {target} is not in the checkout", file=sys.stderr)
                    continue
                for device in devices:
                    run_pytest(tree, results, family, device, args.timeout, [target], extra, args.slow, args.suite)
        print(f"total {time.time() - t0:.1f}s", file=sys.stderr)
    if args.subset:
        families = [f for f in families if f in (DIFFUSERS_SUBSET if diffusers else SUBSET)]
    text, ok = report(results, families, args.suite)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return 1 if (args.check and not ok) else 0


if __name__ == "__main__":
    sys.exit(main())
