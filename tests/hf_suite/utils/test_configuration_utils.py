"""`config_common_kwargs` for the sdist's ConfigTester (test_configuration_common.py imports it from here).

Every attribute `PreTrainedConfig` itself defines, each set to a value other than its default:
`ConfigTester.check_config_arguments_init` builds a config from them and checks every one was kept (`dtype`
is compared as `torch.float16`).
"""

config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "is_encoder_decoder": True,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
