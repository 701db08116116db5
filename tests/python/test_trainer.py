"""Hugging Face ``Trainer`` on tpu as Transformers' documentation shows it, with no environment variable.

A config-built tiny Qwen3 is saved with ``save_pretrained`` and loaded with ``from_pretrained``; ``Trainer`` trains it
on a tiny dataset on tpu (``TrainingArguments`` picks ``tpu:0``, Accelerate agrees: torch_tpu/_accelerate.py) and on
the CPU (``use_cpu=True``), and the logged losses must match: a full fine-tune, a PEFT LoRA fine-tune, a run with
gradient accumulation, gradient checkpointing and clipping, and a 2-process ``torchrun`` run, where ``Trainer``
wraps the model in DDP over the ``tpu_dist`` backend.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu  # noqa: F401
from torch_tpu.testing.dist import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=64, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    path = tmp_path_factory.mktemp("qwen3")
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    Qwen3ForCausalLM(Qwen3Config(**CONFIG)).save_pretrained(path)
    torch.random.set_rng_state(state)
    return str(path)


class TinyLM(torch.utils.data.Dataset):
    def __init__(self, n=16, length=12):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, CONFIG["vocab_size"], (n, length), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def train(path, device, out, lora=False, batch=4, **extra):
    from transformers import Qwen3ForCausalLM, Trainer, TrainingArguments

    assert "ACCELERATE_TORCH_DEVICE" not in os.environ
    model = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32)
    if lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(1)
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"]))
    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=batch, max_steps=4,
                             learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no", use_cpu=device == "cpu", seed=0,
                             dataloader_num_workers=0, disable_tqdm=True, **extra)
    trainer = Trainer(model=model, args=args, train_dataset=TinyLM())
    assert args.device.type == device
    assert trainer.accelerator.device.type == device
    trainer.train()
    assert next(trainer.model.parameters()).device.type == device
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def assert_same_losses(cpu, tpu, steps=4):
    assert len(cpu) == len(tpu) == steps, (cpu, tpu)
    for a, b in zip(cpu, tpu):
        assert abs(a - b) <= 2e-4, (cpu, tpu)  # the log rounds to 4 decimals


@pytest.fixture(autouse=True)
def no_accelerate_device(monkeypatch):
    monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)


@pytest.mark.parametrize("case", ["full", "lora", "accumulation_checkpointing_clipping"])
def test_trainer_matches_cpu(case, qwen3_dir, tmp_path):
    kw = {}
    if case == "lora":
        kw["lora"] = True
    elif case == "accumulation_checkpointing_clipping":
        kw.update(gradient_accumulation_steps=2, gradient_checkpointing=True, max_grad_norm=0.5)
    cpu = train(qwen3_dir, "cpu", tmp_path / "cpu", **kw)
    torch_tpu.reset_fallback_counts()
    tpu = train(qwen3_dir, "tpu", tmp_path / "tpu", **kw)
    assert torch_tpu._C._fallback_counts() == {}
    assert_same_losses(cpu, tpu)


def test_user_choices_kept(monkeypatch):
    # use_cpu / cpu=True and ACCELERATE_TORCH_DEVICE keep their meaning.
    from accelerate.state import PartialState

    PartialState._reset_state()
    assert PartialState(cpu=True).device.type == "cpu"
    PartialState._reset_state()
    assert PartialState().device.type == "tpu"
    PartialState._reset_state()
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cpu")
    assert PartialState().device.type == "cpu"
    PartialState._reset_state()


_DDP_SCRIPT = """
import json, os, sys
import torch
import torch_tpu  # noqa: F401
sys.path.insert(0, os.path.join(sys.argv[3], "tests", "python"))
from test_trainer import TinyLM
from transformers import Qwen3ForCausalLM, Trainer, TrainingArguments

model = Qwen3ForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
args = TrainingArguments(output_dir=sys.argv[2] + ".run", per_device_train_batch_size=4, max_steps=4,
                         learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no", seed=0,
                         # Trainer's default ddp_find_unused_parameters (True unless checkpointing): DDP's reducer
                         # copies its used-parameter map through pinned host memory
                         dataloader_num_workers=0, disable_tqdm=True)
trainer = Trainer(model=model, args=args, train_dataset=TinyLM())
trainer.train()
import torch.distributed as dist
out = {"device": str(args.device), "world": dist.get_world_size(), "backend": str(dist.get_backend()),
       "ddp": type(trainer.model_wrapped).__name__, "param_device": str(next(trainer.model.parameters()).device),
       "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}
if dist.get_rank() == 0:
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
"""


@pytest.mark.slow
def test_trainer_ddp_torchrun(qwen3_dir, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_DDP_SCRIPT))
    out = tmp_path / "out.json"
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("ACCELERATE_TORCH_DEVICE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
           f"--master-port={free_port()}", str(script), qwen3_dir, str(out), REPO]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    got = json.loads(out.read_text())
    assert got["world"] == 2 and got["backend"] == "tpu_dist" and got["ddp"] == "DistributedDataParallel", got
    assert got["device"] == "tpu:0" and got["param_device"] == "tpu:0", got
    # The same steps in one CPU process: each step's global batch (2 x 4 samples) at once.
    cpu = train(qwen3_dir, "cpu", tmp_path / "cpu", batch=8)
    assert_same_losses(cpu, got["losses"])
