"""NNabla's ``data_source_loader`` names: images, resource files and downloads.

========================  ===================================================
NNabla                    here
========================  ===================================================
``load_image(file)``      the image as CHW (``1 x H x W`` for grayscale),
                          uint8 (uint16 for 16-bit images); ``normalize``
                          scales to [0, 1] as float64; ``shape=(C, H, W)``
                          resizes (bilinear)
``ResourceFileReader``    a path (local, ``file://`` or http(s), fetched once
                          through :func:`~dataset_kit.cached_download`) or a
                          binary file object, with its extension in ``ext``
                          and a binary file from ``open()``
``download(url)``         through dataset_kit's download manager
                          (:func:`~dataset_kit.cached_download`: one lock
                          per file, atomic, retried, resumed, offline
                          switch); without ``output_file`` the file is the
                          cache's (:func:`~dataset_kit.cached_download_path`),
                          not ``get_data_home()/<basename>``
``get_data_home()``       ``<dataset root>/nnabla_data``, created (NNabla's
                          is ``~/nnabla_data``)
========================  ===================================================
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from dataset_kit import _uri
from dataset_kit.download import (
    cached_download,
    cached_download_path,
    download_file,
    get_dataset_directory,
)
from dataset_kit.image.decode import pillow, read_image

# NNabla's get_file_extension table: (magic bytes, their offset) per extension.
_SIGNATURES = (
    (".bmp", (b"BM",), 0),
    (".pgm", (b"P5\n",), 0),
    (".jpg", (b"\xff\xd8\xff",), 0),
    (".png", (b"\x89PNG\r\n\x1a\n",), 0),
    (".tif", (b"I I",), 0),
    (".eps", (b"\xc5\xd0\xd3\xc6",), 0),
    (".gif", (b"GIF87a", b"GIF89a"), 0),
    (".ico", (b"\x00\x00\x01\x00",), 0),
    (".dcm", (b"DICM",), 0x80),
    (".wav", (b"RIFF",), 0),
)


def sniff_extension(head: bytes) -> str:
    """Return the extension whose magic bytes ``head`` starts with, or ``''``."""
    for ext, magics, offset in _SIGNATURES:
        if any(head[offset:offset + len(m)] == m for m in magics):
            return ext
    return ""


class ResourceFileReader:
    """A file given as a path or as a binary file object, and its extension (NNabla's).

    Args:
        source: a local path, ``file://`` or http(s) URL, or a seekable
            binary file object (an open file, a :class:`io.BytesIO`).

    Attributes:
        ext: the lower-case extension (``'.png'``): from the path or the file
            object's ``name``, else sniffed from the first bytes (``''``
            when nothing matches).

    Raises:
        ValueError: if ``source`` is a text file object (a :class:`io.StringIO`,
            a file opened in text mode) or anything else that is not a path
            or a seekable binary file.
        FileNotFoundError: if a path has no extension and cannot be opened.
    """

    def __init__(self, source: str | os.PathLike | Any) -> None:
        if isinstance(source, (str, os.PathLike)):
            self._path: str | None = os.fspath(source)
            self._file = None
            self.ext = os.path.splitext(self._path)[1].lower()
            if not self.ext:
                with self.open() as f:
                    self.ext = sniff_extension(f.read(0x84))
            return
        if not _is_binary_seekable(source):
            raise ValueError(
                f"ResourceFileReader takes a path or a seekable binary file object, got "
                f"{type(source).__name__}" + (" in text mode" if hasattr(source, "read") else ""))
        self._path, self._file = None, source
        name = getattr(source, "name", None)
        if isinstance(name, str):
            self.ext = os.path.splitext(name)[1].lower()
        else:
            source.seek(0)
            self.ext = sniff_extension(source.read(0x84))
            source.seek(0)

    @contextlib.contextmanager
    def open(self) -> Iterator[Any]:
        """Yield a binary file positioned at its start, with the extension as ``ext``.

        A file object given to the constructor is rewound before and after,
        and stays open.
        """
        if self._file is None:
            assert self._path is not None  # a source is a path or a file object
            with open(_uri.local_path(self._path), "rb") as f:
                f.ext = self.ext  # type: ignore[attr-defined]  # NNabla's readers look for it
                yield f
            return
        self._file.seek(0)
        try:
            yield self._file
        finally:
            self._file.seek(0)


def _is_binary_seekable(source: Any) -> bool:
    if not (hasattr(source, "read") and hasattr(source, "seek")):
        return False
    try:
        source.seek(0)
        first = source.read(1)
        source.seek(0)
    except (OSError, ValueError):
        return False
    return isinstance(first, bytes)


def load_image(file: str | os.PathLike | Any, shape: tuple[int, int, int] | None = None,
               normalize: bool = False) -> np.ndarray:
    """Decode an image to a CHW array, as NNabla's ``load_image`` does.

    Args:
        file: a path, a binary file object, or a :class:`ResourceFileReader`.
        shape: ``(channels, height, width)`` to resize to (bilinear); the
            channels must be the image's own.
        normalize: scale to [0, 1] (float64), dividing by 255 (65535 for
            16-bit images).

    Returns:
        ``C x H x W``: uint8 (uint16 for 16-bit images) unless ``normalize``.

    Raises:
        CorruptImageError: if the bytes are not a decodable image.
        ValueError: if ``shape`` is not three positive sizes or asks for
            other channels than the image has.
    """
    where = _name_of(file)
    if isinstance(file, ResourceFileReader):
        with file.open() as f:
            data = f.read()
    elif isinstance(file, (str, os.PathLike)):
        with open(_uri.local_path(os.fspath(file)), "rb") as f:
            data = f.read()
    else:
        data = file.read()
        if not isinstance(data, bytes):
            raise ValueError(f"load_image needs a binary file, got text from {where}")
    image = _decode(data, where)
    if shape is not None:
        image = _resized(image, shape, where)
    if not normalize:
        return image
    return image * (1.0 / (65535.0 if image.dtype == np.uint16 else 255.0))


def _decode(data: bytes, where: str) -> np.ndarray:
    """CHW uint8, or uint16 for a 16-bit grayscale image (Pillow's ``I;16`` modes)."""
    try:
        with pillow().open(io.BytesIO(data)) as probe:
            sixteen = probe.mode.startswith("I;16")
    except (OSError, SyntaxError, ValueError):
        sixteen = False  # not an image: read_image raises, naming the file
    return read_image(data, np.uint16 if sixteen else np.uint8, where)


def _resized(image: np.ndarray, shape: Any, where: str) -> np.ndarray:
    try:
        channels, height, width = (int(n) for n in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (channels, height, width), got {shape!r}") from None
    if min(channels, height, width) <= 0 or channels != image.shape[0]:
        raise ValueError(f"shape {tuple(shape)!r} does not fit {where}: it has "
                         f"{image.shape[0]} channels")
    if image.shape[1:] == (height, width):
        return image
    image_module = pillow()
    planes = [np.asarray(image_module.fromarray(np.ascontiguousarray(plane)).resize(
        (width, height), image_module.Resampling.BILINEAR)) for plane in image]
    return np.stack(planes).astype(image.dtype, copy=False)


def _name_of(file: Any) -> str:
    if isinstance(file, (str, os.PathLike)):
        return os.fspath(file)
    if isinstance(file, ResourceFileReader):
        return file._path or _name_of(file._file)
    name = getattr(file, "name", None)
    return name if isinstance(name, str) else f"a {type(file).__name__}"


def get_data_home() -> str:
    """Return the folder for NNabla's examples' data, creating it (NNabla's ``get_data_home``).

    NNabla's is ``~/nnabla_data``; here it is ``nnabla_data`` under the
    dataset root (:func:`~dataset_kit.get_dataset_root`), so one setting
    moves every cached file. Point the root's ``nnabla_data`` at an existing
    ``~/nnabla_data`` (a symbolic link) to reuse what NNabla stored there.

    Returns:
        The folder's absolute path.
    """
    return get_dataset_directory("nnabla_data")


def download(url: str, output_file: str | os.PathLike | None = None, open_file: bool = True,
             allow_overwrite: bool = False) -> Any:
    """Download ``url`` once and open it, with NNabla's signature and dataset_kit's manager.

    Without ``output_file`` the file goes into the download cache, at
    :func:`~dataset_kit.cached_download_path` ``(url)``, where every later call
    (in any process) finds it; pre-fill that path to use the function
    offline. With ``output_file`` the file is written there. Either way an
    existing file is used as it is unless ``allow_overwrite``, and a file
    appears complete or not at all (one lock per file, a temporary file moved
    into place), where NNabla writes the target directly.

    Args:
        url: an http(s) URL, a ``file://`` URL or a local path.
        output_file: where to write the file; None for the download cache.
        open_file: return the file opened for binary reading.
        allow_overwrite: download again even if the file exists.

    Returns:
        A binary file object at the file's start if ``open_file``, else None.

    Raises:
        ValueError: if ``url`` is malformed, or ``open_file`` or
            ``allow_overwrite`` is not a bool.
        TypeError: if ``output_file`` is neither None nor a path.
        OfflineError: if ``DATASET_KIT_OFFLINE`` is set and the file is not there.
        DownloadError: if the download fails.
    """
    for name, value in (("open_file", open_file), ("allow_overwrite", allow_overwrite)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    if output_file is not None and not isinstance(output_file, (str, os.PathLike)):
        raise TypeError(f"output_file must be None or a path, got {output_file!r}")
    if output_file is not None:
        path = download_file(url, output_file, overwrite=allow_overwrite)
    elif allow_overwrite:
        path = download_file(url, cached_download_path(url), overwrite=True)
    else:
        path = cached_download(url)
    return open(path, "rb") if open_file else None  # noqa: SIM115 - NNabla returns it open
