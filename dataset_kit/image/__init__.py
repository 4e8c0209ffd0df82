"""Image decoding and MXNet's ``mx.image`` functions.

Transforms draw their randomness from ``example_rng()``.
"""

from dataset_kit.image.decode import CorruptImageError, read_image
from dataset_kit.image.functional import (
    center_crop,
    color_normalize,
    copyMakeBorder,
    fixed_crop,
    imdecode,
    imread,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
    scale_down,
)

__all__ = ["CorruptImageError", "center_crop", "color_normalize",
           "copyMakeBorder", "fixed_crop", "imdecode", "imread", "imresize", "random_crop",
           "random_size_crop", "read_image", "resize_short", "scale_down"]
