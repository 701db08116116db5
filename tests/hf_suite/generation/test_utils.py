"""`GenerationTesterMixin`: `generate()` checks for every generative model class of a model test.

Written for this tree: the sdist of transformers 5.24.0 ships `test_modeling_common.py` (which imports this module
and checks that a test of a generative model inherits the mixin) but not Transformers' own generation tests.
Each check is a property that holds on any correct device, checked on the test device itself:

* greedy decoding equals an argmax loop over the model's forward without a cache, and is the same with and
  without a cache, with a static cache, and with a compiled static-cache forward (Transformers compiles it with
  backend "tpu" on tpu; on cpu it stays eager);
* seeded sampling and beam sampling are reproducible; beam search returns well-formed sequences and scores;
* the dictionary outputs (scores, logits, hidden states, attentions) have the right number and shapes;
* decoder-only models: left padding does not change the next-token logits, generating from `inputs_embeds`
  equals generating from `input_ids`, continuing from returned `past_key_values` equals one longer generate,
  the cache has one (batch, kv_heads, length, head_dim) entry per layer, assisted and prompt-lookup decoding
  equal greedy decoding.
"""

import copy
import inspect

import pytest

from transformers import is_torch_available
from transformers.testing_utils import torch_device

if is_torch_available():
    import torch


class GenerationTesterMixin:
    input_name = "input_ids"
    model_tester = None
    max_new_tokens = 3

    # inputs a generate() call must not get from the common test inputs
    _inputs_not_for_generate = (
        "decoder_input_ids",
        "decoder_attention_mask",
        "labels",
        "use_cache",
        "head_mask",
        "decoder_head_mask",
        "cross_attn_head_mask",
        "token_type_ids",
    )

    # -- helpers ---------------------------------------------------------------------------------------------

    def prepare_config_and_inputs_for_generate(self, batch_size=2):
        config, inputs_dict = self.model_tester.prepare_config_and_inputs_for_common()
        inputs = {
            k: (v[:batch_size].to(torch_device) if isinstance(v, torch.Tensor) else v)
            for k, v in inputs_dict.items()
            if k not in self._inputs_not_for_generate
        }
        # no early stop: length checks below count on exactly max_new_tokens new tokens
        text_config = config.get_text_config(decoder=True)
        if text_config.eos_token_id is not None and text_config.pad_token_id is None:
            eos = text_config.eos_token_id
            text_config.pad_token_id = eos if isinstance(eos, int) else eos[0]
        text_config.eos_token_id = None
        text_config.forced_eos_token_id = None
        return config, inputs

    def _generative_models(self, config, attn_implementation=None):
        for model_class in self.all_generative_model_classes:
            model_config = copy.deepcopy(config)
            if attn_implementation is not None:
                model_config._attn_implementation = attn_implementation
            model = model_class(model_config).to(torch_device).eval()
            # the generation config derived from the model config may carry eos/forced tokens: drop them
            model.generation_config.eos_token_id = None
            model.generation_config.forced_eos_token_id = None
            model.generation_config.forced_bos_token_id = None
            yield model_class, model

    def _generate(self, model, inputs, **kwargs):
        kwargs.setdefault("max_new_tokens", self.max_new_tokens)
        kwargs.setdefault("do_sample", False)
        kwargs.setdefault("num_beams", 1)
        with torch.no_grad():
            return model.generate(**inputs, **kwargs)

    def _expected_length(self, model, inputs, new_tokens):
        if model.config.is_encoder_decoder:
            return 1 + new_tokens  # decoder start token + new tokens
        return inputs[self.input_name].shape[-1] + new_tokens

    def _assert_same_tokens(self, expected, actual, step_logits=None, prompt_length=0, tol=1e-4):
        """Token sequences must be equal; a difference is accepted only where the reference logits of the two
        tokens are tied within `tol` (then the rest of the sequence legitimately differs)."""
        self.assertEqual(expected.shape, actual.shape)
        if torch.equal(expected.cpu(), actual.cpu()):
            return
        self.assertIsNotNone(step_logits, f"generated tokens differ:\n{expected}\n{actual}")
        expected, actual = expected.cpu(), actual.cpu()
        for row in range(expected.shape[0]):
            diff = (expected[row] != actual[row]).nonzero()
            if diff.numel() == 0:
                continue
            pos = int(diff[0])
            logits = step_logits[pos - prompt_length][row].float().cpu()
            gap = (logits[expected[row, pos]] - logits[actual[row, pos]]).abs().item()
            self.assertLessEqual(
                gap, tol * (1 + logits.abs().max().item()), f"row {row} differs at {pos}:\n{expected}\n{actual}"
            )

    def _decoder_only(self, model):
        if model.config.is_encoder_decoder:
            self.skipTest(reason="decoder-only check")

    # -- greedy -----------------------------------------------------------------------------------------------

    @pytest.mark.generate
    def test_greedy_generate(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            out = self._generate(model, inputs)
            self.assertEqual(out.shape[0], inputs[self.input_name].shape[0])
            self.assertEqual(out.shape[-1], self._expected_length(model, inputs, self.max_new_tokens))
            self.assertEqual(out.device.type, torch.device(torch_device).type)

    @pytest.mark.generate
    def test_greedy_generate_dict_outputs(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config, attn_implementation="eager"):
            out = self._generate(
                model,
                inputs,
                return_dict_in_generate=True,
                output_scores=True,
                output_logits=True,
                output_hidden_states=True,
                output_attentions=True,
            )
            batch = inputs[self.input_name].shape[0]
            vocab = model.config.get_text_config(decoder=True).vocab_size
            self.assertEqual(out.sequences.shape, (batch, self._expected_length(model, inputs, self.max_new_tokens)))
            self.assertEqual(len(out.scores), self.max_new_tokens)
            self.assertEqual(len(out.logits), self.max_new_tokens)
            for scores, logits in zip(out.scores, out.logits):
                self.assertEqual(scores.shape, (batch, vocab))
                self.assertEqual(logits.shape, (batch, vocab))
            hidden = out.decoder_hidden_states if model.config.is_encoder_decoder else out.hidden_states
            attentions = out.decoder_attentions if model.config.is_encoder_decoder else out.attentions
            num_layers = model.config.get_text_config(decoder=True).num_hidden_layers
            self.assertEqual(len(hidden), self.max_new_tokens)
            self.assertEqual(len(attentions), self.max_new_tokens)
            for step in range(self.max_new_tokens):
                self.assertEqual(len(hidden[step]), num_layers + 1)
                self.assertEqual(len(attentions[step]), num_layers)
                self.assertEqual(hidden[step][-1].shape[0], batch)

    @pytest.mark.generate
    def test_greedy_generate_matches_forward(self):
        """generate() equals an argmax loop over the full forward (no cache)."""
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            out = self._generate(model, inputs)
            input_ids = inputs[self.input_name]
            mask = inputs.get("attention_mask")
            step_logits = []
            with torch.no_grad():
                if model.config.is_encoder_decoder:
                    start = model.generation_config.decoder_start_token_id
                    if start is None:
                        start = model.config.decoder_start_token_id
                    tokens = torch.full((input_ids.shape[0], 1), start, dtype=torch.long, device=torch_device)
                    prompt_length = 1
                    for _ in range(self.max_new_tokens):
                        logits = model(
                            input_ids=input_ids, attention_mask=mask, decoder_input_ids=tokens, use_cache=False
                        ).logits[:, -1]
                        step_logits.append(logits)
                        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=-1)
                else:
                    tokens = input_ids
                    prompt_length = input_ids.shape[-1]
                    # the position ids generate() derives from the attention mask: masked positions get 0, each
                    # new token the previous position + 1
                    kwargs = {}
                    takes_positions = "position_ids" in inspect.signature(model.forward).parameters
                    if takes_positions and mask is not None:
                        kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
                    for _ in range(self.max_new_tokens):
                        logits = model(input_ids=tokens, attention_mask=mask, use_cache=False, **kwargs).logits[:, -1]
                        step_logits.append(logits)
                        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=-1)
                        if mask is not None:
                            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
                        if "position_ids" in kwargs:
                            kwargs["position_ids"] = torch.cat([kwargs["position_ids"], kwargs["position_ids"][:, -1:] + 1], -1)
            self._assert_same_tokens(tokens, out, step_logits, prompt_length)

    @pytest.mark.generate
    def test_greedy_generate_cache_equivalence(self):
        """With and without a KV cache, greedy decoding picks the same tokens."""
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            with_cache = self._generate(model, inputs, use_cache=True, return_dict_in_generate=True, output_logits=True)
            without = self._generate(model, inputs, use_cache=False)
            prompt = with_cache.sequences.shape[-1] - len(with_cache.logits)
            self._assert_same_tokens(with_cache.sequences, without, with_cache.logits, prompt)

    @pytest.mark.generate
    def test_generate_static_cache(self):
        """A static cache gives the same tokens as the default dynamic cache."""
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for model_class, model in self._generative_models(config):
            if not model_class._can_compile_fullgraph:
                self.skipTest(reason=f"{model_class.__name__} does not support a static cache")
            dynamic = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            static = self._generate(model, inputs, cache_implementation="static", disable_compile=True)
            prompt = dynamic.sequences.shape[-1] - len(dynamic.logits)
            self._assert_same_tokens(dynamic.sequences, static, dynamic.logits, prompt)

    @pytest.mark.generate
    @pytest.mark.torch_compile_test
    def test_generate_compiled_static_cache(self):
        """Static cache with Transformers' auto-compile of the decoding forward (backend "tpu" on tpu; no compile
        on cpu) gives the same tokens as eager decoding."""
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for model_class, model in self._generative_models(config):
            if not model_class._can_compile_fullgraph:
                self.skipTest(reason=f"{model_class.__name__} cannot be compiled with a static cache")
            eager = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            compiled = self._generate(model, inputs, cache_implementation="static", max_new_tokens=self.max_new_tokens)
            if torch.device(torch_device).type == "tpu":
                self.assertTrue(hasattr(model, "_compiled_call"), "generate() did not compile the forward on tpu")
            prompt = eager.sequences.shape[-1] - len(eager.logits)
            self._assert_same_tokens(eager.sequences, compiled, eager.logits, prompt)

    # -- sampling and beams -----------------------------------------------------------------------------------

    @pytest.mark.generate
    def test_sample_generate(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            kwargs = dict(do_sample=True, top_k=10, top_p=0.7, temperature=0.7, num_return_sequences=2)
            torch.manual_seed(0)
            first = self._generate(model, inputs, **kwargs)
            torch.manual_seed(0)
            second = self._generate(model, inputs, **kwargs)
            batch = inputs[self.input_name].shape[0]
            self.assertEqual(first.shape, (batch * 2, self._expected_length(model, inputs, self.max_new_tokens)))
            self.assertTrue(torch.equal(first.cpu(), second.cpu()), "seeded sampling is not reproducible")
            vocab = model.config.get_text_config(decoder=True).vocab_size
            self.assertTrue(bool(((first >= 0) & (first < vocab)).all()))

    @pytest.mark.generate
    def test_sample_generate_top_k_1_is_greedy(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            greedy = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            torch.manual_seed(0)
            sampled = self._generate(model, inputs, do_sample=True, top_k=1)
            prompt = greedy.sequences.shape[-1] - len(greedy.logits)
            self._assert_same_tokens(greedy.sequences, sampled, greedy.logits, prompt)

    @pytest.mark.generate
    def test_beam_search_generate(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            out = self._generate(
                model,
                inputs,
                num_beams=2,
                num_return_sequences=2,
                length_penalty=2.0,
                early_stopping=False,
                return_dict_in_generate=True,
                output_scores=True,
            )
            batch = inputs[self.input_name].shape[0]
            self.assertEqual(out.sequences.shape, (batch * 2, self._expected_length(model, inputs, self.max_new_tokens)))
            self.assertEqual(out.sequences_scores.shape, (batch * 2,))
            self.assertTrue(bool(torch.isfinite(out.sequences_scores).all()))
            self.assertEqual(len(out.scores), self.max_new_tokens)
            # the beams of one prompt come out best first
            scores = out.sequences_scores.view(batch, 2).cpu()
            self.assertTrue(bool((scores[:, 0] >= scores[:, 1] - 1e-6).all()))

    @pytest.mark.generate
    def test_beam_search_one_beam_is_greedy(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            greedy = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            beam = self._generate(model, inputs, num_beams=1, num_return_sequences=1)
            prompt = greedy.sequences.shape[-1] - len(greedy.logits)
            self._assert_same_tokens(greedy.sequences, beam, greedy.logits, prompt)

    @pytest.mark.generate
    def test_beam_sample_generate(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            kwargs = dict(do_sample=True, num_beams=2, num_return_sequences=2, top_k=10, temperature=0.7)
            torch.manual_seed(0)
            first = self._generate(model, inputs, **kwargs)
            torch.manual_seed(0)
            second = self._generate(model, inputs, **kwargs)
            batch = inputs[self.input_name].shape[0]
            self.assertEqual(first.shape, (batch * 2, self._expected_length(model, inputs, self.max_new_tokens)))
            self.assertTrue(torch.equal(first.cpu(), second.cpu()), "seeded beam sampling is not reproducible")

    # -- decoder-only -----------------------------------------------------------------------------------------

    @pytest.mark.generate
    def test_left_padding_compatibility(self):
        """Left padding (with its attention mask and position ids) leaves the next-token logits unchanged."""
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for model_class, model in self._generative_models(config):
            self._decoder_only(model)
            input_ids = inputs[self.input_name]
            mask = torch.ones_like(input_ids)
            pad = model.config.get_text_config(decoder=True).pad_token_id
            pad = 0 if pad is None else pad
            padded_ids = torch.cat([torch.full_like(input_ids[:, :3], pad), input_ids], dim=-1)
            padded_mask = torch.cat([torch.zeros_like(mask[:, :3]), mask], dim=-1)
            takes_positions = "position_ids" in inspect.signature(model.forward).parameters
            with torch.no_grad():
                kwargs = {}
                if takes_positions:
                    kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
                plain = model(input_ids=input_ids, attention_mask=mask, **kwargs).logits[:, -1]
                if takes_positions:
                    kwargs["position_ids"] = (padded_mask.cumsum(-1) - 1).clamp(min=0)
                padded = model(input_ids=padded_ids, attention_mask=padded_mask, **kwargs).logits[:, -1]
            torch.testing.assert_close(plain, padded, rtol=1e-5, atol=1e-5)

    @pytest.mark.generate
    def test_generate_from_inputs_embeds(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            self._decoder_only(model)
            input_ids = inputs[self.input_name]
            from_ids = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            embeds_inputs = {k: v for k, v in inputs.items() if k != self.input_name}
            embeds_inputs["inputs_embeds"] = model.get_input_embeddings()(input_ids)
            from_embeds = self._generate(model, embeds_inputs)
            # generate(inputs_embeds=...) returns only the new tokens
            self.assertEqual(from_embeds.shape[-1], self.max_new_tokens)
            prompt = input_ids.shape[-1]
            self._assert_same_tokens(
                from_ids.sequences[:, prompt:], from_embeds, from_ids.logits, prompt_length=0
            )

    @pytest.mark.generate
    def test_generate_continue_from_past_key_values(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            self._decoder_only(model)
            # a prompt whose mask ends in a hole gets other position ids when generation restarts from the mask
            # (cumulative count) than when it continues (last position + 1): keep the whole prompt attended
            if "attention_mask" in inputs:
                inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
            n = self.max_new_tokens
            full = self._generate(model, inputs, max_new_tokens=2 * n, return_dict_in_generate=True, output_logits=True)
            first = self._generate(model, inputs, max_new_tokens=n, return_dict_in_generate=True)
            self.assertIsNotNone(first.past_key_values)
            cont_inputs = dict(inputs)
            cont_inputs[self.input_name] = first.sequences
            if "attention_mask" in inputs:
                mask = inputs["attention_mask"]
                cont_inputs["attention_mask"] = torch.cat([mask, torch.ones_like(mask[:, :1]).expand(-1, n)], dim=-1)
            second = self._generate(model, cont_inputs, max_new_tokens=n, past_key_values=first.past_key_values)
            prompt = full.sequences.shape[-1] - len(full.logits)
            self._assert_same_tokens(full.sequences, second, full.logits, prompt)

    @pytest.mark.generate
    def test_past_key_values_format(self):
        config, inputs = self.prepare_config_and_inputs_for_generate()
        for _, model in self._generative_models(config):
            self._decoder_only(model)
            text_config = model.config.get_text_config(decoder=True)
            with torch.no_grad():
                out = model(**inputs, use_cache=True)
            cache = out.past_key_values
            self.assertIsNotNone(cache)
            self.assertEqual(len(cache.layers), text_config.num_hidden_layers)
            batch, length = inputs[self.input_name].shape
            heads = getattr(text_config, "num_key_value_heads", None) or text_config.num_attention_heads
            head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // text_config.num_attention_heads
            for layer in cache.layers:
                self.assertEqual(tuple(layer.keys.shape), (batch, heads, length, head_dim))
                self.assertEqual(tuple(layer.values.shape), (batch, heads, length, head_dim))
                self.assertEqual(layer.keys.device.type, torch.device(torch_device).type)

    @pytest.mark.generate
    def test_assisted_decoding_matches_greedy(self):
        """Speculative decoding with the model as its own assistant, and prompt-lookup decoding, equal greedy."""
        config, inputs = self.prepare_config_and_inputs_for_generate(batch_size=1)
        for _, model in self._generative_models(config):
            self._decoder_only(model)
            greedy = self._generate(model, inputs, return_dict_in_generate=True, output_logits=True)
            prompt = greedy.sequences.shape[-1] - len(greedy.logits)
            assistant = copy.deepcopy(model)
            assistant.generation_config.num_assistant_tokens = 2
            assistant.generation_config.num_assistant_tokens_schedule = "constant"
            assisted = self._generate(model, inputs, assistant_model=assistant)
            self._assert_same_tokens(greedy.sequences, assisted, greedy.logits, prompt)
            lookup = self._generate(model, inputs, prompt_lookup_num_tokens=2)
            self._assert_same_tokens(greedy.sequences, lookup, greedy.logits, prompt)
