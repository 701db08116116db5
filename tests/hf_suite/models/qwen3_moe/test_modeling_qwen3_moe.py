"""Qwen3-MoE (decoder-only, mixture of experts): Transformers' common model tests (the sdist's ModelTesterMixin,
ConfigTester) and the generation tests of this tree on a 2-layer config with 4 experts (2 per token) in every
layer, every head class."""

import unittest

from transformers import Qwen3MoeConfig, is_torch_available
from transformers.testing_utils import require_torch, torch_device

from ...generation.test_utils import GenerationTesterMixin
from ...model_testers import CausalLMChecks, TinyTextModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor

if is_torch_available():
    import torch

    from transformers import (
        Qwen3MoeForCausalLM,
        Qwen3MoeForQuestionAnswering,
        Qwen3MoeForSequenceClassification,
        Qwen3MoeForTokenClassification,
        Qwen3MoeModel,
    )


class Qwen3MoeModelTester(TinyTextModelTester):
    config_class = Qwen3MoeConfig
    num_key_value_heads = 2
    num_experts = 4
    num_experts_per_tok = 2

    def config_kwargs(self):
        return dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            moe_intermediate_size=16,
            num_experts=self.num_experts,
            num_experts_per_tok=self.num_experts_per_tok,
            decoder_sparse_step=1,
            norm_topk_prob=True,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.hidden_size // self.num_attention_heads,
            hidden_act="silu",
            max_position_embeddings=self.max_position_embeddings,
            initializer_range=0.02,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )


@require_torch
class Qwen3MoeModelTest(CausalLMChecks, ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    if is_torch_available():
        base_model_class = Qwen3MoeModel
        causal_lm_class = Qwen3MoeForCausalLM
        sequence_classification_class = Qwen3MoeForSequenceClassification
        all_model_classes = (
            Qwen3MoeModel,
            Qwen3MoeForCausalLM,
            Qwen3MoeForSequenceClassification,
            Qwen3MoeForTokenClassification,
            Qwen3MoeForQuestionAnswering,
        )
    # a batch routes to some experts only: the others get no gradient
    test_all_params_have_gradient = False

    def setUp(self):
        self.model_tester = Qwen3MoeModelTester(self)
        self.config_tester = ConfigTester(self, config_class=Qwen3MoeConfig, hidden_size=37)

    def test_moe_router_logits_and_aux_loss(self):
        """Router logits of every layer score each token against each expert; the load-balancing loss is finite
        and enters the language-model loss."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.output_router_logits = True
        model = Qwen3MoeForCausalLM(config).to(torch_device).eval()
        labels = ids_tensor([self.model_tester.batch_size, self.model_tester.seq_length], self.model_tester.vocab_size)
        with torch.no_grad():
            out = model(**inputs, labels=labels)
        tokens = self.model_tester.batch_size * self.model_tester.seq_length
        self.assertEqual(len(out.router_logits), self.model_tester.num_hidden_layers)
        for logits in out.router_logits:
            self.assertEqual(tuple(logits.shape), (tokens, self.model_tester.num_experts))
        self.assertTrue(bool(torch.isfinite(out.aux_loss)))
        self.assertGreater(out.aux_loss.item(), 0)
