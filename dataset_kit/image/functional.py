"""MXNet 1.9's ``mx.image`` functions: decoding, resizing, cropping, normalising (HWC arrays).

Same names, argument order and results as MXNet's, with two differences a
porting user sees once:

* **NDArray when MXNet is in use.** ``imdecode`` and ``imread`` give an
  ``mx.nd.NDArray`` when the program uses MXNet, as MXNet's do, and otherwise
  an :class:`~dataset_kit.io.MXArray` (a numpy array with NDArray's
  ``asnumpy()``, ``asscalar()``, ``context``...). The other functions take
  either: an ``NDArray`` in gives an ``NDArray`` out; a numpy array in gives
  an :class:`~dataset_kit.io.MXArray` view of the result (numpy's speed,
  NDArray's methods). Nothing is modified in place (MXNet's
  ``color_normalize`` changes its input).
* **RGB**, as MXNet's own ``imdecode``/``imread`` (``to_rgb=True``) give; code
  that called OpenCV (``cv2.imread``) directly had BGR.

Interpolation codes are OpenCV's, which MXNet passes on unchanged: 0 nearest,
1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 bicubic to enlarge / area to
shrink / else bilinear, 10 one of 0-4 at random. (MXNet's docstrings list 2 as
area and 3 as bicubic in places; its code is OpenCV's.) Pixels are OpenCV's
when OpenCV is installed (the ``opencv`` extra), see
:mod:`dataset_kit.image._resize`. Random draws come from one generator per
example (:mod:`dataset_kit.image._draws`).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from numbers import Number
from typing import Any

import numpy as np

from dataset_kit._mxnet_arrays import MXArray, mxnet_output, ndarray_from
from dataset_kit.image import _resize, affine, decode
from dataset_kit.image._draws import draws


def _mxnet_error(message: str) -> Exception:
    # Imported here: dataset_kit.io imports this package, so a top-level import would cycle.
    from dataset_kit._mxnet_errors import mxnet_error
    return mxnet_error(message)


def as_numpy(array: Any) -> np.ndarray:
    """A numpy view of ``array`` (an MXNet ``NDArray`` is read through ``asnumpy()``)."""
    if not isinstance(array, np.ndarray) and hasattr(array, "asnumpy"):
        return array.asnumpy()
    return np.asarray(array)


def like(source: Any, result: np.ndarray) -> Any:
    """``result`` as an MXNet ``NDArray`` when ``source`` was one, else as an MXArray view."""
    if isinstance(source, np.ndarray) or not type(source).__module__.startswith("mxnet"):
        return result.view(MXArray)
    return ndarray_from(sys.modules["mxnet"], result)


def _store(result: np.ndarray, out: Any) -> Any:
    """Write into ``out`` (MXNet's ``out=`` argument) and return it."""
    if out is None:
        return None
    out[:] = result
    return out


def decode_hwc(data: bytes, flag: int, to_rgb: bool, where: str) -> np.ndarray:
    """Decode to HWC uint8: 3 channels (flag 1), 1 (flag 0) or as stored (flag -1).

    Raises:
        dataset_kit.io.MXNetError: if ``data`` is empty or not an image, naming ``where``.
    """
    if not data:
        raise _mxnet_error(f"cannot decode image {where}: the buffer is empty")
    array = None
    if data[:3] == decode.JPEG_MAGIC:
        try:
            array = decode.decode_jpeg(data, where, None)
        except decode.CorruptImageError as error:
            raise _mxnet_error(str(error)) from None
    if array is None:
        try:
            with decode.pillow().open(io.BytesIO(data)) as image:
                mode = {1: "RGB", 0: "L"}.get(flag)
                array = np.asarray(image if mode is None or image.mode == mode
                                   else image.convert(mode))
        except (OSError, SyntaxError, ValueError) as error:
            raise _mxnet_error(f"cannot decode image {where}: {error}") from None
    if array.ndim == 2:
        array = array[:, :, None]
    if flag == 1 and array.shape[2] != 3:
        array = np.repeat(array, 3, 2) if array.shape[2] == 1 else array[:, :, :3]
    elif flag == 0 and array.shape[2] != 1:
        from dataset_kit.image import color
        array = np.clip(np.rint(color.gray(array)), 0, 255).astype(np.uint8)[:, :, None]
    if not to_rgb and array.shape[2] >= 3:
        array = np.concatenate([array[:, :, 2::-1], array[:, :, 3:]], 2)
    return np.ascontiguousarray(array)


def imdecode(buf: Any, flag: int = 1, to_rgb: bool = True, out: Any = None) -> Any:
    """Decode an image file's bytes to an HWC uint8 array (MXNet's ``mx.image.imdecode``).

    Args:
        buf: the encoded image: bytes, bytearray, a uint8 numpy array or an NDArray.
        flag: 1 for three colour channels, 0 for grey (one channel), -1 as stored.
        to_rgb: RGB channel order (MXNet's default); False gives OpenCV's BGR.
        out: an array to write the image into (MXNet's ``out``).

    Returns:
        The image: an ``NDArray`` when MXNet is in use, else an
        :class:`~dataset_kit.io.MXArray`.

    Raises:
        ValueError: if ``buf`` is not bytes-like (MXNet's message).
        dataset_kit.io.MXNetError: if ``buf`` is empty or not an image.
    """
    if isinstance(buf, (bytes, bytearray)):
        data = bytes(buf)
    elif isinstance(buf, np.ndarray) or hasattr(buf, "asnumpy"):
        data = as_numpy(buf).astype(np.uint8, copy=False).tobytes()
    else:
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray,if you would "
                         "like to input type str, please convert to bytes")
    image = decode_hwc(data, int(flag), to_rgb, f"({len(data)} bytes)")
    return _store(image, out) if out is not None else mxnet_output(image)


def imread(filename: str | os.PathLike, flag: int = 1, to_rgb: bool = True,
           out: Any = None) -> Any:
    """Read and decode an image file (MXNet's ``mx.image.imread``); see :func:`imdecode`.

    Raises:
        dataset_kit.io.MXNetError: if the file does not exist or is not an image.
    """
    path = os.fspath(filename)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise _mxnet_error(f"imread: cannot read {path}: {error.strerror}") from None
    image = decode_hwc(data, int(flag), to_rgb, path)
    return _store(image, out) if out is not None else mxnet_output(image)


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> Any:
    """Resize ``src`` (HWC) to ``w x h`` with an interpolation code (see the module)."""
    image = as_numpy(src)
    code = affine.resolve_interpolation(int(interp), (image.shape[1], image.shape[0]),
                                        (int(w), int(h)), draws())
    result = _resize.resize(image, w, h, code)
    return _store(result, out) if out is not None else like(src, result)


def scale_down(src_size: Sequence[int], size: Sequence[int]) -> tuple[int, int]:
    """Shrink a crop ``size`` (w, h) to fit ``src_size`` (w, h), keeping its aspect ratio."""
    width, height = float(size[0]), float(size[1])
    src_width, src_height = src_size
    if height > src_height:  # too tall: fit the height first
        width, height = width * src_height / height, src_height
    if width > src_width:  # still too wide: then fit the width
        width, height = src_width, height * src_width / width
    return int(width), int(height)


def copyMakeBorder(src: Any, top: int, bot: int, left: int, right: int,  # noqa: N802
                   type: int = 0, value: float = 0.0, values: Sequence[float] = (),  # noqa: A002
                   out: Any = None) -> Any:
    """Pad an HWC image's borders, OpenCV's ``copyMakeBorder`` (MXNet's names and codes).

    Args:
        src: the image.
        top: rows added above; ``bot``, ``left``, ``right`` likewise.
        bot: rows added below.
        left: columns added on the left.
        right: columns added on the right.
        type: OpenCV's border type: 0 constant, 1 replicate, 2 reflect
            (``fedcba|abcdef``), 3 wrap, 4 reflect-101 (``fedcb|abcdef``).
        value: the constant (deprecated in MXNet for ``values``).
        values: a constant per channel.
        out: an array to write into.

    Raises:
        ValueError: for an unknown border type.
    """
    modes = {1: "edge", 2: "symmetric", 3: "wrap", 4: "reflect"}
    image = as_numpy(src)
    spec = [(int(top), int(bot)), (int(left), int(right))] + [(0, 0)] * (image.ndim - 2)
    if type == 0:
        fill = np.asarray(values if len(values) else [value], np.float64)
        result = np.empty((image.shape[0] + spec[0][0] + spec[0][1],
                           image.shape[1] + spec[1][0] + spec[1][1], *image.shape[2:]),
                          image.dtype)
        result[...] = np.resize(fill, image.shape[2]) if image.ndim == 3 else fill[0]
        result[spec[0][0]:spec[0][0] + image.shape[0],
               spec[1][0]:spec[1][0] + image.shape[1]] = image
    elif type in modes:
        result = np.pad(image, spec, mode=modes[type])  # type: ignore[call-overload]
    else:
        raise ValueError(f"type must be an OpenCV border type 0-4, got {type!r}")
    return _store(result, out) if out is not None else like(src, result)


def resize_short(src: Any, size: int, interp: int = 2) -> Any:
    """Resize so that the shorter side is ``size`` (MXNet's integer arithmetic)."""
    h, w = as_numpy(src).shape[:2]
    new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
    return imresize(src, new_w, new_h, interp)


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int, size: Sequence[int] | None = None,
               interp: int = 2) -> Any:
    """Crop ``w x h`` at ``(x0, y0)``, then resize to ``size`` (w, h) when given and different."""
    out = as_numpy(src)[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        w, h = size
        return imresize(like(src, out), w, h, interp=interp)
    return like(src, out)


def random_crop(src: Any, size: Sequence[int], interp: int = 2) -> tuple[Any, tuple]:
    """Crop ``size`` (w, h) at a random place (shrunk to fit, then resized back to ``size``).

    Returns:
        ``(image, (x0, y0, w, h))``: the crop and its box in ``src``.
    """
    h, w = as_numpy(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    rng = draws()
    x0 = int(rng.integers(0, w - new_w + 1))
    y0 = int(rng.integers(0, h - new_h + 1))
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src: Any, size: Sequence[int], interp: int = 2) -> tuple[Any, tuple]:
    """Crop ``size`` (w, h) at the centre; see :func:`random_crop`.

    Returns:
        ``(image, (x0, y0, w, h))``.
    """
    h, w = as_numpy(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: Any, mean: Any, std: Any = None) -> Any:
    """``(src - mean) / std`` per channel (either may be None); a new array, never in place."""
    image = as_numpy(src)
    out = _per_channel(np.subtract, image, as_numpy(mean)) if mean is not None else image
    if std is not None:
        if out is image or not np.issubdtype(out.dtype, np.floating):
            out = _per_channel(np.true_divide, out, as_numpy(std))
        else:  # the subtraction's fresh array: no second allocation
            out = _per_channel(np.true_divide, out, as_numpy(std), out)
    return like(src, out)


def _per_channel(op: Any, image: np.ndarray, values: Any, out: np.ndarray | None = None) -> Any:
    """``op(image, values)`` for one value per channel of an HWC image, element for element.

    Broadcasting ``(H, W, C)`` against ``(C,)`` runs numpy's inner loop over
    the C channels only (3 elements per call); against the values repeated
    along a row it runs over whole rows, several times faster.
    """
    values = np.asarray(values)
    if image.ndim == 3 and image.shape[2] > 1 and image.flags.c_contiguous \
            and values.shape == (image.shape[2],):
        height, width, channels = image.shape
        rows = (height, width * channels)
        result = op(image.reshape(rows), np.tile(values, width),
                    out=None if out is None else out.reshape(rows))
        return result.reshape(image.shape)
    return op(image, values) if out is None else op(image, values, out=out)


def random_size_crop(src: Any, size: Sequence[int], area: Any, ratio: Sequence[float],
                     interp: int = 2, **kwargs: Any) -> tuple[Any, tuple]:
    """Crop a random area fraction and aspect ratio, resized to ``size`` (Inception's crop).

    Args:
        src: the image.
        size: the output's (w, h).
        area: the fraction of the area kept: ``(min, max)``, or a float ``min``
            (max 1.0). ``min_area=`` is MXNet's deprecated name.
        ratio: ``(min, max)`` aspect ratio (w / h), drawn uniformly in log space.
        interp: the interpolation code.

    Returns:
        ``(image, (x0, y0, w, h))``; after 10 draws that do not fit, the centre crop.

    Raises:
        TypeError: for an unknown keyword.
    """
    if "min_area" in kwargs:
        area = kwargs.pop("min_area")
    if kwargs:
        raise TypeError(f"random_size_crop got unexpected keyword arguments {sorted(kwargs)}")
    h, w = as_numpy(src).shape[:2]
    if isinstance(area, Number):
        area = (area, 1.0)
    rng = draws()
    for _ in range(10):
        target = rng.uniform(area[0], area[1]) * h * w
        new_ratio = np.exp(rng.uniform(np.log(ratio[0]), np.log(ratio[1])))
        new_w = int(round(np.sqrt(target * new_ratio)))
        new_h = int(round(np.sqrt(target / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = int(rng.integers(0, w - new_w + 1))
            y0 = int(rng.integers(0, h - new_h + 1))
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)
