"""Colour on HWC uint8 RGB images: brightness, contrast, saturation, HLS shifts, PCA lighting.

Pure functions: a random augmentation draws the amounts from ``example_rng()``
and calls these. Results are rounded and saturated to uint8, as OpenCV does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# ITU-R BT.601 luma, the weights OpenCV's RGB2GRAY applies to R, G, B.
GRAY_WEIGHTS = (0.299, 0.587, 0.114)


def _saturate(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def gray(image: np.ndarray, weights: Sequence[float] = GRAY_WEIGHTS) -> np.ndarray:
    """The grey level of each pixel (float32, HW), weighting R, G, B by ``weights``."""
    return image[..., :3].astype(np.float32) @ np.asarray(weights, np.float32)


def adjust_brightness(image: np.ndarray, alpha: float) -> np.ndarray:
    """Multiply every value by ``alpha``."""
    return _saturate(image.astype(np.float32) * alpha)


def adjust_contrast(image: np.ndarray, alpha: float,
                    weights: Sequence[float] = GRAY_WEIGHTS) -> np.ndarray:
    """Blend with the image's mean grey level: ``alpha * image + (1 - alpha) * mean``."""
    mean = float(gray(image, weights).mean())
    return _saturate(image.astype(np.float32) * alpha + (1 - alpha) * mean)


def adjust_saturation(image: np.ndarray, alpha: float,
                      weights: Sequence[float] = GRAY_WEIGHTS) -> np.ndarray:
    """Blend with the grey image: ``alpha * image + (1 - alpha) * gray``."""
    grey = gray(image, weights)[..., None]
    return _saturate(image.astype(np.float32) * alpha + (1 - alpha) * grey)


def _hls_float(image: np.ndarray) -> tuple:
    """Hue in degrees [0, 360), lightness and saturation in [0, 1] (float32, HW each)."""
    rgb = image[..., :3].astype(np.float32) * np.float32(1 / 255)
    vmax, vmin = rgb.max(-1), rgb.min(-1)
    delta = vmax - vmin
    total = vmax + vmin
    light = total * 0.5
    grey = delta == 0
    delta[grey] = 1
    sat = delta / np.where(light < 0.5, total, 2 - total).clip(1e-12)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hue = np.where(vmax == r, (g - b) / delta, np.where(vmax == g, 2 + (b - r) / delta,
                                                        4 + (r - g) / delta)) * 60
    hue[hue < 0] += 360
    hue[grey], sat[grey] = 0, 0
    return hue, light, sat


def rgb_to_hls(image: np.ndarray) -> np.ndarray:
    """RGB uint8 to OpenCV's 8-bit HLS: H in [0, 180), L and S in [0, 255] (uint8)."""
    hue, light, sat = _hls_float(image)
    return np.stack([_saturate(hue / 2) % 180, _saturate(light * 255), _saturate(sat * 255)], -1)


def hls_to_rgb(hls: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit HLS (see :func:`rgb_to_hls`) back to RGB uint8."""
    hls = hls.astype(np.float32)
    return _hls_to_rgb(hls[..., 0] * 2, hls[..., 1] / 255, hls[..., 2] / 255)


def _hls_to_rgb(hue: np.ndarray, light: np.ndarray, sat: np.ndarray) -> np.ndarray:
    # f(n) = L - a * clip(min(k - 3, 9 - k), -1, 1), k = (n + H / 30) mod 12, n = 0, 8, 4.
    k = (np.array([0, 8, 4], np.float32) + (hue / 30)[..., None]) % 12
    a = (sat * np.minimum(light, 1 - light))[..., None]
    return _saturate((light[..., None] - a * np.clip(np.minimum(k - 3, 9 - k), -1, 1)) * 255)


def shift_hls(image: np.ndarray, hue: int, lightness: int, saturation: int) -> np.ndarray:
    """Add to OpenCV's 8-bit H, L and S, saturating at 0 and 180 / 255 (MXNet's
    ``random_h/l/s``)."""
    hls = rgb_to_hls(image).astype(np.int32)
    hls += np.array([hue, lightness, saturation], np.int32)
    np.clip(hls, 0, np.array([180, 255, 255]), out=hls)
    return hls_to_rgb(hls.astype(np.uint8))


# The ImageNet RGB eigen-decomposition MXNet uses, as eigenvalue * eigenvector columns.
IMAGENET_EIGVEC = np.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                            [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                            [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], np.float32)


def pca_lighting(image: np.ndarray, alphas: Sequence[float],
                 eigvec: np.ndarray = IMAGENET_EIGVEC) -> np.ndarray:
    """AlexNet's lighting noise: add ``eigvec @ alphas`` to R, G, B."""
    offset = np.asarray(eigvec, np.float32) @ np.asarray(alphas, np.float32)
    return _saturate(image.astype(np.float32) + offset)
