"""Small model testers for the model test files of this tree (tests/models/<family>/test_modeling_<family>.py).

A model tester builds a tiny config of its family and the inputs the sdist's `ModelTesterMixin` feeds every model
class (`prepare_config_and_inputs_for_common`), and exposes the sizes the mixin reads (`batch_size`,
`seq_length`, `hidden_size`, `num_hidden_layers`, ...). Inputs are created on `torch_device` by the sdist's
`ids_tensor` / `floats_tensor` helpers.
"""

from transformers import is_torch_available
from transformers.testing_utils import torch_device

from .test_modeling_common import floats_tensor, ids_tensor, random_attention_mask

if is_torch_available():
    import torch


class TinyTextModelTester:
    """Token inputs for a text model: `input_ids`, `attention_mask` (random holes, first token always kept) and,
    when `type_vocab_size` is set, `token_type_ids`."""

    config_class = None
    # sizes shared by every family: 2 layers, hidden 32 over 4 heads, an odd intermediate size and batch
    batch_size = 3
    seq_length = 7
    vocab_size = 99
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 37
    max_position_embeddings = 512
    type_vocab_size = None
    num_labels = 3
    num_choices = 4
    is_training = True
    use_input_mask = True

    def __init__(self, parent, **overrides):
        self.parent = parent
        for name, value in overrides.items():
            setattr(self, name, value)

    def config_kwargs(self):
        raise NotImplementedError

    def get_config(self):
        return self.config_class(**self.config_kwargs())

    def prepare_input_ids(self):
        return ids_tensor([self.batch_size, self.seq_length], self.vocab_size)

    def prepare_config_and_inputs_for_common(self):
        config = self.get_config()
        inputs = {"input_ids": self.prepare_input_ids()}
        if self.use_input_mask:
            inputs["attention_mask"] = random_attention_mask([self.batch_size, self.seq_length])
        if self.type_vocab_size:
            inputs["token_type_ids"] = ids_tensor([self.batch_size, self.seq_length], self.type_vocab_size)
        return config, inputs

    # model-specific checks the test files call

    def check_base_model_output(self, model_class, config, inputs, expected_hidden_size=None):
        model = model_class(config).to(torch_device).eval()
        with torch.no_grad():
            out = model(**inputs)
        hidden = expected_hidden_size or self.hidden_size
        self.parent.assertEqual(
            tuple(out.last_hidden_state.shape), (self.batch_size, self.seq_length, hidden)
        )
        self.parent.assertEqual(out.last_hidden_state.device.type, torch.device(torch_device).type)
        self.parent.assertTrue(bool(torch.isfinite(out.last_hidden_state).all()))
        return out

    def check_lm_loss_and_backward(self, model_class, config, inputs, labels):
        """A language-model head returns (batch, seq, vocab) logits and a finite loss whose backward reaches
        every parameter that took part."""
        model = model_class(config).to(torch_device).train()
        out = model(**inputs, labels=labels)
        self.parent.assertEqual(tuple(out.logits.shape[:2]), tuple(labels.shape))
        self.parent.assertEqual(out.logits.shape[-1], config.get_text_config().vocab_size)
        self.parent.assertTrue(bool(torch.isfinite(out.loss)))
        out.loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        self.parent.assertGreater(len(grads), 0)
        for g in grads:
            self.parent.assertEqual(g.device.type, torch.device(torch_device).type)
            self.parent.assertTrue(bool(torch.isfinite(g).all()))
        return out


class TinyVisionModelTester:
    """Image inputs: `pixel_values` of (batch, channels, image_size, image_size)."""

    config_class = None
    batch_size = 3
    image_size = 30
    patch_size = 2
    num_channels = 3
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 37
    num_labels = 3
    is_training = True

    def __init__(self, parent, **overrides):
        self.parent = parent
        for name, value in overrides.items():
            setattr(self, name, value)
        # the [CLS] token plus one token per patch
        self.seq_length = (self.image_size // self.patch_size) ** 2 + 1

    def config_kwargs(self):
        raise NotImplementedError

    def get_config(self):
        return self.config_class(**self.config_kwargs())

    def prepare_config_and_inputs_for_common(self):
        pixel_values = floats_tensor([self.batch_size, self.num_channels, self.image_size, self.image_size])
        return self.get_config(), {"pixel_values": pixel_values}


class CausalLMChecks:
    """Model-specific tests of a decoder-only family, mixed into its test class next to ModelTesterMixin.
    The test class names `base_model_class`, `causal_lm_class` and `sequence_classification_class`."""

    base_model_class = None
    causal_lm_class = None
    sequence_classification_class = None

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_model(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        self.model_tester.check_base_model_output(self.base_model_class, config, inputs)

    def test_causal_lm_loss_and_backward(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        labels = ids_tensor([self.model_tester.batch_size, self.model_tester.seq_length], self.model_tester.vocab_size)
        self.model_tester.check_lm_loss_and_backward(self.causal_lm_class, config, inputs, labels)

    def test_model_is_causal(self):
        """Changing the last token changes no earlier logits."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        model = self.causal_lm_class(config).to(torch_device).eval()
        ids = inputs["input_ids"]
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % self.model_tester.vocab_size
        with torch.no_grad():
            a = model(input_ids=ids).logits
            b = model(input_ids=changed).logits
        torch.testing.assert_close(a[:, :-1], b[:, :-1], rtol=1e-5, atol=1e-5)

    def test_sequence_classification_uses_last_non_pad_token(self):
        """The classifier reads the last token that is not padding, wherever it is."""
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        config.num_labels = self.model_tester.num_labels
        model = self.sequence_classification_class(config).to(torch_device).eval()
        pad = config.pad_token_id
        ids = inputs["input_ids"].clamp(min=pad + 1)
        padded = torch.cat([ids, torch.full_like(ids[:, :2], pad)], dim=-1)
        with torch.no_grad():
            a = model(input_ids=ids).logits
            b = model(input_ids=padded).logits
        self.assertEqual(tuple(a.shape), (self.model_tester.batch_size, self.model_tester.num_labels))
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
