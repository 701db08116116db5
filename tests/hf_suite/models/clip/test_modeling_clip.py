"""CLIP text encoder (the text encoder of Stable Diffusion-style pipelines): Transformers' common model tests (the
sdist's ModelTesterMixin, ConfigTester) on a 2-layer CLIPTextConfig, with and without the projection."""

import unittest

from transformers import CLIPTextConfig, is_torch_available
from transformers.testing_utils import require_torch, torch_device

from ...model_testers import TinyTextModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin

if is_torch_available():
    import torch

    from transformers import CLIPTextModel, CLIPTextModelWithProjection


class CLIPTextModelTester(TinyTextModelTester):
    config_class = CLIPTextConfig
    projection_dim = 24
    # not 2: CLIPTextConfig's eos_token_id 2 selects the legacy pooling (at the highest token id)
    eos_token_id = 3
    is_training = False  # no loss to train on

    def config_kwargs(self):
        return dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            projection_dim=self.projection_dim,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            dropout=0.1,
            attention_dropout=0.1,
            max_position_embeddings=self.max_position_embeddings,
            initializer_range=0.02,
            eos_token_id=self.eos_token_id,
        )

    def prepare_input_ids(self):
        # the pooled output reads the first end-of-text token: one per row, at a different place in each
        ids = super().prepare_input_ids().clamp(min=self.eos_token_id + 1)
        for row in range(self.batch_size):
            ids[row, self.seq_length - 1 - row % self.seq_length] = self.eos_token_id
        return ids


@require_torch
class CLIPTextModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (CLIPTextModel, CLIPTextModelWithProjection) if is_torch_available() else ()

    def setUp(self):
        self.model_tester = CLIPTextModelTester(self)
        self.config_tester = ConfigTester(self, config_class=CLIPTextConfig, hidden_size=36, num_attention_heads=4)

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        out = self.model_tester.check_base_model_output(CLIPTextModel, config, inputs)
        t = self.model_tester
        self.assertEqual(tuple(out.pooler_output.shape), (t.batch_size, t.hidden_size))
        # the pooled output is the final hidden state at each row's end-of-text token
        eos_positions = (inputs["input_ids"] == t.eos_token_id).int().argmax(-1)
        expected = out.last_hidden_state[torch.arange(t.batch_size, device=torch_device), eos_positions]
        torch.testing.assert_close(out.pooler_output, expected)

    def test_model_with_projection(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = CLIPTextModelWithProjection(config).to(torch_device).eval()
        with torch.no_grad():
            out = model(**inputs)
        t = self.model_tester
        self.assertEqual(tuple(out.text_embeds.shape), (t.batch_size, t.projection_dim))
        self.assertEqual(tuple(out.last_hidden_state.shape), (t.batch_size, t.seq_length, t.hidden_size))

    def test_model_is_causal(self):
        """The CLIP text encoder uses a causal mask: changing the last token changes no earlier hidden state."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = CLIPTextModel(config).to(torch_device).eval()
        ids = inputs["input_ids"]
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % self.model_tester.vocab_size
        with torch.no_grad():
            a = model(input_ids=ids).last_hidden_state
            b = model(input_ids=changed).last_hidden_state
        torch.testing.assert_close(a[:, :-1], b[:, :-1], rtol=1e-5, atol=1e-5)
