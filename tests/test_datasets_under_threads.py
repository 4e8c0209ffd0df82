"""Every dataset class we ship reads under the thread executor what it reads on one thread.

The thread executor calls one dataset object from several threads at once, so
a dataset that keeps a table of open files, a cursor or a cache must keep it
consistent under that. Each shipped class is built small, over files made in
``tmp_path``, and read for several shuffled epochs by
:class:`MultithreadIterator` (four threads) and by :class:`SerialIterator`:
every batch must be the same. A new dataset class fails
:func:`test_every_shipped_dataset_class_has_a_builder_here` until it gets a
builder below.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import sys
import zipfile

import numpy as np
import pytest

import dataset_kit
from dataset_kit import DatasetMixin
from dataset_kit.iterators import MultithreadIterator, SerialIterator

# Classes not built here, and why (each is covered through the classes that use it).
NOT_BUILT = {
    "dataset_kit.datasets.gluon_dataset.Dataset":
        "Gluon's abstract base: SimpleDataset, ArrayDataset and the vision sets are built",
    "dataset_kit.sources.data_source.DataSource":
        "NNabla's abstract base: every concrete source is built",
    "dataset_kit.tabular.tabular_dataset.TabularDataset":
        "Chainer's abstract base: from_data and every operation's class are built",
    "dataset_kit.datasets.columnar.ColumnarDataset":
        "the row-group base: ParquetDataset and from_hf's ArrowDataset are built",
    "dataset_kit.torch._stream.Streams":
        "not random access: each worker reads its IterableDataset's stream in order, and the "
        "torch door never hands it to the thread executor",
}


def _png(value: int, size=(6, 5)) -> bytes:
    Image = pytest.importorskip("PIL.Image", reason="the image files are made by Pillow")
    out = io.BytesIO()
    Image.fromarray(np.full((*size, 3), value, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def _pngs(folder, n=9):
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        (folder / f"{i}.png").write_bytes(_png(20 * i))
        names.append(f"{i}.png")
    return names


def _zip(path, names, folder):
    with zipfile.ZipFile(path, "w") as zf:
        for name in names:
            zf.write(folder / name, name)
    return str(path)


def _arrays():
    return np.arange(30, dtype=np.float32).reshape(10, 3), np.arange(10, dtype=np.int64)


def _records(tmp_path, images: bool):
    from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack
    rec, idx = str(tmp_path / "data.rec"), str(tmp_path / "data.idx")
    with IndexedRecordWriter(idx, rec) as writer:
        for i in range(9):
            body = _png(25 * i) if images else bytes([i]) * (i + 1)
            writer.write_idx(i, pack(IRHeader(0, float(i), i, 0), body) if images else body)
    return rec, idx


def _csv(tmp_path):
    names = _pngs(tmp_path / "img")
    lines = ["x:image,y"] + [f"img/{name},{i}" for i, name in enumerate(names)]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "data.csv")


def _simple_source():
    from dataset_kit.sources import SimpleDataSource
    return SimpleDataSource(lambda i: (np.full((2, 3), i, np.float32), np.array([i])), 11)


def _cache(tmp_path):
    from dataset_kit.sources.file_cache import write_cache
    write_cache(str(tmp_path / "cache"), _simple_source(), chunk_size=4)
    return str(tmp_path / "cache")


def _tabular():
    from dataset_kit import tabular
    x, y = _arrays()
    return tabular.from_data((("x", x), ("y", y)))


def _build_vision(cls):
    def build(tmp_path):
        from tests.datasets.test_gluon_vision import write_cifar_bins, write_mnist
        if cls.__name__ in ("MNIST", "FashionMNIST"):
            write_mnist(tmp_path, sizes=(("train", 9), ("t10k", 4)))
        elif cls.__name__ == "CIFAR10":
            write_cifar_bins(tmp_path, 1, [f"data_batch_{k}.bin" for k in range(1, 6)]
                             + ["test_batch.bin"], n=2)
        else:
            write_cifar_bins(tmp_path, 2, ["train.bin", "test.bin"], n=9)
        return cls(root=tmp_path)
    return build


def _streaming(tmp_path):
    from dataset_kit.shards import StreamingDataset
    from tests.shards.conftest import write
    write(tmp_path / "set", n=40, shard_size=400)
    return StreamingDataset(tmp_path / "set", local=tmp_path / "cache", open_shards=2)


def _pickles(tmp_path):
    from dataset_kit.datasets.pickle_dataset import open_pickle_dataset, open_pickle_dataset_writer
    with open_pickle_dataset_writer(tmp_path / "p.pkl") as writer:
        for i in range(11):
            writer.write({"i": i, "x": np.full(i + 1, i)})
    return open_pickle_dataset(tmp_path / "p.pkl")


def _image_folder(tmp_path):
    from dataset_kit.datasets import ImageFolderDataset
    for label in ("cat", "dog"):
        _pngs(tmp_path / "root" / label, n=5)
    return ImageFolderDataset(tmp_path / "root")


def _text(tmp_path):
    from dataset_kit.datasets import TextDataset
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    (tmp_path / "b.txt").write_text("".join(f"other {i}\n" for i in range(10)))
    return TextDataset([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])


def _csv_array(tmp_path):
    from dataset_kit.datasets import CSVArrayDataset
    (tmp_path / "rows.csv").write_text("".join(f"{i},{i + 1},{i * 2}\n" for i in range(10)))
    return CSVArrayDataset(tmp_path / "rows.csv", (3,))


def _d(name):
    return getattr(dataset_kit.datasets, name)


def _s(name):
    return getattr(importlib.import_module("dataset_kit.sources"), name)


BUILDERS = {
    "dataset_kit.datasets.array_dataset.ArrayDataset": lambda p: _d("ArrayDataset")(*_arrays()),
    "dataset_kit.datasets.concatenated_dataset.ConcatenatedDataset":
        lambda p: _d("ConcatenatedDataset")(_d("TupleDataset")(*_arrays()), list(range(7))),
    "dataset_kit.datasets.csv_dataset.CSVArrayDataset": _csv_array,
    "dataset_kit.datasets.gluon_dataset.SimpleDataset":
        lambda p: _d("SimpleDataset")([(i, str(i)) for i in range(11)]),
    "dataset_kit.datasets.gluon_vision.CIFAR10": _build_vision(_d("CIFAR10")),
    "dataset_kit.datasets.gluon_vision.CIFAR100": _build_vision(_d("CIFAR100")),
    "dataset_kit.datasets.gluon_vision.FashionMNIST": _build_vision(_d("FashionMNIST")),
    "dataset_kit.datasets.gluon_vision.MNIST": _build_vision(_d("MNIST")),
    "dataset_kit.datasets.image_dataset.ImageDataset":
        lambda p: _d("ImageDataset")(_pngs(p), root=str(p)),
    "dataset_kit.datasets.image_dataset.LabeledImageDataset":
        lambda p: _d("LabeledImageDataset")([(n, i) for i, n in enumerate(_pngs(p))],
                                            root=str(p)),
    "dataset_kit.datasets.image_dataset.ZippedImageDataset":
        lambda p: _d("ZippedImageDataset")(_zip(p / "a.zip", _pngs(p), p)),
    "dataset_kit.datasets.image_dataset.MultiZippedImageDataset":
        lambda p: _d("MultiZippedImageDataset")([_zip(p / "a.zip", _pngs(p)[:5], p),
                                                 _zip(p / "b.zip", _pngs(p)[5:], p)]),
    "dataset_kit.datasets.image_dataset.LabeledZippedImageDataset": lambda p: (
        (p / "labels.txt").write_text("".join(f"{n} {i}\n" for i, n in enumerate(_pngs(p)))),
        _d("LabeledZippedImageDataset")(_zip(p / "a.zip", _pngs(p), p),
                                        str(p / "labels.txt")))[1],
    "dataset_kit.datasets.image_folder.ImageFolderDataset": _image_folder,
    "dataset_kit.datasets.pickle_dataset.PickleDataset": _pickles,
    "dataset_kit.datasets.record_dataset.RecordFileDataset":
        lambda p: _d("RecordFileDataset")(*_records(p, images=False)),
    "dataset_kit.datasets.record_dataset.ImageRecordDataset":
        lambda p: (lambda rec, idx: _d("ImageRecordDataset")(rec, idx_path=idx))(
            *_records(p, images=True)),
    "dataset_kit.datasets.sub_dataset.SubDataset":
        lambda p: _d("SubDataset")(list(range(20)), 3, 15, order=np.arange(20)[::-1]),
    "dataset_kit.datasets.text_dataset.TextDataset": _text,
    "dataset_kit.datasets.transform_dataset.TransformDataset":
        lambda p: _d("TransformDataset")(_d("TupleDataset")(*_arrays()),
                                         lambda e: (e[0] * 2, e[1] + 1)),
    "dataset_kit.datasets.tuple_dataset.DictDataset":
        lambda p: _d("DictDataset")(x=_arrays()[0], y=_arrays()[1]),
    "dataset_kit.datasets.tuple_dataset.TupleDataset": lambda p: _d("TupleDataset")(*_arrays()),
    "dataset_kit.shards.dataset.StreamingDataset": _streaming,
    "dataset_kit.sources.cache_reader.CacheDataSource":
        lambda p: _s("CacheDataSource")(_cache(p)),
    "dataset_kit.sources.create_cache.CreateCache":
        lambda p: _s("CreateCache")(_csv(p), num_of_threads=0),
    "dataset_kit.sources.csv_source.CsvDataSource": lambda p: _s("CsvDataSource")(_csv(p)),
    "dataset_kit.sources.data_source.ConcatDataSource":
        lambda p: _s("ConcatDataSource")([_simple_source(), _simple_source()], shuffle=False),
    "dataset_kit.sources.data_source.DataSourceWithMemoryCache":
        lambda p: _s("DataSourceWithMemoryCache")(_simple_source()),
    "dataset_kit.sources.data_source.SimpleDataSource": lambda p: _simple_source(),
    "dataset_kit.sources.data_source.SlicedDataSource":
        lambda p: _s("SlicedDataSource")(_simple_source(), slice_start=2, slice_end=9),
    "dataset_kit.sources.file_cache.DataSourceWithFileCache":
        lambda p: _s("DataSourceWithFileCache")(_simple_source(), cache_dir=str(p / "c")),
    "dataset_kit.tabular._asmode.AsMode": lambda p: _tabular().asdict(),
    "dataset_kit.tabular._asmode.WithConverter":
        lambda p: _tabular().with_converter(lambda x, y: x.sum() + y),
    "dataset_kit.tabular._concat.Concat": lambda p: _tabular().concat(_tabular()),
    "dataset_kit.tabular._join.Join":
        lambda p: _tabular().join(dataset_kit.tabular.from_data(("z", np.arange(10) * 3))),
    "dataset_kit.tabular._slice.Slice": lambda p: _tabular().slice[1:9, "x"],
    "dataset_kit.tabular._transform.Transform":
        lambda p: _tabular().transform(("s",), lambda x, y: (x.sum() * y,)),
    "dataset_kit.tabular._transform.TransformBatch":
        lambda p: _tabular().transform_batch(("s",), lambda x, y: (x.sum(axis=1) * y,)),
    "dataset_kit.tabular.delegate_dataset.DelegateDataset":
        lambda p: dataset_kit.tabular.DelegateDataset(_tabular()),
    "dataset_kit.tabular.from_data._Stored": lambda p: _tabular(),
    "dataset_kit.tabular.from_data._RowIndex":
        lambda p: dataset_kit.tabular.from_data(("f", lambda i: i * i), size=12),
    "dataset_kit.torch._fetch.Fetch": lambda p: _fetch(),
    "dataset_kit.datasets.parquet.ParquetDataset": lambda p: _parquet(p),
    "dataset_kit.datasets.hf.ArrowDataset": lambda p: _arrow(p),
    "dataset_kit.datasets.mixture.Mixture": lambda p: _mixture(p),
    "dataset_kit.datasets.packing.PackedDataset": lambda p: _packed(p),
}


def _parquet(tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet files need pyarrow (the parquet extra)")
    from tests.datasets.parquet_files import write
    write(tmp_path / "a.parquet", [4, 0, 3])
    write(tmp_path / "b.parquet", [5], start=7)
    return _d("ParquetDataset")(str(tmp_path))


def _arrow(tmp_path):
    hf = pytest.importorskip("datasets", reason="from_hf needs Hugging Face datasets (hf extra)")
    table = hf.Dataset.from_dict({"x": [[float(i), i + 0.5] for i in range(13)],
                                  "y": list(range(13))})
    return _d("from_hf")(table)


def _mixture(tmp_path):
    a, b = _d("TupleDataset")(*_arrays()), _d("TupleDataset")(*(x + 100 for x in _arrays()))
    return _d("mix")([a, b], [0.3, 0.7], seed=5)


def _packed(tmp_path):
    docs = [{"tokens": np.arange(1 + i % 5, dtype=np.int32) + 10 * i} for i in range(20)]
    return _d("pack")(docs, 6, method="first_fit", num_bins=3)


def _fetch():
    pytest.importorskip("torch", reason="the torch door needs PyTorch (the torch extra)")
    from dataset_kit.torch._fetch import Fetch
    return Fetch(_d("TupleDataset")(*_arrays()))


def _shipped() -> set[str]:
    for module in pkgutil.walk_packages(dataset_kit.__path__, "dataset_kit."):
        try:
            importlib.import_module(module.name)
        except ImportError:  # a door over an optional dependency that is absent
            pass

    def walk(cls):
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("dataset_kit."):
                yield f"{sub.__module__}.{sub.__qualname__}", sub
            yield from walk(sub)
    return {name for name, cls in walk(DatasetMixin) if not cls.__name__.startswith("_")}


def test_every_shipped_dataset_class_has_a_builder_here():
    missing = _shipped() - set(BUILDERS) - set(NOT_BUILT)
    assert not missing, f"add a builder for {sorted(missing)}"


def _same(got, expected, where):
    try:
        np.testing.assert_equal(got, expected)
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}") from None


@pytest.fixture
def eager_switches():
    """Threads switch every few microseconds, not every 5 ms: races show in a short run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize("name", sorted(BUILDERS), ids=lambda name: name.rsplit(".", 1)[-1])
def test_threads_read_every_batch_as_one_thread_does(tmp_path, name, eager_switches):
    dataset = BUILDERS[name](tmp_path)
    batch = 3
    batches = 4 * -(-len(dataset) // batch)  # four shuffled epochs
    serial = SerialIterator(dataset, batch, shuffle=True, seed=11)
    expected = [serial.next() for _ in range(batches)]
    with MultithreadIterator(dataset, batch, shuffle=True, seed=11, n_threads=4) as threads:
        for k in range(batches):
            _same(list(threads.next()), list(expected[k]), f"{name}, batch {k}")
