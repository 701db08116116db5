"""``torch_tpu._internal.optim``: TorchTPU's optimizer utilities (:mod:`.patch`)."""
