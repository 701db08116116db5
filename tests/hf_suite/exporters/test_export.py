"""`ExportTesterMixin`, which the sdist's `ModelTesterMixin` derives from: `torch.export` of every model class.

Written for this tree (the upstream module is not part of the transformers sdist). Each model class is exported
with `torch.export.export(strict=False)` on the test device, and the exported program must reproduce the eager
outputs on that device.
"""

import copy
import inspect

from transformers import is_torch_available
from transformers.testing_utils import torch_device

if is_torch_available():
    import torch
    from torch.utils._pytree import tree_leaves


class ExportTesterMixin:
    test_torch_exportable = True

    def _export_inputs(self, model_class, inputs_dict):
        inputs = self._prepare_for_class(inputs_dict, model_class)
        inputs = {k: v.to(torch_device) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        if "use_cache" in inspect.signature(model_class.forward).parameters:
            inputs["use_cache"] = False  # a DynamicCache output is not part of what export compares
        return inputs

    def test_torch_export(self):
        if not self.test_torch_exportable:
            self.skipTest(reason="test_torch_exportable is False for this model")
        config, inputs_dict = self.model_tester.prepare_config_and_inputs_for_common()
        for model_class in self.all_model_classes:
            with self.subTest(model_class.__name__):
                model = model_class(copy.deepcopy(config)).to(torch_device).eval()
                inputs = self._export_inputs(model_class, inputs_dict)
                with torch.no_grad():
                    eager = model(**inputs)
                    program = torch.export.export(model, args=(), kwargs=inputs, strict=False)
                    exported = program.module()(**inputs)
                eager_leaves = [t for t in tree_leaves(eager) if isinstance(t, torch.Tensor)]
                exported_leaves = [t for t in tree_leaves(exported) if isinstance(t, torch.Tensor)]
                self.assertEqual(len(eager_leaves), len(exported_leaves))
                self.assertGreater(len(eager_leaves), 0)
                for a, b in zip(eager_leaves, exported_leaves):
                    self.assertEqual(a.device, b.device)
                    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
