"""T5 (encoder-decoder, and its encoder alone as used by diffusion pipelines): Transformers' common model tests (the
sdist's ModelTesterMixin, ConfigTester) and the generation tests of this tree on a 2+2-layer config with relative
position buckets, every head class."""

import copy
import unittest

from transformers import T5Config, is_torch_available
from transformers.testing_utils import require_torch, torch_device

from ...generation.test_utils import GenerationTesterMixin
from ...model_testers import TinyTextModelTester
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor

if is_torch_available():
    import torch

    from transformers import (
        T5EncoderModel,
        T5ForConditionalGeneration,
        T5ForQuestionAnswering,
        T5ForSequenceClassification,
        T5ForTokenClassification,
        T5Model,
    )


class T5ModelTester(TinyTextModelTester):
    config_class = T5Config
    pad_token_id = 0
    eos_token_id = 1
    decoder_start_token_id = 0
    is_encoder_decoder = True

    def config_kwargs(self):
        return dict(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            d_ff=self.intermediate_size,
            d_kv=self.hidden_size // self.num_attention_heads,
            num_layers=self.num_hidden_layers,
            num_decoder_layers=self.num_hidden_layers,
            num_heads=self.num_attention_heads,
            relative_attention_num_buckets=8,
            dropout_rate=0.1,
            initializer_factor=0.002,
            eos_token_id=self.eos_token_id,
            pad_token_id=self.pad_token_id,
            decoder_start_token_id=self.decoder_start_token_id,
            is_encoder_decoder=self.is_encoder_decoder,
        )

    def prepare_input_ids(self):
        # one </s> per sequence, at the end (T5ForSequenceClassification pools the </s> token); no padding tokens
        ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(min=2)
        ids[:, -1] = self.eos_token_id
        return ids

    def prepare_config_and_inputs_for_common(self):
        config, inputs = super().prepare_config_and_inputs_for_common()
        if self.is_encoder_decoder:
            inputs["decoder_input_ids"] = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(min=2)
            inputs["decoder_attention_mask"] = torch.ones_like(inputs["decoder_input_ids"])
        return config, inputs


@require_torch
class T5ModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    # T5ForSequenceClassification pools the </s> token and requires one per row at the same count: the common
    # tests pad and truncate inputs freely, so it has its own test below
    all_model_classes = (T5Model, T5ForConditionalGeneration, T5ForQuestionAnswering) if is_torch_available() else ()
    is_encoder_decoder = True

    @unittest.skip(reason="T5ForConditionalGeneration holds its encoder and decoder itself, with no base model")
    def test_model_base_model_prefix(self):
        pass

    def setUp(self):
        self.model_tester = T5ModelTester(self)
        self.config_tester = ConfigTester(self, config_class=T5Config, d_model=37)

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = T5Model(config).to(torch_device).eval()
        with torch.no_grad():
            out = model(**inputs)
        b, s, h = self.model_tester.batch_size, self.model_tester.seq_length, self.model_tester.hidden_size
        self.assertEqual(tuple(out.last_hidden_state.shape), (b, s, h))
        self.assertEqual(tuple(out.encoder_last_hidden_state.shape), (b, s, h))
        self.assertEqual(len(out.past_key_values.self_attention_cache.layers), self.model_tester.num_hidden_layers)

    def test_model_conditional_generation_loss_and_backward(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        labels = ids_tensor([self.model_tester.batch_size, self.model_tester.seq_length], self.model_tester.vocab_size)
        inputs = {k: v for k, v in inputs.items() if not k.startswith("decoder_")}  # shifted from the labels
        self.model_tester.check_lm_loss_and_backward(T5ForConditionalGeneration, config, inputs, labels)

    def test_model_sequence_classification(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.num_labels = self.model_tester.num_labels
        model = T5ForSequenceClassification(config).to(torch_device).eval()
        labels = ids_tensor([self.model_tester.batch_size], self.model_tester.num_labels)
        with torch.no_grad():
            out = model(**inputs, labels=labels)
        self.assertEqual(tuple(out.logits.shape), (self.model_tester.batch_size, self.model_tester.num_labels))
        self.assertTrue(bool(torch.isfinite(out.loss)))

    def test_decoder_past_matches_full_forward(self):
        """Decoding the last token with the cache of the others gives the full forward's last logits."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = T5ForConditionalGeneration(config).to(torch_device).eval()
        dec = inputs["decoder_input_ids"]
        enc = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
        with torch.no_grad():
            full = model(**enc, decoder_input_ids=dec).logits[:, -1]
            prefix = model(**enc, decoder_input_ids=dec[:, :-1], use_cache=True)
            step = model(
                encoder_outputs=(prefix.encoder_last_hidden_state,),
                attention_mask=enc["attention_mask"],
                decoder_input_ids=dec[:, -1:],
                past_key_values=prefix.past_key_values,
            ).logits[:, -1]
        torch.testing.assert_close(full, step, rtol=1e-4, atol=1e-4)


class T5EncoderOnlyModelTester(T5ModelTester):
    is_encoder_decoder = False
    is_training = False  # T5EncoderModel has no loss to train on


@require_torch
class T5EncoderOnlyModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (T5EncoderModel, T5ForTokenClassification) if is_torch_available() else ()

    def setUp(self):
        self.model_tester = T5EncoderOnlyModelTester(self)
        self.config_tester = ConfigTester(self, config_class=T5Config, d_model=37)

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_encoder_only_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        self.model_tester.check_base_model_output(T5EncoderModel, config, inputs)

    def test_encoder_only_matches_encoder_of_full_model(self):
        """T5EncoderModel loaded from a T5ForConditionalGeneration state dict computes that model's encoder."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        full_config = copy.deepcopy(config)
        full_config.is_encoder_decoder = True
        full = T5ForConditionalGeneration(full_config).to(torch_device).eval()
        encoder = T5EncoderModel(config).to(torch_device).eval()
        missing, unexpected = encoder.load_state_dict(full.state_dict(), strict=False)
        self.assertEqual(missing, [])
        with torch.no_grad():
            a = full.get_encoder()(**inputs).last_hidden_state
            b = encoder(**inputs).last_hidden_state
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
