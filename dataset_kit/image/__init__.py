"""Image decoding, MXNet's ``mx.image`` functions and augmenters, and ``ImageIter``.

Transforms draw their randomness from ``example_rng()``.
"""

from dataset_kit.image.augmenters import (
    Augmenter,
    BrightnessJitterAug,
    CastAug,
    CenterCropAug,
    ColorJitterAug,
    ColorNormalizeAug,
    ContrastJitterAug,
    CreateAugmenter,
    ForceResizeAug,
    HorizontalFlipAug,
    HueJitterAug,
    LightingAug,
    RandomCropAug,
    RandomGrayAug,
    RandomOrderAug,
    RandomSizedCropAug,
    ResizeAug,
    SaturationJitterAug,
    SequentialAug,
)
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
from dataset_kit.image.rotate import imrotate, random_rotate


def __getattr__(name: str) -> object:
    # MXNet's mx.image.ImageIter lives in dataset_kit.io, which imports this package: load it
    # on first use, not at import (an import here would be circular).
    if name == "ImageIter":
        from dataset_kit.io.image_iter import ImageIter
        return ImageIter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Augmenter", "BrightnessJitterAug", "CastAug", "CenterCropAug", "ColorJitterAug",
           "ColorNormalizeAug", "ContrastJitterAug", "CorruptImageError", "CreateAugmenter",
           "ForceResizeAug", "HorizontalFlipAug", "HueJitterAug", "ImageIter", "LightingAug",
           "RandomCropAug", "RandomGrayAug", "RandomOrderAug", "RandomSizedCropAug", "ResizeAug",
           "SaturationJitterAug", "SequentialAug", "center_crop", "color_normalize",
           "copyMakeBorder", "fixed_crop", "imdecode", "imread", "imresize", "imrotate",
           "random_crop", "random_rotate", "random_size_crop", "read_image", "resize_short",
           "scale_down"]
