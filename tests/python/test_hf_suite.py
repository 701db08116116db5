"""Transformers' own model tests on tpu (tools/hf_suite.py), and regressions they found.

* ``test_hf_suite_subset``: the CI subset of tools/hf_suite.py — a few tests per model family of the tree it
  assembles from the transformers 5.24.0 sdist (downloaded from the package index once, cached under the build
  directory) and tests/hf_suite/, run on cpu and on tpu; every test that passes on cpu must pass on tpu.
* Regressions, each checked against the CPU on the real plugin:
  - ``histc`` of integer tensors (Transformers' MoE layers count tokens per expert with an int32 ``histc`` on
    accelerators; the CPU kernel only takes floating inputs, so the CPU fallback raised).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu

REPO_ROOT = Path(__file__).resolve().parents[2]


def _no_fallbacks(fn):
    torch_tpu.reset_fallback_counts()
    out = fn()
    assert torch_tpu.fallback_counts() == {}, torch_tpu.fallback_counts()
    return out


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (7, 0, 0), (5, 2, 9), (3, 5, 5), (6, 1.5, 8.5)])
def test_histc_integer_input(dtype, bins, lo, hi):
    torch.manual_seed(0)
    x = torch.randint(0, 12, (3, 17)).to(dtype)
    # as on CUDA: bounds truncated to integers, (x - min) * bins // (max - min), the maximum in the last bin, values
    # outside [min, max] dropped, the input dtype kept (the CPU bins the same values as floats identically)
    expected = torch.histc(x.float(), bins=bins, min=int(lo), max=int(hi)).to(dtype)
    got = _no_fallbacks(lambda: torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi).cpu())
    assert got.dtype == dtype
    assert torch.equal(got, expected), (got, expected)


def test_histc_integer_counts_experts_like_moe_layers():
    """Transformers' grouped experts: sorted expert ids of each (token, k) pair -> tokens per expert -> offsets."""
    num_experts = 4
    torch.manual_seed(0)
    expert_ids = torch.randint(0, num_experts, (21, 2)).reshape(-1)
    sorted_ids, _ = torch.sort(expert_ids)
    expected = torch.bincount(expert_ids, minlength=num_experts).to(torch.int32)

    def run():
        counts = torch.histc(sorted_ids.to("tpu").int(), bins=num_experts, min=0, max=num_experts - 1)
        return counts.cpu(), torch.cumsum(counts, dim=0, dtype=torch.int32).cpu()

    counts, offsets = _no_fallbacks(run)
    assert torch.equal(counts, expected)
    assert torch.equal(offsets, torch.cumsum(expected, 0, dtype=torch.int32))


def test_histc_bool_input_raises_like_cpu():
    x = torch.tensor([True, False])
    with pytest.raises(RuntimeError) as cpu_err:
        torch.histc(x, bins=2)
    with pytest.raises(RuntimeError) as tpu_err:
        torch.histc(x.to("tpu"), bins=2)
    assert "Bool" in str(cpu_err.value) and "Bool" in str(tpu_err.value)


def test_hf_suite_subset(tmp_path):
    """A few of Transformers' model tests per family pass on tpu wherever they pass on cpu."""
    report = tmp_path / "report.md"
    cmd = [sys.executable, str(REPO_ROOT / "tools" / "hf_suite.py"), "--subset", "--check", "--timeout", "600",
           "--results", str(tmp_path / "results"), "--report", str(report)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    text = report.read_text() if report.exists() else ""
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    # every family ran and passed tests on both devices (a tree that collects nothing must not pass)
    rows = [line for line in text.splitlines()
            if line.startswith("| ") and " / " in line and "**all**" not in line and not line.startswith("| family ")]
    assert len(rows) == 6, text
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        cpu_pass, tpu_pass = int(cells[2].split(" / ")[0]), int(cells[3].split(" / ")[0])
        assert cpu_pass >= 3 and tpu_pass >= cpu_pass, row


# ---- Diffusers' suite (tools/hf_suite.py --suite diffusers) ----------------------------------------------------------


def _junit(path, cases):
    """A JUnit file of (module, class, test, outcome, message) cases, as pytest writes them."""
    from xml.sax.saxutils import quoteattr

    body = []
    for module, cls, name, outcome, message in cases:
        inner = {"passed": "", "failed": f"<failure message={quoteattr(message)}>trace</failure>",
                 "skipped": f"<skipped message={quoteattr(message)}/>"}[outcome]
        body.append(f'<testcase classname="tests.models.{module}.{cls}" name="{name}">{inner}</testcase>')
    path.write_text('<?xml version="1.0"?><testsuites><testsuite>' + "".join(body) + "</testsuite></testsuites>")


def test_diffusers_suite_report(tmp_path):
    """The table of a Diffusers run: families found by their test file, cpu-passing tests that pass on tpu, known
    categories, and the accelerator-only tests (skipped on cpu) counted and listed separately."""
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import hf_suite
    finally:
        sys.path.pop(0)
    flux = "transformers.test_models_transformer_flux"
    vae = "autoencoders.test_models_autoencoder_kl"
    _junit(tmp_path / "flux.cpu.xml", [
        (flux, "TestFluxTransformer", "test_output", "passed", ""),
        (flux, "TestFluxTransformer", "test_rope", "passed", ""),
        (flux, "TestFluxTransformerMemory", "test_group_offloading", "skipped", "test requires accelerator"),
        (flux, "TestFluxTransformerCompile", "test_compile", "skipped", "test requires accelerator"),
    ])
    _junit(tmp_path / "flux.tpu.xml", [
        (flux, "TestFluxTransformer", "test_output", "passed", ""),
        (flux, "TestFluxTransformer", "test_rope", "failed",
         "RuntimeError: torch_tpu: AOTInductor (torch._inductor.aoti_compile_and_package) cannot compile"),
        (flux, "TestFluxTransformerMemory", "test_group_offloading", "passed", ""),
        (flux, "TestFluxTransformerCompile", "test_compile", "failed", "AssertionError: boom"),
    ])
    _junit(tmp_path / "autoencoder_kl.cpu.xml", [(vae, "TestAutoencoderKL", "test_output", "passed", "")])
    _junit(tmp_path / "autoencoder_kl.tpu.xml", [(vae, "TestAutoencoderKL", "test_output", "failed", "mismatch")])
    text, ok = hf_suite.report(str(tmp_path), ["flux", "autoencoder_kl"], "diffusers")
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| family")}
    assert rows["flux"][2:] == ["2 / 0 / 2", "2 / 2 / 0", "1 / 2", "50.0", "100.0", "1 / 1"], text
    assert rows["autoencoder_kl"][4:6] == ["0 / 1", "0.0"], text
    assert "[aoti]" in text and "`flux` `TestFluxTransformerCompile::test_compile`: AssertionError: boom" in text
    assert not ok  # the VAE's failure is in no known category
    text, ok = hf_suite.report(str(tmp_path), ["flux"], "diffusers")
    assert ok, text  # flux's only lost test is AOTInductor (known); accelerator-only failures never fail --check
    # complex64 and float8 exist on tpu: failures mentioning them are no longer a known category
    for message in ("RuntimeError: view_as_complex has no implementation",
                    "TypeError: tpu: tensors of dtype Float8_e4m3fn are not supported on the tpu device"):
        assert hf_suite.category(message, hf_suite.DIFFUSERS_KNOWN) is None, message


def test_diffusers_suite_needs_the_upstream_tests(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_DIFFUSERS_TESTS"}
    env["TORCH_TPU_BUILD_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "hf_suite.py"), "--suite", "diffusers"],
                          cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "--upstream DIR" in proc.stderr, proc.stderr
    (tmp_path / "not-diffusers").mkdir()
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "hf_suite.py"), "--suite", "diffusers",
                           "--upstream", str(tmp_path / "not-diffusers")],
                          cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "not a diffusers checkout" in proc.stderr, proc.stderr


if os.environ.get("TORCH_TPU_DIFFUSERS_TESTS"):
    # Diffusers' test files are not part of this repository (its sdist ships none): the subset runs where a
    # checkout of github.com/huggingface/diffusers at v0.42.1 is given.

    def test_diffusers_suite_subset(tmp_path):
        """A few of Diffusers' model tests (Flux, AutoencoderKL, accelerator-only group offloading among them) pass
        on tpu wherever they pass on cpu."""
        report = tmp_path / "report.md"
        cmd = [sys.executable, str(REPO_ROOT / "tools" / "hf_suite.py"), "--suite", "diffusers", "--subset",
               "--check", "--timeout", "600", "--results", str(tmp_path / "results"), "--report", str(report)]
        proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
        text = report.read_text() if report.exists() else ""
        assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
        assert "Accelerator-only tests (skipped on cpu) that fail on tpu" not in text, text
        rows = [line for line in text.splitlines()
                if line.startswith("| ") and " / " in line and "**all**" not in line and not line.startswith("| family ")]
        assert len(rows) == 2, text
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert int(cells[2].split(" / ")[0]) >= 2 and int(cells[7].split(" / ")[0]) >= 1, row
