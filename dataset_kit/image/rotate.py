"""MXNet 1.9.1's ``mx.image.imrotate`` and ``random_rotate``: rotate CHW / NCHW float32 images.

MXNet builds a sampling grid rotated about the image's centre (optionally
scaled so that no padding shows, ``zoom_in``, or so that the whole image
shows, ``zoom_out``) and samples it with ``BilinearSampler``: bilinear
weights, and zero for a neighbour outside the image. This module does the
same arithmetic in numpy. An ``NDArray`` in gives an ``NDArray`` out; a numpy
array in gives an :class:`~dataset_kit.io.MXArray`.
"""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np

from dataset_kit.image._draws import draws
from dataset_kit.image.functional import as_numpy, like


def _angles(rotation_degrees: Any, count: int, single: bool) -> np.ndarray:
    if single and not isinstance(rotation_degrees, Number):
        raise TypeError("When a single image is passed the rotation angle is required to be "
                        f"a scalar, got {type(rotation_degrees).__name__}")
    if isinstance(rotation_degrees, Number):
        return np.full(count, rotation_degrees, dtype=np.float64)
    angles = as_numpy(rotation_degrees).astype(np.float64).reshape(-1)
    if len(angles) != count:
        raise ValueError(f"The number of images must be equal to the number of rotation "
                         f"angles, got {count} images and {len(angles)} angles")
    return angles


def _scale(h: int, w: int, radians: np.ndarray, zoom_in: bool, zoom_out: bool) -> np.ndarray:
    """The grid's scale per image: 1, or MXNet's zoom from the rotated corners."""
    if not (zoom_in or zoom_out):
        return np.ones_like(radians)
    rho, corner = np.hypot(h, w), np.arctan(h / w)
    turned = np.abs(radians)
    max_x = np.maximum(np.abs(rho * np.cos(corner + turned)), np.abs(rho * np.cos(corner - turned)))
    max_y = np.maximum(np.abs(rho * np.sin(corner + turned)), np.abs(rho * np.sin(corner - turned)))
    if zoom_out:
        return np.maximum(max_x / w, max_y / h)
    return np.minimum(w / max_x, h / max_y)


def _bilinear(images: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MXNet's ``BilinearSampler`` at pixel coordinates ``x``, ``y`` (N x H x W); zero outside."""
    n, channels, h, w = images.shape
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    wx, wy = 1.0 - (x - x0), 1.0 - (y - y0)  # the top-left neighbour's weights
    out = np.zeros(images.shape, np.float64)
    batch = np.arange(n)[:, None, None]
    for dy, fy in ((0, wy), (1, 1.0 - wy)):
        for dx, fx in ((0, wx), (1, 1.0 - wx)):
            xs, ys = x0 + dx, y0 + dy
            inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
            values = images[batch, :, np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)]  # N,H,W,C
            weight = np.where(inside, fy * fx, 0.0)[..., None]
            out += np.moveaxis(values * weight, -1, 1)
    return out.astype(np.float32)


def imrotate(src: Any, rotation_degrees: Any, zoom_in: bool = False,
             zoom_out: bool = False) -> Any:
    """Rotate a CHW image, or each image of an NCHW batch, counter-clockwise (MXNet's).

    Args:
        src: a float32 CHW image or NCHW batch (numpy or ``NDArray``).
        rotation_degrees: the angle in degrees; for a batch, also one angle
            per image (a 1-D array or ``NDArray``).
        zoom_in: zoom so that no padding shows.
        zoom_out: zoom so that the whole image shows.

    Returns:
        The rotated image(s), float32, of ``src``'s shape.

    Raises:
        ValueError: if both zooms are asked, ``src`` is neither 3-D nor 4-D,
            or a batch's angle count differs from its size.
        TypeError: if ``src`` is not float32, or a single image gets several angles.
    """
    if zoom_in and zoom_out:
        raise ValueError("`zoom_in` and `zoom_out` cannot be both True")
    images = as_numpy(src)
    if images.dtype != np.float32:
        raise TypeError(f"Only `float32` images are supported by this function, got "
                        f"{images.dtype}")
    if images.ndim not in (3, 4):
        raise ValueError(f"Only 3D and 4D are supported by this function, got shape "
                         f"{images.shape}")
    single = images.ndim == 3
    batch = images[None] if single else images
    radians = np.pi * _angles(rotation_degrees, len(batch), single) / 180
    _, _, h, w = batch.shape
    # MXNet's grid: centred pixel coordinates, rotated, scaled, then sampled.
    cy, cx = (h - 1) / 2, (w - 1) / 2
    gy, gx = np.mgrid[0:h, 0:w].astype(np.float64)
    gy, gx = gy - cy, gx - cx
    cos, sin = np.cos(radians)[:, None, None], np.sin(radians)[:, None, None]
    scale = _scale(h, w, radians, zoom_in, zoom_out)[:, None, None]
    x = (gx * cos - gy * sin) * scale + cx
    y = (gx * sin + gy * cos) * scale + cy
    rotated = _bilinear(batch, x, y)
    return like(src, rotated[0] if single else rotated)


def random_rotate(src: Any, angle_limits: Any, zoom_in: bool = False,
                  zoom_out: bool = False) -> Any:
    """Rotate by an angle drawn uniformly from ``angle_limits`` (one per image of a batch).

    The angles are drawn from the example's generator
    (:func:`~dataset_kit.example_rng` inside an iterator), so they are
    reproducible there; MXNet draws from numpy's global generator.

    Args:
        src: a float32 CHW image or NCHW batch.
        angle_limits: ``(low, high)`` in degrees.
        zoom_in: see :func:`imrotate`.
        zoom_out: see :func:`imrotate`.

    Raises:
        ValueError: if ``angle_limits`` is not two numbers; see :func:`imrotate`.
    """
    limits = tuple(angle_limits)
    if len(limits) != 2:
        raise ValueError(f"angle_limits must be (low, high), got {angle_limits!r}")
    shape = np.shape(as_numpy(src))
    rng = draws()
    angles: Any = float(rng.uniform(*limits)) if len(shape) == 3 else \
        rng.uniform(*limits, size=shape[0])
    return imrotate(src, angles, zoom_in=zoom_in, zoom_out=zoom_out)
