"""tools/torch_suite.py: PyTorch's own device-generic test files on cpu and tpu.

* The tool's machinery, on the real plugin: a device-generic test file of our own (written in the upstream style:
  a TestCase instantiated by PyTorch's ``instantiate_device_type_tests``) runs in one pytest process per device;
  the tpu classes exist (PyTorch's PrivateUse1TestBase, torch_tpu imported first by tests/torch_suite/conftest.py),
  device-independent ids pair the tests, each tpu failure of a cpu-passing test gets its category, tests CPU-only
  by decorator are counted as skipped, and ``--check`` fails on a failure not in the known-failures table.
* The tool refuses to run without PyTorch's test files (this repository stores none).
* With ``TORCH_TPU_TORCH_TESTS`` pointing at a PyTorch checkout (or a folder of its test files), the CI subset of the
  upstream files runs and no failure outside tests/torch_suite/known_failures.py is allowed.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOL = REPO_ROOT / "tools" / "torch_suite.py"

_spec = importlib.util.spec_from_file_location("torch_suite_tool", TOOL)
torch_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(torch_suite)

# A device-generic file of our own, named as one of the tool's files so the tool runs it.
_OWN_FILE = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_utils import TestCase, run_tests
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, onlyCPU


    class TestOwnSuite(TestCase):
        @dtypes(torch.float32, torch.int64)
        def test_add_matches(self, device, dtype):
            a = torch.arange(6, dtype=dtype, device=device)
            self.assertEqual((a + a).cpu(), torch.arange(6, dtype=dtype) * 2)

        def test_device_is_host(self, device):  # passes on cpu only: an assertion on a value
            self.assertEqual(torch.empty(2, device=device).device.type, "cpu")

        def test_raises_on_accelerator(self, device):  # tpu raises where cpu works
            if torch.device(device).type != "cpu":
                raise NotImplementedError("no kernel here")

        def test_check_only_on_host(self, device):  # the check CPU makes is missing elsewhere
            with self.assertRaises(RuntimeError):
                if torch.device(device).type == "cpu":
                    raise RuntimeError("checked")

        @onlyCPU
        def test_only_cpu(self, device):
            pass


    class TestPlain(TestCase):  # not device-generic: never collected
        def test_plain(self):
            pass


    instantiate_device_type_tests(TestOwnSuite, globals())

    if __name__ == "__main__":
        run_tests()
''')


def _run(args, env_extra, timeout=900):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_TORCH_TESTS"}
    env.update(env_extra)
    return subprocess.run([sys.executable, str(TOOL), *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_needs_the_upstream_tests(tmp_path):
    proc = _run([], {"TORCH_TPU_BUILD_DIR": str(tmp_path)}, timeout=120)
    assert proc.returncode != 0 and "--upstream DIR" in proc.stderr, proc.stderr
    (tmp_path / "not-pytorch").mkdir()
    proc = _run(["--upstream", str(tmp_path / "not-pytorch")], {"TORCH_TPU_BUILD_DIR": str(tmp_path)}, timeout=120)
    assert proc.returncode != 0 and "not a PyTorch checkout" in proc.stderr, proc.stderr


def test_ids_categories_and_known_entries():
    # device parts of class and test names pair the cpu and tpu instantiations
    for cls, name in (("test_x.TestFooCPU", "test_bar_cpu_float32"), ("test_x.TestFooPRIVATEUSE1",
                                                                       "test_bar_privateuse1_float32"),
                      ("test_x.TestFooTPU", "test_bar_tpu_float32")):
        assert torch_suite.normalize(cls, name) == "TestFooDEV::test_bar_DEV_float32"
    assert torch_suite.normalize("m.TestFooCPU", "test_cpu_to_cpu") == "TestFooDEV::test_DEV_to_DEV"
    cases = {
        "AssertionError: Tensor-likes are not close!": "wrong-result",
        "AssertionError: Scalars are not equal!": "wrong-result",
        "AssertionError: RuntimeError not raised": "missing-check",
        "AssertionError: UserWarning not triggered": "missing-check",
        "AssertionError: \"must be\" does not match \"other text\"": "missing-check",
        "RuntimeError: no lowering for aten::foo": "error",
        "NotImplementedError: boom": "error",
        "Failed: Timeout >300.0s": "other",
    }
    for message, expected in cases.items():
        assert torch_suite.category(message) == expected, message
    known = {"test_torch::TestTorchDeviceTypeDEV::test_a_DEV": ("error", "a"),
             "test_torch::TestTorchDeviceTypeDEV::test_dlpack_*": ("error", "b")}
    assert torch_suite.known_entry(known, "test_torch", "TestTorchDeviceTypeDEV::test_a_DEV")[1] == "a"
    assert torch_suite.known_entry(known, "test_torch", "TestTorchDeviceTypeDEV::test_dlpack_x_DEV")[1] == "b"
    assert torch_suite.known_entry(known, "test_torch", "TestTorchDeviceTypeDEV::test_b_DEV") is None
    # every entry of the published table has a category the tool knows and a reason
    for key, (cat, reason) in torch_suite.load_known().items():
        assert key.split("::")[0] in torch_suite.FILES and cat in torch_suite.CATEGORIES and reason, key


@pytest.mark.slow
def test_runs_a_device_generic_file_on_cpu_and_tpu(tmp_path):
    upstream = tmp_path / "pytorch" / "test"
    upstream.mkdir(parents=True)
    (upstream / "test_sort_and_select.py").write_text(_OWN_FILE)
    report = tmp_path / "report.md"
    proc = _run(["--upstream", str(tmp_path / "pytorch"), "--files", "test_sort_and_select", "--check",
                 "--results", str(tmp_path / "results"), "--report", str(report)],
                {"TORCH_TPU_BUILD_DIR": str(tmp_path / "build")})
    text = report.read_text() if report.exists() else ""
    assert proc.returncode == 1, f"{proc.stdout}\n{proc.stderr[-3000:]}"  # three failures, none known
    row = next(line for line in text.splitlines() if line.startswith("| test_sort_and_select"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # cpu passes 6 (2 dtypes of add, 3 that fail on tpu, onlyCPU); tpu passes the 2 adds, fails 3, skips onlyCPU
    assert cells[2:7] == ["6", "2", "3", "1", "40.0"], row
    assert "TestPlain" not in text
    assert "`TestOwnSuiteDEV::test_device_is_host_DEV`" in text.split("### wrong-result")[1].split("###")[0], text
    assert "`TestOwnSuiteDEV::test_raises_on_accelerator_DEV`: NotImplementedError: no kernel here" in \
        text.split("### error")[1], text
    assert "`TestOwnSuiteDEV::test_check_only_on_host_DEV`" in text.split("### missing-check")[1].split("###")[0], text
    # the same results with every failure known: --check passes
    known = {f"test_sort_and_select::TestOwnSuiteDEV::{t}": ("error", "stated") for t in
             ("test_device_is_host_DEV", "test_raises_on_accelerator_DEV", "test_check_only_on_host_DEV")}
    text, ok = torch_suite.report(str(tmp_path / "results"), ["test_sort_and_select"], known)
    assert ok and text.count("known: stated") == 3, text


if os.environ.get("TORCH_TPU_TORCH_TESTS"):
    # PyTorch's test files are not part of this repository: the subset runs where a checkout is given.

    def test_upstream_subset(tmp_path):
        """A few hundred of PyTorch's device-generic tests pass on tpu wherever they pass on cpu (or are known)."""
        report = tmp_path / "report.md"
        proc = _run(["--subset", "--check", "--results", str(tmp_path / "results"), "--report", str(report)],
                    {"TORCH_TPU_TORCH_TESTS": os.environ["TORCH_TPU_TORCH_TESTS"],
                     "TORCH_TPU_BUILD_DIR": str(tmp_path / "build")}, timeout=1500)
        text = report.read_text() if report.exists() else ""
        assert proc.returncode == 0, f"{text}\n{proc.stderr[-4000:]}"
        total = next(line for line in text.splitlines() if line.startswith("| **all**"))
        assert int(total.split("|")[3]) >= 100, total
