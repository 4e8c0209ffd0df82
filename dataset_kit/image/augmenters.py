"""MXNet 1.9's image augmenters (``mx.image.*Aug``) and ``CreateAugmenter``, on HWC numpy arrays.

Each augmenter is a picklable callable ``image -> image`` with MXNet's
constructor arguments and ``dumps()``. They compute as MXNet's Python
augmenters do: in floating point, without rounding or clipping (colour
augmenters come after ``CastAug`` in ``CreateAugmenter``'s list). An MXNet
``NDArray`` in gives an ``NDArray`` out (see :mod:`dataset_kit.image.functional`).

Every random draw comes from one generator per example
(:mod:`dataset_kit.image._draws`): inside an iterator it is derived from
(seed, epoch, index), so augmentation is the same for any number of workers
and after a resume. MXNet's augmenters draw from Python's global ``random``
and cannot do either; the distributions are MXNet's, the numbers differ.
Chain augmenters with :class:`SequentialAug` (or ``ImageIter``), which gives
the chain one generator; standalone augmenters called one after another
inside the same example would each start the example's stream afresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit.image import color
from dataset_kit.image._draws import draws, one_generator
from dataset_kit.image.functional import (
    as_numpy,
    center_crop,
    color_normalize,
    imresize,
    like,
    random_crop,
    random_size_crop,
    resize_short,
)


def _float(image: np.ndarray) -> np.ndarray:
    return image if np.issubdtype(image.dtype, np.floating) else image.astype(np.float32)


class Augmenter:
    """The base class: keeps the constructor's arguments for :meth:`dumps`.

    Args:
        **kwargs: the augmenter's parameters (arrays are kept as lists).
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = {k: as_numpy(v).tolist() if isinstance(v, np.ndarray)
                        or hasattr(v, "asnumpy") else v for k, v in kwargs.items()}

    def dumps(self) -> Any:
        """The augmenter as MXNet writes it: ``json.dumps([class name in lower case, kwargs])``."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src: Any) -> Any:
        """Return the augmented image."""
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    """Apply ``ts`` in order, drawing from one generator for the whole chain."""

    def __init__(self, ts: Sequence[Augmenter]) -> None:
        super().__init__()
        self.ts = list(ts)

    def dumps(self) -> list:
        """``[name, [each augmenter's dumps()]]`` (a list, as MXNet's)."""
        return [type(self).__name__.lower(), [t.dumps() for t in self.ts]]

    def __call__(self, src: Any) -> Any:
        with one_generator():
            for t in self.ts:
                src = t(src)
        return src


class RandomOrderAug(SequentialAug):
    """Apply ``ts`` in a random order (drawn per image; the list itself is left as it is)."""

    def __call__(self, src: Any) -> Any:
        with one_generator() as rng:
            for k in rng.permutation(len(self.ts)):
                src = self.ts[k](src)
        return src


class _Sized(Augmenter):
    def __init__(self, size: Any, interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp


class ResizeAug(_Sized):
    """Resize the shorter side to ``size`` (:func:`~dataset_kit.image.resize_short`)."""

    def __call__(self, src: Any) -> Any:
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(_Sized):
    """Resize to ``size`` (w, h), whatever the aspect ratio."""

    def __call__(self, src: Any) -> Any:
        w, h = self.size
        return imresize(src, w, h, interp=self.interp)


class RandomCropAug(_Sized):
    """Crop ``size`` (w, h) at a random place (:func:`~dataset_kit.image.random_crop`)."""

    def __call__(self, src: Any) -> Any:
        return random_crop(src, self.size, self.interp)[0]


class CenterCropAug(_Sized):
    """Crop ``size`` (w, h) at the centre (:func:`~dataset_kit.image.center_crop`)."""

    def __call__(self, src: Any) -> Any:
        return center_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """Crop a random area and aspect ratio, resized to ``size``.

    See :func:`~dataset_kit.image.random_size_crop`.

    Raises:
        TypeError: for an unknown keyword (``min_area`` is MXNet's old name of ``area``).
    """

    def __init__(self, size: Any, area: Any, ratio: Sequence[float], interp: int = 2,
                 **kwargs: Any) -> None:
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        if "min_area" in kwargs:
            area = kwargs.pop("min_area")
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for RandomSizedCropAug: "
                            f"{sorted(kwargs)}")
        self.size, self.area, self.ratio, self.interp = size, area, ratio, interp

    def __call__(self, src: Any) -> Any:
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class BrightnessJitterAug(Augmenter):
    """Multiply by ``1 + u``, ``u`` uniform in ``[-brightness, brightness]``."""

    def __init__(self, brightness: float) -> None:
        super().__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + draws().uniform(-self.brightness, self.brightness)
        return like(src, _float(as_numpy(src)) * alpha)


class ContrastJitterAug(Augmenter):
    """Blend with the mean grey level: ``alpha * image + (1 - alpha) * mean``.

    ``alpha`` is uniform in ``1 ± contrast``.
    """

    def __init__(self, contrast: float) -> None:
        super().__init__(contrast=contrast)
        self.contrast = contrast

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + draws().uniform(-self.contrast, self.contrast)
        image = _float(as_numpy(src))
        mean = float(color.gray(image).mean())
        return like(src, image * alpha + (1.0 - alpha) * mean)


class SaturationJitterAug(Augmenter):
    """Blend with the grey image: ``alpha * image + (1 - alpha) * grey``.

    ``alpha`` is uniform in ``1 ± saturation``.
    """

    def __init__(self, saturation: float) -> None:
        super().__init__(saturation=saturation)
        self.saturation = saturation

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + draws().uniform(-self.saturation, self.saturation)
        image = _float(as_numpy(src))
        return like(src, image * alpha + (1.0 - alpha) * color.gray(image)[..., None])


# RGB to YIQ and back: a hue shift is a rotation of the I-Q plane (MXNet's matrices).
_TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])


class HueJitterAug(Augmenter):
    """Rotate the hue by ``u * pi``, ``u`` uniform in ``[-hue, hue]`` (in YIQ space)."""

    def __init__(self, hue: float) -> None:
        super().__init__(hue=hue)
        self.hue = hue

    def __call__(self, src: Any) -> Any:
        alpha = draws().uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        rotation = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = (_ITYIQ @ rotation @ _TYIQ).T.astype(np.float32)
        image = _float(as_numpy(src))
        return like(src, image @ t.astype(image.dtype))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those that are > 0), in random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float) -> None:
        jitters = ((BrightnessJitterAug, brightness), (ContrastJitterAug, contrast),
                   (SaturationJitterAug, saturation))
        super().__init__([jitter(amount) for jitter, amount in jitters if amount > 0])


class LightingAug(Augmenter):
    """AlexNet's PCA lighting noise: add ``(eigvec * alpha) @ eigval``, alpha ~ N(0, alphastd)."""

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any) -> None:
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = alphastd
        self.eigval, self.eigvec = as_numpy(eigval), as_numpy(eigvec)

    def __call__(self, src: Any) -> Any:
        alpha = draws().normal(0, self.alphastd, size=(3,))
        image = _float(as_numpy(src))
        offset = np.dot(self.eigvec * alpha, self.eigval).astype(image.dtype)
        return like(src, image + offset)


class ColorNormalizeAug(Augmenter):
    """``(image - mean) / std`` (:func:`~dataset_kit.image.color_normalize`); either may be None."""

    def __init__(self, mean: Any, std: Any) -> None:
        super().__init__(mean=mean, std=std)
        self.mean = None if mean is None else as_numpy(mean).astype(np.float32)
        self.std = None if std is None else as_numpy(std).astype(np.float32)

    def __call__(self, src: Any) -> Any:
        return color_normalize(src, self.mean, self.std)


# MXNet's grey for RandomGrayAug: every channel becomes 0.21 R + 0.72 G + 0.07 B.
_GRAY_MATRIX = np.array([[0.21] * 3, [0.72] * 3, [0.07] * 3], np.float32)


class RandomGrayAug(Augmenter):
    """With probability ``p``, make the image grey (three equal channels)."""

    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        if draws().random() < self.p:
            image = _float(as_numpy(src))
            return like(src, image @ _GRAY_MATRIX.astype(image.dtype))
        return src


class HorizontalFlipAug(Augmenter):
    """With probability ``p``, mirror left to right."""

    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        if draws().random() < self.p:
            return like(src, np.ascontiguousarray(as_numpy(src)[:, ::-1]))
        return src


class CastAug(Augmenter):
    """Cast to ``typ`` (float32 by default)."""

    def __init__(self, typ: str = "float32") -> None:
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src: Any) -> Any:
        return src.astype(self.typ)


# MXNet's ImageNet statistics, used when CreateAugmenter gets mean=True / std=True.
_IMAGENET_MEAN = (123.68, 116.28, 103.53)
_IMAGENET_STD = (58.395, 57.12, 57.375)
_EIGVAL = np.array([55.46, 4.794, 1.148])
_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                    [-0.5836, -0.6948, 0.4203]])


def _statistic(name: str, value: Any, imagenet: tuple) -> Any:
    if value is True:
        return np.array(imagenet, np.float32)
    if value is None:
        return None
    if not (isinstance(value, np.ndarray) or hasattr(value, "asnumpy")) or \
            value.shape[0] not in (1, 3):
        raise ValueError(f"{name} must be True, None or an array of 1 or 3 values, got {value!r}")
    return value


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0,  # noqa: N802 (MXNet's name)
                    rand_crop: bool = False, rand_resize: bool = False,
                    rand_mirror: bool = False, mean: Any = None, std: Any = None,
                    brightness: float = 0, contrast: float = 0, saturation: float = 0,
                    hue: float = 0, pca_noise: float = 0, rand_gray: float = 0,
                    inter_method: int = 2) -> list[Augmenter]:
    """MXNet's standard augmenter list, in MXNet's order.

    Resize (``resize > 0``); a crop to ``data_shape`` (random-sized with
    ``rand_resize``, random with ``rand_crop``, else centred); a mirror;
    ``CastAug``; colour jitter; hue; PCA lighting; random grey; normalisation.

    Args:
        data_shape: ``(channels, height, width)`` of the output.
        resize: the shorter side before cropping (0: none).
        rand_crop: crop at a random place.
        rand_resize: crop a random area (8%-100%) and aspect ratio (3/4-4/3);
            needs ``rand_crop``.
        rand_mirror: mirror with probability 1/2.
        mean: per-channel mean to subtract; True for ImageNet's.
        std: per-channel standard deviation to divide by; True for ImageNet's.
        brightness: brightness jitter amount; likewise ``contrast``, ``saturation``, ``hue``.
        contrast: contrast jitter amount.
        saturation: saturation jitter amount.
        hue: hue jitter amount.
        pca_noise: the standard deviation of PCA lighting noise.
        rand_gray: the probability of turning the image grey.
        inter_method: the interpolation code of resizes.

    Returns:
        The list of augmenters.

    Raises:
        ValueError: ``rand_resize`` without ``rand_crop``; a ``mean`` or ``std``
            that is not True, None or an array of 1 or 3 values.
    """
    if rand_resize and not rand_crop:
        raise ValueError("rand_resize=True needs rand_crop=True (MXNet asserts it)")
    mean = _statistic("mean", mean, _IMAGENET_MEAN)
    std = _statistic("std", std, _IMAGENET_STD)
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        crop: Augmenter = RandomSizedCropAug(crop_size, 0.08, (3 / 4, 4 / 3), inter_method)
    else:
        crop = (RandomCropAug if rand_crop else CenterCropAug)(crop_size, inter_method)
    # MXNet's order, one row per step: (wanted?, how to make it). A step is made only
    # when it is wanted.
    steps: list[tuple[bool, Callable[[], Augmenter]]] = [
        (resize > 0, lambda: ResizeAug(resize, inter_method)),
        (True, lambda: crop),
        (bool(rand_mirror), lambda: HorizontalFlipAug(0.5)),
        (True, CastAug),
        (bool(brightness or contrast or saturation),
         lambda: ColorJitterAug(brightness, contrast, saturation)),
        (bool(hue), lambda: HueJitterAug(hue)),
        (pca_noise > 0, lambda: LightingAug(pca_noise, _EIGVAL, _EIGVEC)),
        (rand_gray > 0, lambda: RandomGrayAug(rand_gray)),
        (mean is not None or std is not None, lambda: ColorNormalizeAug(mean, std)),
    ]
    return [make() for wanted, make in steps if wanted]
