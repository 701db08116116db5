"""Small Hugging Face pieces for tests, examples and benchmarks that build models from configs (no model hub)."""

from __future__ import annotations

import json
import os
from typing import Any


def char_clip_tokenizer(d: str, max_length: int = 16) -> Any:
    r"""A CLIP tokenizer over single lowercase letters (ids 2..53), with its vocabulary written into directory ``d``.

    Token ids stay below 60, the vocabulary size of the tiny text encoders built alongside it.
    """
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    with open(os.path.join(d, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    return CLIPTokenizer(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"), model_max_length=max_length,
                         pad_token="<|endoftext|>")
