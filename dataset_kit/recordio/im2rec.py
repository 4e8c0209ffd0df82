"""``dataset-kit im2rec``: MXNet's im2rec.py, reimplemented (lists, then record files).

``make_lists`` writes ``.lst`` files (``index<TAB>label...<TAB>path``) from a
folder tree, exactly as MXNet's tool does (the same order, the same
``random.seed(100)`` shuffle, the same splits and chunks). ``pack_list``
encodes the images of a ``.lst`` into ``.rec`` + ``.idx`` with worker
processes, in ``.lst`` order: the engine's ``MultiprocessIterator`` builds
the records, so there is no pool of its own here. Images are RGB.
"""

from __future__ import annotations

import io
import os
import random
import sys
from collections.abc import Iterator, Sequence

from tqdm import tqdm

from dataset_kit.dataset import DatasetMixin
from dataset_kit.formats.recordio.header import IRHeader, pack
from dataset_kit.formats.recordio.record_file import IndexedRecordWriter
from dataset_kit.image.decode import pillow
from dataset_kit.iterators import MultiprocessIterator, SerialIterator

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")


def list_images(root: str, recursive: bool, exts: Sequence[str]) -> list[tuple]:
    """``(index, relative path, label)`` for each image; with ``recursive`` one label per folder."""
    exts = tuple(e.lower() for e in exts)
    items: list[tuple] = []
    if recursive:
        labels: dict[str, int] = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(path, name)
                if os.path.isfile(full) and os.path.splitext(name)[1].lower() in exts:
                    label = labels.setdefault(path, len(labels))
                    items.append((len(items), os.path.relpath(full, root), label))
    else:
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if os.path.isfile(full) and os.path.splitext(name)[1].lower() in exts:
                items.append((len(items), os.path.relpath(full, root), 0))
    return items


def write_list(path: str, items: Sequence[tuple]) -> None:
    """Write ``.lst`` lines: ``index``, each label as ``%f``, the path, tab-separated."""
    with open(path, "w") as f:
        for item in items:
            f.write("\t".join([f"{item[0]:d}", *(f"{x:f}" for x in item[2:]), item[1]]) + "\n")


def make_lists(prefix: str, root: str, recursive: bool = False,
               exts: Sequence[str] = DEFAULT_EXTS, train_ratio: float = 1.0,
               test_ratio: float = 0.0, shuffle: bool = True, chunks: int = 1) -> list[str]:
    """Write the ``.lst`` files of MXNet's ``im2rec.py --list``; return their paths.

    Each chunk is split as MXNet's tool splits it: with ``train_ratio`` 1 (the
    default) the whole chunk goes to ``PREFIX.lst`` and ``test_ratio`` is not
    used; otherwise its first ``int(size * test_ratio)`` items go to
    ``_test.lst`` (when ``test_ratio`` is not 0), the next
    ``int(size * train_ratio)`` to ``_train.lst``, and the rest to ``_val.lst``
    when the two ratios add up to less than 1 (when they add up to more, the
    train list gets what is left after the test list).

    Raises:
        ValueError: if a ratio is outside [0, 1] or ``chunks`` is below 1.
    """
    for name, ratio in (("train_ratio", train_ratio), ("test_ratio", test_ratio)):
        if not 0 <= ratio <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {ratio}")
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    items = list_images(root, recursive, exts)
    if shuffle:
        random.Random(100).shuffle(items)  # MXNet's random.seed(100); random.shuffle(...)
    size = (len(items) + chunks - 1) // chunks
    written = []
    for c in range(chunks):
        chunk = items[c * size:(c + 1) * size]
        name = prefix + (f"_{c}" if chunks > 1 else "")
        sep, sep_test = int(size * train_ratio), int(size * test_ratio)
        parts = [(".lst", chunk)] if train_ratio == 1.0 else (
            ([("_test.lst", chunk[:sep_test])] if test_ratio else [])
            + ([("_val.lst", chunk[sep_test + sep:])] if train_ratio + test_ratio < 1 else [])
            + [("_train.lst", chunk[sep_test:sep_test + sep])])
        for suffix, part in parts:
            write_list(name + suffix, part)
            written.append(name + suffix)
    return written


def read_list(path: str) -> Iterator[tuple]:
    """``(index, path, label, ...)`` per line of a ``.lst`` file.

    Raises:
        ValueError: for a malformed line, naming the file and line.
    """
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = [x.strip() for x in line.strip().split("\t")]
            if len(fields) < 3:
                raise ValueError(f"{path}, line {number}: expected 'index<TAB>label...<TAB>path'"
                                 f", got {line!r}")
            try:
                yield (int(fields[0]), fields[-1], *(float(x) for x in fields[1:-1]))
            except ValueError:
                raise ValueError(f"{path}, line {number}: index and labels must be numbers, got "
                                 f"{line!r}") from None


class _EncodedImages(DatasetMixin):
    """Record ``i``: the packed image of ``.lst`` item ``i``, or ``(None, reason)``
    if unreadable."""

    def __init__(self, items: list[tuple], root: str, options: dict) -> None:
        self.items, self.root, self.options = items, root, options

    def __len__(self) -> int:
        return len(self.items)

    def get_example(self, i: int) -> tuple:
        item = self.items[i]
        labels = item[2:]
        header = IRHeader(0, labels[0] if len(labels) == 1 else list(labels), item[0], 0)
        path = os.path.join(self.root, item[1])
        try:
            if self.options["pass_through"]:
                with open(path, "rb") as f:
                    return pack(header, f.read()), None
            return pack(header, self._encode(path)), None
        except Exception as error:  # noqa: BLE001 - reported per image, the run goes on
            return None, f"{path}: {error}"

    def _encode(self, path: str) -> bytes:
        image_module = pillow()
        with image_module.open(path) as image:
            color = self.options["color"]
            image = image.convert("RGB" if color == 1 else "L") if color in (0, 1) else image.copy()
        width, height = image.size
        if self.options["center_crop"]:
            side = min(width, height)
            left, top = (width - side) // 2, (height - side) // 2
            image = image.crop((left, top, left + side, top + side))
            width = height = side
        resize = self.options["resize"]
        if resize:
            size = (resize, height * resize // width) if height > width else \
                (width * resize // height, resize)
            image = image.resize(size, image_module.Resampling.BILINEAR)
        out = io.BytesIO()
        if self.options["encoding"] == ".png":
            image.save(out, format="PNG", compress_level=min(max(self.options["quality"], 0), 9))
        else:
            image.save(out, format="JPEG", quality=self.options["quality"])
        return out.getvalue()


def pack_list(lst_path: str, root: str, num_thread: int = 1, resize: int = 0,
              center_crop: bool = False, quality: int = 95, encoding: str = ".jpg",
              pass_through: bool = False, color: int = 1, progress: bool | None = None) -> dict:
    """Encode the images of ``lst_path`` into ``<name>.rec`` and ``<name>.idx``, in order.

    An unreadable image is reported (its path and why) and skipped; the
    files appear only when the whole list is done.

    Returns:
        ``{"records": written, "skipped": [(path, reason), ...], "rec": ..., "idx": ...}``.

    Raises:
        ValueError: for a bad option or a malformed ``.lst`` line.
    """
    if encoding not in (".jpg", ".png"):
        raise ValueError(f"encoding must be '.jpg' or '.png', got {encoding!r}")
    if color not in (-1, 0, 1):
        raise ValueError(f"color must be 1, 0 or -1, got {color!r}")
    items = list(read_list(lst_path))
    options = dict(resize=resize, center_crop=center_crop, quality=quality, encoding=encoding,
                   pass_through=pass_through, color=color)
    dataset = _EncodedImages(items, root, options)
    base = os.path.splitext(lst_path)[0]
    skipped, written = [], 0
    show = sys.stderr.isatty() if progress is None else progress
    it = MultiprocessIterator(dataset, 16, repeat=False, shuffle=False, n_processes=num_thread) \
        if num_thread > 1 else SerialIterator(dataset, 16, repeat=False, shuffle=False)
    done = 0  # items consumed so far; never the bar's count, which a disabled bar keeps at 0
    with it, IndexedRecordWriter(base + ".idx", base + ".rec") as writer, \
            tqdm(total=len(items), disable=not show, desc=os.path.basename(lst_path)) as bar:
        for batch in it:
            for (record, problem), item in zip(batch, items[done:done + len(batch)], strict=True):
                if record is None:
                    skipped.append((item[1], problem))
                else:
                    writer.write_idx(item[0], record)
                    written += 1
            done += len(batch)
            bar.update(len(batch))
    return {"records": written, "skipped": skipped, "rec": base + ".rec", "idx": base + ".idx"}


def list_files_for(prefix: str) -> list[str]:
    """The ``.lst`` files a prefix names (MXNet's rule: a folder, or files starting with it)."""
    if os.path.isdir(prefix):
        folder, start = prefix, ""
    else:
        folder, start = os.path.dirname(prefix) or ".", os.path.basename(prefix)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.startswith(start) and f.endswith(".lst")
                  and os.path.isfile(os.path.join(folder, f)))

