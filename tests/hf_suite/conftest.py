"""pytest configuration of the assembled Transformers test tree (tools/hf_suite.py copies this directory over the
`tests/` package of the transformers 5.24.0 sdist).

Transformers' own root conftest is not part of the sdist; this one registers the markers its test files use, so a
run with `--strict-markers` or `-W error` does not trip over them, and keeps the tree from being collected from
the torch-tpu checkout itself (where the sdist's mixins are absent).
"""

import os

_HERE = os.path.dirname(os.path.abspath(__file__))

if not os.path.exists(os.path.join(_HERE, "test_modeling_common.py")):
    # In the torch-tpu checkout: these files only run inside the tree `python tools/hf_suite.py` assembles.
    collect_ignore_glob = ["*"]

_MARKERS = (
    "generate: a test of generate()",
    "slow: a slow test (runs only with RUN_SLOW=1)",
    "order: execution order (pytest-order)",
    "is_staging_test: needs the staging hub",
    "is_pipeline_test: a pipeline test",
    "is_agent_test: an agent test",
    "is_training_test: a training test",
    "is_tensor_parallel_test: a tensor-parallel test",
    "is_expert_parallel_test: an expert-parallel test",
    "is_fsdp_test: an FSDP test",
    "accelerate_tests: needs accelerate",
    "torch_compile_test: uses torch.compile",
    "torch_export_test: uses torch.export",
    "flash_attn_test: needs flash attention",
    "flash_attn_3_test: needs flash attention 3",
    "flash_attn_4_test: needs flash attention 4",
)


def pytest_configure(config):
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)
