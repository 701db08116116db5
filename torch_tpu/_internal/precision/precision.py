"""``torch_tpu._internal.precision.precision``: the same ``Precision`` and ``precision`` as the package."""

from ...device import Precision, precision

__all__ = ["Precision", "precision"]
