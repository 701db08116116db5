"""The settings table (csrc/settings): every TORCH_TPU_* variable, one parser per kind, shared by C++ and Python.

Each kind's accepted and refused forms (through the same C++ parsers Python reads with), byte sizes with units and
exact decimal fractions (``1.5G``), an invalid value's message, values read at import or first use in fresh
interpreters, that every ``TORCH_TPU_*`` name in the sources is in the table, and that docs/settings.md is the table.
"""

import os
import re

import pytest

import torch_tpu  # noqa: F401
from torch_tpu import _settings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_switch_forms():
    name = "TORCH_TPU_DEVICE_CHECKS"  # default on
    for text in ("1", "true", "TRUE", "On", "yes", " 1 "):
        assert _settings.parse(name, text) is True, text
    for text in ("0", "false", "False", "OFF", "no", "NO"):
        assert _settings.parse(name, text) is False, text
    assert _settings.parse(name, None) is True and _settings.parse(name, "") is True  # the default
    assert _settings.parse("TORCH_TPU_LAUNCH_BLOCKING", None) is False
    for text in ("2", "maybe", "enable", "auto", "-1", "0x1"):
        with pytest.raises(ValueError, match=f"{name}='{re.escape(text)}'"):
            _settings.parse(name, text)
    # a switch whose default depends on the machine: unset / empty / auto -> None
    for text in (None, "", "auto", "AUTO"):
        assert _settings.parse("TORCH_TPU_RAGGED_DOT", text) is None
    assert _settings.parse("TORCH_TPU_RAGGED_DOT", "off") is False


def test_integer_forms():
    name = "TORCH_TPU_FUSED_SPEED_CHECK"  # 0..100, default 4
    assert _settings.parse(name, None) == 4
    assert _settings.parse(name, "0") == 0 and _settings.parse(name, " 100 ") == 100
    for text in ("101", "-1", "4.5", "four", "1e2", "4K"):
        with pytest.raises(ValueError, match=f"{name}='{re.escape(text)}'.*from 0 to 100"):
            _settings.parse(name, text)
    assert _settings.parse("TORCH_TPU_NUM_DEVICES", None) is None  # the plugin's
    assert _settings.parse("TORCH_TPU_NUM_DEVICES", "3") == 3
    with pytest.raises(ValueError, match="TORCH_TPU_NUM_DEVICES='0'"):
        _settings.parse("TORCH_TPU_NUM_DEVICES", "0")


@pytest.mark.parametrize("text, want", [
    ("1.5G", 1610612736), ("1.5g", 1610612736), ("1.5 GiB", 1610612736), ("1536M", 1610612736),
    ("2G", 2 << 30), ("8GiB", 8 << 30), ("1048576", 1 << 20), ("1048576B", 1 << 20), ("512k", 512 << 10),
    ("0.5K", 512), ("1.3K", 1331), ("0.25T", 1 << 38), (".5M", 1 << 19), ("0", 0), ("7TiB", 7 << 40),
])
def test_byte_size_forms(text, want):
    assert _settings.parse("TORCH_TPU_CACHE_MAX_BYTES", text) == want


@pytest.mark.parametrize("text", ["1.5GB", "8MB", "1KB", "G", "1..5G", "1.G", "-1G", "1.5X", "1e9", "9000000T",
                                  "one"])
def test_byte_size_refused(text):
    with pytest.raises(ValueError) as e:
        _settings.parse("TORCH_TPU_CACHE_MAX_BYTES", text)
    msg = str(e.value)
    assert f"TORCH_TPU_CACHE_MAX_BYTES='{text}'" in msg and "K/KiB, M/MiB, G/GiB" in msg, msg


def test_byte_size_defaults():
    assert _settings.parse("TORCH_TPU_CACHE_MAX_BYTES", None) == 2 << 30
    assert _settings.parse("TORCH_TPU_DONATE_MIN_BYTES", None) == 1 << 20
    assert _settings.parse("TORCH_TPU_MEMORY_LIMIT", None) is None


def test_choice_path_text_forms():
    assert _settings.parse("TORCH_TPU_EAGER_MODE", None) == "strict"
    assert _settings.parse("TORCH_TPU_EAGER_MODE", "Fused") == "fused"
    with pytest.raises(ValueError, match=r"TORCH_TPU_EAGER_MODE='fast'.*one of strict or fused"):
        _settings.parse("TORCH_TPU_EAGER_MODE", "fast")
    assert _settings.parse("TORCH_TPU_DIST_TRANSPORT", "") == "auto"
    # a path is taken as given: unset -> None (the default directory), empty -> "" (no disk cache)
    assert _settings.parse("TORCH_TPU_CACHE_DIR", None) is None
    assert _settings.parse("TORCH_TPU_CACHE_DIR", "") == ""
    assert _settings.parse("TORCH_TPU_CACHE_DIR", " /tmp/a b ") == " /tmp/a b "
    assert _settings.parse("TORCH_TPU_PJRT_OPTIONS", "a=1,b=2") == "a=1,b=2"
    with pytest.raises(ValueError, match="not a setting"):
        _settings.parse("TORCH_TPU_NO_SUCH_THING", "1")


def test_get_reads_a_mapping():
    assert _settings.get("TORCH_TPU_PROCESS_BASE_PORT", {}) == 8476
    assert _settings.get("TORCH_TPU_PROCESS_BASE_PORT", {"TORCH_TPU_PROCESS_BASE_PORT": "7000"}) == 7000
    with pytest.raises(ValueError, match="from 1 to 65535"):
        _settings.get("TORCH_TPU_PROCESS_BASE_PORT", {"TORCH_TPU_PROCESS_BASE_PORT": "70000"})


def test_values_read_in_cpp(run_python, tmp_path):
    # Read by C++ at first use: 1.5G is the disk cache budget exactly (it used to be read as 1 byte), "false" turns
    # a switch off (it used to count as on: only "0" did), and a spin wait of 0 is taken.
    proc = run_python(
        """
        import torch, torch_tpu
        x = torch.arange(6.0, device="tpu")
        print("OUT", (x * 2).sum().item(), torch_tpu.cache_stats()["disk"]["max_bytes"], torch_tpu.device_checks())
        """,
        env={"TORCH_TPU_CACHE_MAX_BYTES": "1.5G", "TORCH_TPU_DEVICE_CHECKS": "false", "TORCH_TPU_SPIN_WAIT_US": "0",
             "TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert "OUT 30.0 1610612736 False" in proc.stdout, proc.stdout


# Every setting C++ reads is checked when the device starts, also those read late (the disk cache's budget is read
# inside a program's compile, where an invalid value used to become a CPU fallback with a warning).
@pytest.mark.parametrize("name, value", [("TORCH_TPU_EAGER_MODE", "fast"), ("TORCH_TPU_DEVICE_CHECKS", "maybe"),
                                         ("TORCH_TPU_CACHE_MAX_BYTES", "1.5GB")])
def test_invalid_value_read_in_cpp_raises(run_python, tmp_path, name, value):
    proc = run_python(
        """
        import torch, torch_tpu
        try:
            x = torch.ones(3, device="tpu")
            torch.tpu.synchronize()
            print("VALUE", (x + 1)[torch.tensor([0], device="tpu")].sum().item())
        except RuntimeError as e:
            print("RAISED", e)
        """,
        env={name: value, "TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")},
    )
    line = next((s for s in proc.stdout.splitlines() if s.startswith("RAISED")), None)
    assert line is not None, proc.stdout + proc.stderr
    assert f"{name}='{value}'" in line and "accepted:" in line, line


def test_invalid_value_read_in_python(run_python):
    # TORCH_TPU_NUM_DEVICES is read by Python when the plugin is configured at import: ValueError, kept as the
    # plugin error (import torch still works; the device's first use raises it).
    proc = run_python(
        """
        import torch, torch_tpu
        print("AVAILABLE", torch.tpu.is_available())
        try:
            torch.ones(1, device="tpu")
        except Exception as e:
            print("RAISED", type(e).__name__, e)
        """,
        env={"TORCH_TPU_NUM_DEVICES": "two"},
    )
    assert "AVAILABLE False" in proc.stdout, proc.stdout
    assert "TORCH_TPU_NUM_DEVICES='two'" in proc.stdout and "decimal integer" in proc.stdout, proc.stdout


def _names_in_sources():
    names = set()
    roots = [os.path.join(REPO, d) for d in ("csrc", "torch_tpu", "tools", "scripts", "benchmarks", "tests")]
    files = [os.path.join(REPO, "setup.py")]
    for root in roots:
        for d, _, fs in os.walk(root):
            files += [os.path.join(d, f) for f in fs if f.endswith((".py", ".cpp", ".h", ".sh"))]
    for f in files:
        with open(f, errors="replace") as fh:
            names.update(re.findall(r"\bTORCH_TPU_[A-Z0-9_]*[A-Z0-9]\b", fh.read()))
    # not environment variables: a C++ macro, the disk cache's file magic, names in this test
    return names - {"TORCH_TPU_KINETO", "TORCH_TPU_EXE_2", "TORCH_TPU_NO_SUCH_THING"}


def test_every_variable_is_in_the_table():
    table = {r["name"] for r in _settings.table()}
    missing = sorted(_names_in_sources() - table)
    assert not missing, f"TORCH_TPU_* names used in the sources but missing from csrc/settings/settings.cpp: {missing}"


def test_docs_match_the_table():
    with open(os.path.join(REPO, "docs", "settings.md")) as f:
        committed = f.read()
    assert committed == _settings.markdown(), (
        "docs/settings.md is out of date: python -m torch_tpu --settings-doc docs/settings.md"
    )
