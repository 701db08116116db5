"""Qwen3 (decoder-only, dense): Transformers' common model tests (the sdist's ModelTesterMixin, ConfigTester) and the
generation tests of this tree on a 2-layer config with grouped-query attention, every head class."""

import unittest

from transformers import Qwen3Config, is_torch_available
from transformers.testing_utils import require_torch

from ...generation.test_utils import GenerationTesterMixin
from ...model_testers import CausalLMChecks, TinyTextModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin

if is_torch_available():
    from transformers import (
        Qwen3ForCausalLM,
        Qwen3ForQuestionAnswering,
        Qwen3ForSequenceClassification,
        Qwen3ForTokenClassification,
        Qwen3Model,
    )


class Qwen3ModelTester(TinyTextModelTester):
    config_class = Qwen3Config
    num_key_value_heads = 2  # grouped-query attention: 2 query heads per key/value head

    def config_kwargs(self):
        return dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
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
class Qwen3ModelTest(CausalLMChecks, ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    if is_torch_available():
        base_model_class = Qwen3Model
        causal_lm_class = Qwen3ForCausalLM
        sequence_classification_class = Qwen3ForSequenceClassification
        all_model_classes = (
            Qwen3Model,
            Qwen3ForCausalLM,
            Qwen3ForSequenceClassification,
            Qwen3ForTokenClassification,
            Qwen3ForQuestionAnswering,
        )

    def setUp(self):
        self.model_tester = Qwen3ModelTester(self)
        self.config_tester = ConfigTester(self, config_class=Qwen3Config, hidden_size=37)
