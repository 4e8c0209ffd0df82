"""Image decoding (and, as they arrive, transforms drawing from example_rng())."""

from dataset_kit.image.decode import CorruptImageError, read_image

__all__ = ["CorruptImageError", "read_image"]
