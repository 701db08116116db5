"""BERT (encoder-only): Transformers' common model tests (the sdist's ModelTesterMixin, ConfigTester) on a 2-layer
config, every head class, plus forward checks of each head."""

import unittest

from transformers import BertConfig, is_torch_available
from transformers.testing_utils import require_torch, torch_device

from ...model_testers import TinyTextModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor

if is_torch_available():
    import torch

    from transformers import (
        BertForMaskedLM,
        BertForMultipleChoice,
        BertForNextSentencePrediction,
        BertForPreTraining,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertLMHeadModel,
        BertModel,
    )


class BertModelTester(TinyTextModelTester):
    config_class = BertConfig
    type_vocab_size = 16

    def config_kwargs(self):
        return dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act="gelu",
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            initializer_range=0.02,
        )


@require_torch
class BertModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        (
            BertModel,
            BertLMHeadModel,
            BertForMaskedLM,
            BertForMultipleChoice,
            BertForNextSentencePrediction,
            BertForPreTraining,
            BertForQuestionAnswering,
            BertForSequenceClassification,
            BertForTokenClassification,
        )
        if is_torch_available()
        else ()
    )

    # BertLMHeadModel can generate only as a decoder (is_decoder=True); this tester builds the encoder
    @property
    def all_generative_model_classes(self):
        return ()

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if return_labels and model_class is BertForPreTraining:
            b, s = self.model_tester.batch_size, self.model_tester.seq_length
            inputs_dict["labels"] = torch.zeros((b, s), dtype=torch.long, device=torch_device)
            inputs_dict["next_sentence_label"] = torch.zeros(b, dtype=torch.long, device=torch_device)
        return inputs_dict

    def setUp(self):
        self.model_tester = BertModelTester(self)
        self.config_tester = ConfigTester(self, config_class=BertConfig, hidden_size=37)

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        out = self.model_tester.check_base_model_output(BertModel, config, inputs)
        self.assertEqual(tuple(out.pooler_output.shape), (self.model_tester.batch_size, self.model_tester.hidden_size))

    def test_model_masked_lm(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        labels = ids_tensor([self.model_tester.batch_size, self.model_tester.seq_length], self.model_tester.vocab_size)
        self.model_tester.check_lm_loss_and_backward(BertForMaskedLM, config, inputs, labels)

    def test_model_sequence_classification(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.num_labels = self.model_tester.num_labels
        model = BertForSequenceClassification(config).to(torch_device).eval()
        labels = ids_tensor([self.model_tester.batch_size], self.model_tester.num_labels)
        out = model(**inputs, labels=labels)
        self.assertEqual(tuple(out.logits.shape), (self.model_tester.batch_size, self.model_tester.num_labels))
        self.assertTrue(bool(torch.isfinite(out.loss)))

    def test_model_question_answering(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = BertForQuestionAnswering(config).to(torch_device).eval()
        positions = ids_tensor([self.model_tester.batch_size], self.model_tester.seq_length)
        out = model(**inputs, start_positions=positions, end_positions=positions)
        shape = (self.model_tester.batch_size, self.model_tester.seq_length)
        self.assertEqual(tuple(out.start_logits.shape), shape)
        self.assertEqual(tuple(out.end_logits.shape), shape)
        self.assertTrue(bool(torch.isfinite(out.loss)))

    def test_model_multiple_choice(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        n = self.model_tester.num_choices
        choice_inputs = {k: v.unsqueeze(1).expand(-1, n, -1).contiguous() for k, v in inputs.items()}
        model = BertForMultipleChoice(config).to(torch_device).eval()
        out = model(**choice_inputs, labels=ids_tensor([self.model_tester.batch_size], n))
        self.assertEqual(tuple(out.logits.shape), (self.model_tester.batch_size, n))

    def test_model_as_decoder(self):
        """BertLMHeadModel as a causal decoder: a token's logits do not depend on later tokens."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.is_decoder = True
        model = BertLMHeadModel(config).to(torch_device).eval()
        ids = inputs["input_ids"]
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % self.model_tester.vocab_size
        with torch.no_grad():
            a = model(input_ids=ids).logits
            b = model(input_ids=changed).logits
        torch.testing.assert_close(a[:, :-1], b[:, :-1], rtol=1e-5, atol=1e-5)
