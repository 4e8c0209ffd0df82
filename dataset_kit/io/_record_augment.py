"""MXNet's ``aug_default`` augmenter and ImageRecordIter's normalisation, as one picklable callable.

The steps, in MXNet 1.9's order (``src/io/image_aug_default.cc``, then
``iter_image_recordio_2.cc``), on HWC uint8 RGB:

1. ``resize``: the shorter side to ``resize`` (MXNet's integer arithmetic);
2. an affine warp when any of ``max_rotate_angle``, ``rotate``, ``rotate_list``,
   ``max_shear_ratio``, ``max/min_random_scale``, the aspect ratios (without
   ``random_resized_crop``) or ``max/min_img_size`` asks for one;
3. ``pad``; then a crop: ``random_resized_crop``, or ``max/min_crop_size``, or
   ``data_shape`` (at random with ``rand_crop``, else centred; smaller
   images are enlarged first);
4. ``brightness``/``contrast``/``saturation`` in random order; ``random_h/s/l``;
   ``pca_noise``;
5. normalisation: mirror (``mirror``, or ``rand_mirror`` with probability
   1/2), ``(pixel - mean) * contrast / std + illumination / std`` with
   ``max_random_contrast`` / ``max_random_illumination`` and ``scale``, the
   mean from ``mean_img`` or ``mean_r/g/b/a``; CHW.

Every random draw comes from ``example_rng(seed_aug)``: a pure function of
(``seed_aug`` or the iterator's seed, epoch, record index), so batches are the
same for any number of workers and after a resume. MXNet's draws come from
per-thread generators, so the numbers differ from MXNet's; the distributions
are MXNet's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dataset_kit import _gather
from dataset_kit._example_context import example_rng
from dataset_kit.image import _resize, affine, color

# MXNet's C++ augmenter converts BGR pixels with RGB2GRAY, so its grey level weighs
# R, G, B by BT.601's B, G, R weights. Its code, not its docs, is what users get.
MXNET_GRAY_WEIGHTS = tuple(reversed(color.GRAY_WEIGHTS))


def _resize_to(image: np.ndarray, width: int, height: int, interpolation: int) -> np.ndarray:
    """Resize as MXNet does: OpenCV where installed (its pixels, several times faster).

    Pillow otherwise.
    """
    if image.shape[1] == width and image.shape[0] == height:
        return image
    return _resize.resize(image, width, height, interpolation)


@dataclass(frozen=True)
class AugmentParams:
    """MXNet's ``DefaultImageAugmentParam`` and ``ImageNormalizeParam``.

    The iterator validates them.
    """

    data_shape: tuple
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    max_rotate_angle: int = 0
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: float | None = None
    max_shear_ratio: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_random_area: float = 1.0
    min_random_area: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    rotate: int = -1
    rotate_list: tuple = ()
    fill_value: int = 255
    inter_method: int = 1
    pad: int = 0
    mirror: bool = False
    rand_mirror: bool = False
    mean: Any = field(default=(0.0, 0.0, 0.0, 0.0))   # per channel, or a CHW mean image
    std: tuple = (1.0, 1.0, 1.0, 1.0)
    scale: float = 1.0
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0
    dtype: str = "float32"
    seed_aug: int | None = None

    @property
    def aspect_range(self) -> tuple[float, float]:
        if self.min_aspect_ratio is not None:
            return self.min_aspect_ratio, self.max_aspect_ratio
        return 1 - self.max_aspect_ratio, 1 + self.max_aspect_ratio

    @property
    def warps(self) -> bool:
        low, high = self.aspect_range
        return bool(self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0
                    or self.rotate_list or self.max_random_scale != 1
                    or self.min_random_scale != 1
                    or (not self.random_resized_crop and (low != 1 or high != 1))
                    or self.max_img_size != 1e10 or self.min_img_size != 0)


class RecordAugment:
    """``image -> CHW array``: MXNet's default augmentation and normalisation (see the module)."""

    def __init__(self, params: AugmentParams) -> None:
        self.p = params
        channels = params.data_shape[0]
        if isinstance(params.mean, np.ndarray):
            self._mean = params.mean.astype(np.float32)
        else:
            self._mean = np.asarray(params.mean[:channels], np.float32).reshape(-1, 1, 1)
        self._std = np.asarray(params.std[:channels], np.float32).reshape(-1, 1, 1)
        # The sign every std shares (0 if they differ): contrast / std is then all
        # positive exactly when contrast has that sign.
        self._std_sign = 1 if (self._std > 0).all() else -1 if (self._std < 0).all() else 0

    def __call__(self, image: np.ndarray) -> np.ndarray:
        rng = example_rng(self.p.seed_aug)
        image = image if image.ndim == 3 else image[:, :, None]
        image = self._geometry(image, rng)
        image = self._colour(image, rng)
        return self._normalize(image, rng)

    def _inter(self, old: tuple, new: tuple, rng: np.random.Generator) -> int:
        return affine.resolve_interpolation(self.p.inter_method, old, new, rng)

    def _geometry(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = self.p
        _, height, width = p.data_shape
        size = (image.shape[1], image.shape[0])
        if p.resize != -1:
            new = affine.resize_shorter_mxnet(image, p.resize)
            image = _resize_to(image, *new, self._inter(size, new, rng))
        if p.warps:
            image = self._warp(image, rng)
        if p.pad > 0:
            image = affine.pad(image, p.pad, p.fill_value)
        if p.random_resized_crop:
            cropped = self._random_resized_crop(image, rng)
            if cropped is not None:
                return cropped
        elif p.max_crop_size != -1 or p.min_crop_size != -1:
            side = int(rng.integers(p.min_crop_size, p.max_crop_size + 1))
            y, x = image.shape[0] - side, image.shape[1] - side
            y, x = (int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))) if p.rand_crop \
                else (y // 2, x // 2)
            return _resize_to(image[y:y + side, x:x + side], width, height,
                                 self._inter((side, side), (width, height), rng))
        inter = self._inter((image.shape[1], image.shape[0]), (width, height), rng)
        if image.shape[0] < height:
            image = _resize_to(image, int(height / image.shape[0] * image.shape[1]), height,
                                  inter)
        if image.shape[1] < width:
            image = _resize_to(image, width, int(width / image.shape[1] * image.shape[0]),
                                  inter)
        y, x = image.shape[0] - height, image.shape[1] - width
        y, x = (int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))) if p.rand_crop \
            else (y // 2, x // 2)
        return image[y:y + height, x:x + width]

    def _warp(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = self.p
        shear = rng.random() * p.max_shear_ratio * 2 - p.max_shear_ratio
        angle = int(rng.integers(-p.max_rotate_angle, p.max_rotate_angle + 1))
        if p.rotate > 0:
            angle = p.rotate
        if p.rotate_list:
            angle = p.rotate_list[int(rng.integers(0, len(p.rotate_list)))]
        scale = ratio = 1.0
        if not p.random_resized_crop:
            scale = rng.random() * (p.max_random_scale - p.min_random_scale) + p.min_random_scale
            low, high = p.aspect_range
            ratio = rng.random() * (high - low) + low
        size = (image.shape[1], image.shape[0])
        new = tuple(int(max(p.min_img_size, min(p.max_img_size, scale * s))) for s in size)
        matrix = affine.mxnet_affine_matrix(angle, shear, scale, ratio, size, new)
        return affine.warp_affine(image, matrix, new, self._inter(size, new, rng), p.fill_value)

    def _random_resized_crop(self, image: np.ndarray, rng: np.random.Generator) -> Any:
        p = self.p
        low, high = p.aspect_range
        if p.max_random_area == p.min_random_area == 1 and low == high == 1:
            return None
        _, height, width = p.data_shape
        area = image.shape[0] * image.shape[1]
        for _ in range(10):
            target = area * rng.uniform(p.min_random_area, p.max_random_area)
            ratio = rng.uniform(low, high)
            h, w = round(np.sqrt(target / ratio)), round(np.sqrt(target * ratio))
            if rng.random() > 0.5:
                h, w = w, h
            if h <= image.shape[0] and w <= image.shape[1]:
                y = int(rng.integers(0, image.shape[0] - h + 1))
                x = int(rng.integers(0, image.shape[1] - w + 1))
                return _resize_to(image[y:y + h, x:x + w], width, height,
                                     self._inter((w, h), (width, height), rng))
        return None

    def _colour(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = self.p
        if p.brightness > 0 or p.contrast > 0 or p.saturation > 0:
            alphas = [1 + rng.uniform(-p.brightness, p.brightness),
                      1 + rng.uniform(-p.contrast, p.contrast),
                      1 + rng.uniform(-p.saturation, p.saturation)]
            for k in rng.permutation(3):
                if k == 0:
                    image = color.adjust_brightness(image, alphas[0])
                elif k == 1:
                    image = color.adjust_contrast(image, alphas[1], MXNET_GRAY_WEIGHTS)
                else:
                    image = color.adjust_saturation(image, alphas[2], MXNET_GRAY_WEIGHTS)
        if p.random_h or p.random_s or p.random_l:
            # MXNet's approximation of a Gaussian: (u1 + 4 u2) / 5, per channel.
            draws = [(rng.random() + 4 * rng.random()) / 5 for _ in range(3)]
            h, s, light = (int(r * m * 2 - m) for r, m in
                           zip(draws, (p.random_h, p.random_s, p.random_l)))
            image = color.shift_hls(image, h, light, s)
        if p.pca_noise > 0:
            image = color.pca_lighting(image, rng.normal(0, p.pca_noise, 3).tolist())
        return image

    def _normalize(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = self.p
        mirrored = (p.rand_mirror and rng.random() < 0.5) or p.mirror
        chw = image.transpose(2, 0, 1)
        if mirrored:
            chw = chw[:, :, ::-1]
        if p.dtype == "uint8":
            out = _gather.empty(chw.shape, np.uint8)
            np.copyto(out, chw)
            return out
        if p.dtype == "int8":
            mean = np.rint(self._mean)
            return np.clip(chw.astype(np.float32) - mean, -128, 127).astype(np.int8)
        contrast = (rng.random() * p.max_random_contrast * 2 - p.max_random_contrast + 1) * p.scale
        illumination = (rng.random() * p.max_random_illumination * 2
                        - p.max_random_illumination) * p.scale
        mean = self._mean[:, :, ::-1] if mirrored and self._mean.shape[-1] > 1 else self._mean
        # The same float32 operations as (chw.astype(float32) - mean) * ... + ..., in
        # place in one contiguous CHW array: uint8 pixels convert exactly inside the
        # subtraction. The strided (HWC to CHW, mirrored) pass copies bytes first, so
        # the subtraction reads a contiguous array. The result is allocated where the
        # batch travels (a worker's block), so stacking the batch copies nothing.
        source = np.ascontiguousarray(chw) if chw.dtype == np.uint8 else chw.astype(np.float32)
        out = _gather.empty(np.broadcast_shapes(source.shape, mean.shape), np.float32)
        np.subtract(source, mean, out=out)
        out *= contrast / self._std
        # Adding +0.0 changes nothing but a -0.0 (a zero times a negative factor).
        if illumination != 0 or not contrast * self._std_sign > 0:
            out += illumination / self._std
        return out.astype(p.dtype, copy=False)
