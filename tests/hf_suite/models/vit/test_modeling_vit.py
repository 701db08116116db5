"""ViT (vision): Transformers' common model tests (the sdist's ModelTesterMixin, ConfigTester) on a 2-layer config
with 2x2 patches of a 30x30 image, every head class."""

import unittest

from transformers import ViTConfig, is_torch_available
from transformers.testing_utils import require_torch, torch_device

from ...model_testers import TinyVisionModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, floats_tensor, ids_tensor

if is_torch_available():
    import torch

    from transformers import ViTForImageClassification, ViTForMaskedImageModeling, ViTModel


class ViTModelTester(TinyVisionModelTester):
    config_class = ViTConfig

    def __init__(self, parent, **overrides):
        super().__init__(parent, **overrides)
        # masked image modeling masks patches only (not the [CLS] token): 40% of them in the common tests
        self.mask_length = self.seq_length - 1
        self.num_masks = int(0.4 * self.mask_length)

    def config_kwargs(self):
        return dict(
            image_size=self.image_size,
            patch_size=self.patch_size,
            num_channels=self.num_channels,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act="gelu",
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1,
            initializer_range=0.02,
            encoder_stride=self.patch_size,
        )


@require_torch
class ViTModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        (ViTModel, ViTForImageClassification, ViTForMaskedImageModeling) if is_torch_available() else ()
    )
    test_resize_embeddings = False

    def setUp(self):
        self.model_tester = ViTModelTester(self)
        self.config_tester = ConfigTester(self, config_class=ViTConfig, has_text_modality=False, hidden_size=37)

    def test_config(self):
        self.config_tester.run_common_tests()

    @unittest.skip(reason="ViT takes pixel values, not input embeddings")
    def test_inputs_embeds(self):
        pass

    @unittest.skip(reason="ViT takes pixel values, not input embeddings")
    def test_inputs_embeds_matches_input_ids(self):
        pass

    def test_model_get_set_embeddings(self):
        """ViT's input embeddings are its patch embedding (a convolution), and it has no output embeddings."""
        config, _ = self.model_tester.prepare_config_and_inputs_for_common()
        for model_class in self.all_model_classes:
            model = model_class(config)
            self.assertIsInstance(model.get_input_embeddings(), torch.nn.Module)
            output_embeddings = model.get_output_embeddings()
            self.assertTrue(output_embeddings is None or isinstance(output_embeddings, torch.nn.Linear))

    def test_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = ViTModel(config).to(torch_device).eval()
        with torch.no_grad():
            out = model(**inputs)
        t = self.model_tester
        self.assertEqual(tuple(out.last_hidden_state.shape), (t.batch_size, t.seq_length, t.hidden_size))
        self.assertEqual(tuple(out.pooler_output.shape), (t.batch_size, t.hidden_size))

    def test_model_image_classification_loss_and_backward(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.num_labels = self.model_tester.num_labels
        model = ViTForImageClassification(config).to(torch_device).train()
        labels = ids_tensor([self.model_tester.batch_size], self.model_tester.num_labels)
        out = model(**inputs, labels=labels)
        self.assertEqual(tuple(out.logits.shape), (self.model_tester.batch_size, self.model_tester.num_labels))
        out.loss.backward()
        self.assertTrue(bool(torch.isfinite(model.vit.embeddings.patch_embeddings.projection.weight.grad).all()))

    def test_model_masked_image_modeling(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = ViTForMaskedImageModeling(config).to(torch_device).eval()
        t = self.model_tester
        mask = ids_tensor([t.batch_size, t.seq_length - 1], 2).bool()
        with torch.no_grad():
            out = model(**inputs, bool_masked_pos=mask)
        self.assertEqual(tuple(out.reconstruction.shape), (t.batch_size, t.num_channels, t.image_size, t.image_size))
        self.assertTrue(bool(torch.isfinite(out.loss)))

    def test_interpolate_pos_encoding(self):
        """A larger image than the config's runs with interpolated position embeddings."""
        config, _ = self.model_tester.prepare_config_and_inputs_for_common()
        model = ViTModel(config).to(torch_device).eval()
        t = self.model_tester
        size = t.image_size + 2 * t.patch_size
        pixel_values = floats_tensor([t.batch_size, t.num_channels, size, size])
        with torch.no_grad():
            out = model(pixel_values=pixel_values, interpolate_pos_encoding=True)
        self.assertEqual(out.last_hidden_state.shape[1], (size // t.patch_size) ** 2 + 1)
