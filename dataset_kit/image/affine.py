"""Geometry on HWC uint8 images: resizing with OpenCV's interpolation codes, affine warps, padding.

Pure functions (no randomness of their own): a random augmentation draws its
parameters from ``example_rng()`` and calls these. Pillow does the pixel work.

OpenCV's (and MXNet's ``inter_method``) interpolation codes:

====  ==============  ====================================================
code  OpenCV          Pillow (resize / affine warp)
====  ==============  ====================================================
0     INTER_NEAREST   NEAREST / NEAREST
1     INTER_LINEAR    BILINEAR / BILINEAR
2     INTER_CUBIC     BICUBIC / BICUBIC
3     INTER_AREA      BOX / BILINEAR (Pillow's warps have no area filter)
4     INTER_LANCZOS4  LANCZOS / BICUBIC (likewise)
9     auto            cubic to enlarge, area to shrink, else linear
10    random          one of 0-4, drawn from the generator given
====  ==============  ====================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit.image.decode import pillow

INTERPOLATIONS = (0, 1, 2, 3, 4, 9, 10)


def resolve_interpolation(code: int, old_size: tuple, new_size: tuple,
                          rng: np.random.Generator | None = None) -> int:
    """Turn ``code`` 9 (auto) or 10 (random) into one of 0-4, as MXNet's ``GetInterMethod``.

    Args:
        code: an interpolation code (see the module).
        old_size: ``(width, height)`` before.
        new_size: ``(width, height)`` after.
        rng: draws the method for code 10.

    Raises:
        ValueError: for an unknown code.
    """
    if code not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {list(INTERPOLATIONS)}, got {code!r}")
    if code == 9:
        if new_size[0] > old_size[0] and new_size[1] > old_size[1]:
            return 2
        if new_size[0] < old_size[0] and new_size[1] < old_size[1]:
            return 3
        return 1
    if code == 10:
        return int((rng or np.random.default_rng()).integers(0, 5))
    return code


def pil_filter(code: int, warp: bool) -> Any:
    """Return Pillow's resampling filter for OpenCV interpolation ``code``.

    ``warp`` says whether it is for an affine warp (Pillow has no BOX or
    LANCZOS warp).
    """
    r = pillow().Resampling
    table = (r.NEAREST, r.BILINEAR, r.BICUBIC, r.BILINEAR if warp else r.BOX,
             r.BICUBIC if warp else r.LANCZOS)
    return table[code]


def _to_pil(image: np.ndarray) -> Any:
    squeezed = image[:, :, 0] if image.ndim == 3 and image.shape[2] == 1 else image
    return pillow().fromarray(np.ascontiguousarray(squeezed))


def _from_pil(pil: Any, like: np.ndarray) -> np.ndarray:
    out = np.asarray(pil)
    return out.reshape(out.shape[0], out.shape[1], *like.shape[2:])


def resize(image: np.ndarray, width: int, height: int, interpolation: int = 1) -> np.ndarray:
    """Resize to ``width x height`` with an interpolation code 0-4."""
    if image.shape[1] == width and image.shape[0] == height:
        return image
    return _from_pil(_to_pil(image).resize((int(width), int(height)),
                                           pil_filter(interpolation, warp=False)), image)


def resize_shorter_mxnet(image: np.ndarray, size: int) -> tuple[int, int]:
    """``(width, height)`` with the shorter side ``size``, in MXNet's integer arithmetic."""
    rows, cols = image.shape[:2]
    if rows > cols:
        return size, size * rows // cols
    return size * cols // rows, size


def mxnet_affine_matrix(angle: float, shear: float, scale: float, ratio: float,
                        size: tuple, new_size: tuple) -> np.ndarray:
    """MXNet's ``aug_default`` affine matrix: rotate, shear, scale, aspect ratio, re-centred.

    Args:
        angle: rotation in degrees.
        shear: shear ratio.
        scale: scale factor.
        ratio: aspect ratio (width over height scaling).
        size: ``(width, height)`` of the source.
        new_size: ``(width, height)`` of the output.

    Returns:
        The 2 x 3 forward matrix (source to output coordinates), float32.
    """
    a, b = np.cos(np.deg2rad(angle)), np.sin(np.deg2rad(angle))
    hs = 2 * scale / (1 + ratio)
    ws = ratio * hs
    m = np.array([[hs * a - shear * b * ws, hs * b + shear * a * ws, 0.0],
                  [-b * ws, a * ws, 0.0]])
    centre = m[:, :2] @ np.array(size, float)
    m[:, 2] = (np.array(new_size, float) - centre) / 2
    return m.astype(np.float32)


def warp_affine(image: np.ndarray, matrix: np.ndarray, size: tuple, interpolation: int = 1,
                fill: int = 255) -> np.ndarray:
    """OpenCV's ``warpAffine``: output pixel ``p`` is the source at ``matrix^-1 p``.

    Args:
        image: HWC or HW uint8.
        matrix: the 2 x 3 forward matrix.
        size: ``(width, height)`` of the output.
        interpolation: a code 0-4 (see the module).
        fill: the value of pixels that come from outside the source.
    """
    forward = np.vstack([np.asarray(matrix, float), [0.0, 0.0, 1.0]])
    inverse = np.linalg.inv(forward)[:2].ravel()
    pil = _to_pil(image)
    fillcolor = fill if pil.mode == "L" else (fill,) * len(pil.getbands())
    out = pil.transform((int(size[0]), int(size[1])), pillow().Transform.AFFINE,
                        tuple(inverse), pil_filter(interpolation, warp=True), fillcolor=fillcolor)
    return _from_pil(out, image)


def pad(image: np.ndarray, width: int, fill: int = 255) -> np.ndarray:
    """Add ``width`` pixels of value ``fill`` on every side."""
    spec = [(width, width), (width, width)] + [(0, 0)] * (image.ndim - 2)
    return np.pad(image, spec, constant_values=fill)
