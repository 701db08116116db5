"""Interfaces other packages import from ``torch_tpu._internal`` (PyTorch's inductor, TorchTPU kernel libraries)."""
