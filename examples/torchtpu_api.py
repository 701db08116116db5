"""A training script written against Google TorchTPU's documented Python API, run unchanged on torch-tpu.

Device initialization (``api.tpu_device()``), fused eager mode (``execution_mode``), a JAX op defined by name with
a registered backward (``_internal.pallas.jax_op``), explicit synchronization (``_internal.sync``), the matmul
precision context (``torch.tpu.precision``), a compiled step (``backend="tpu"``) and the compilation-cache statistics
(``torch.tpu._get_cache_stats()``). See docs/coming_from_torchtpu.md for how each name maps onto torch-tpu.

    python examples/torchtpu_api.py
"""

import jax.numpy as jnp
import torch
import torch_tpu  # noqa: F401  (registers "tpu")
from torch_tpu import api
from torch_tpu._internal import execution_mode as em
from torch_tpu._internal import pallas
from torch_tpu._internal import sync as tpu_sync

# 1. Hardware initialization.
device = api.tpu_device()
print(f"TPU Initialization complete. Primary device: {device}")


# 2. A JAX function as a PyTorch op, named first, with its backward registered.
def _scaled_tanh(x, scale):
    return jnp.tanh(x) * scale


scaled_tanh = pallas.jax_op("torchtpu_demo::scaled_tanh", _scaled_tanh)


def _setup_context(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x, scale)


def _backward(ctx, grad):
    x, scale = ctx.saved_tensors
    t = torch.tanh(x)
    return grad * (1 - t * t) * scale, (grad * t).sum_to_size(scale.shape)


scaled_tanh.register_autograd(_backward, setup_context=_setup_context)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.scale = torch.nn.Parameter(torch.ones(32))
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(scaled_tanh(self.fc1(x), self.scale))


torch.manual_seed(0)
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16).to(device)
y = torch.randn(8, 4, device="tpu")


def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


# 3. Fused eager mode for the training loop, TorchTPU-style.
losses = []
with em.set_eager_mode(em.EagerMode.DEFER_AND_FUSE):
    for _ in range(4):
        losses.append(step().detach())
    tpu_sync.synchronize(None, wait=True)
assert em.get_eager_mode() == em.EagerMode.DEFER_NEVER
print("losses:", [round(float(v), 4) for v in losses])
assert losses[-1].item() < losses[0].item(), "training did not reduce the loss"

# 4. Precision of float32 matmuls for a block.
with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
    a = torch.randn(64, 64, device=device)
    c = (a @ a).cpu()
torch.testing.assert_close(c, a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)

# 5. A compiled inference step.
compiled = torch.compile(model, backend="tpu")
with torch.no_grad():
    out = compiled(x)
    torch.testing.assert_close(out.cpu(), model(x).cpu(), rtol=1e-4, atol=1e-4)

# 6. Compilation cache statistics.
cache_stats = torch.tpu._get_cache_stats()
print(f"Total Requests: {cache_stats.num_cache_reqs}")
print(f"Total Hits:     {cache_stats.num_cache_hits}")
print(f"Hit Rate:       {cache_stats.num_cache_hits / max(cache_stats.num_cache_reqs, 1) * 100:.1f}%")
for i, entry in enumerate(cache_stats.per_entry_stats):
    print(f"Entry {i}: {entry}")
assert cache_stats.num_cache_hits > 0
print(torch.tpu._hbm_usage_summary())
print("OK")
