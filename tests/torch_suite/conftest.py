"""conftest for PyTorch's test files run by tools/torch_suite.py (copied beside them into the build tree).

* TORCH_SUITE_DEVICE=tpu: imports torch_tpu before pytest imports a test module, so the PrivateUse1 backend ("tpu")
  is registered when torch.testing._internal.common_device_type is first imported: its list of device test bases
  then includes PrivateUse1TestBase, and instantiate_device_type_tests makes the tpu classes
  (PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1 keeps only those). TORCH_SUITE_DEVICE=cpu imports nothing of ours
  (torch's backend autoloading is off for that run).
* Older test files (the published results were measured with a copy of PyTorch's test/ older than the installed
  torch: README.md) import a few names the installed torch.testing._internal no longer has; `_compat` defines those
  (and nothing that exists). Files of the installed torch's tag need none of it.
* Only device-generic tests are collected (methods of classes instantiated per device type); the plain TestCase
  classes of a file run the same CPU code whatever the device and are deselected.
"""

import os

if os.environ.get("TORCH_SUITE_DEVICE", "cpu") != "cpu":
    import torch_tpu  # noqa: F401  (before torch.testing._internal.common_device_type)


def _compat():
    import torch.testing._internal.common_cuda as common_cuda
    import torch.testing._internal.common_methods_invocations as cmi
    import torch.testing._internal.common_nn as common_nn
    import torch.testing._internal.common_utils as common_utils

    def define(module, name, value):
        if not hasattr(module, name):
            setattr(module, name, value)

    define(common_utils, "skipIfMps", lambda fn: fn)  # these runs are never on MPS
    define(common_cuda, "tf32_is_not_fp32", lambda: False)  # nor on CUDA
    define(cmi, "binary_ufuncs_and_refs", tuple(op for op in list(cmi.op_db) + list(cmi.python_ref_db)
                                               if isinstance(op, cmi.BinaryUfuncInfo)))
    define(cmi, "foreach_lerp_op_db",
           [op for op in getattr(cmi, "foreach_pointwise_op_db", ()) if op.name == "_foreach_lerp"])
    define(common_nn, "new_module_tests", [])  # module tests moved to ModuleInfo (test_modules.py)


_compat()


def pytest_collection_modifyitems(config, items):
    from torch.testing._internal.common_device_type import DeviceTypeTestBase

    keep, drop = [], []
    for item in items:
        cls = getattr(item, "cls", None)
        (keep if cls is not None and issubclass(cls, DeviceTypeTestBase) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
