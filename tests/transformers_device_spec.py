"""Device spec for running Transformers' own test suite on torch_tpu (``TRANSFORMERS_TEST_DEVICE_SPEC``).

Transformers 5.x already knows "tpu" (``is_torch_tpu_available``, and ``testing_utils`` maps manual_seed,
device_count, synchronize and empty_cache for it), so ``TRANSFORMERS_TEST_DEVICE=tpu`` plus
``TRANSFORMERS_TEST_BACKEND=torch_tpu`` is enough; this spec is optional. It adds what the built-in tables leave at
their CPU-like defaults: the memory statistics (``backend_memory_allocated`` & co. return 0 for tpu otherwise).

Transformers imports the spec by stripping ``.py`` from the path it is given, so the path must be a bare file name
in the directory pytest runs from: copy (or symlink) this file into the root of the transformers checkout and run
``TRANSFORMERS_TEST_DEVICE_SPEC=transformers_device_spec.py``. See docs/hf_testing.md.
"""

import sys

import torch
import torch_tpu  # noqa: F401  (registers the tpu device and torch.tpu)

DEVICE_NAME = "tpu"

MANUAL_SEED_FN = torch.tpu.manual_seed
EMPTY_CACHE_FN = torch.tpu.empty_cache
DEVICE_COUNT_FN = torch.tpu.device_count

# The spec format has no entries for the memory/synchronize tables; fill them in the (partially imported)
# testing_utils module, which defines them before it imports this file.
_tu = sys.modules.get("transformers.testing_utils")
if _tu is not None:
    for _table, _fn in (
        ("BACKEND_MEMORY_ALLOCATED", torch.tpu.memory_allocated),
        ("BACKEND_MAX_MEMORY_ALLOCATED", torch.tpu.max_memory_allocated),
        ("BACKEND_RESET_MAX_MEMORY_ALLOCATED", torch.tpu.reset_max_memory_allocated),
        ("BACKEND_RESET_PEAK_MEMORY_STATS", torch.tpu.reset_peak_memory_stats),
        ("BACKEND_SYNCHRONIZE", torch.tpu.synchronize),
        ("BACKEND_TORCH_ACCELERATOR_MODULE", torch.tpu),
    ):
        _d = getattr(_tu, _table, None)
        if isinstance(_d, dict):
            _d[DEVICE_NAME] = _fn
