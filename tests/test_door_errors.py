"""The errors the docs name keep their class through every front door and executor.

A user writes ``except ShardIntegrityError`` (or ``except ManifestChangedError``)
whichever door and whichever executor built the batch: a door may add words,
never change the class. From a worker process the error is also a
``WorkerError`` naming the worker (its ``__cause__`` is the original).
"""

import io
import os

import numpy as np
import pytest

from dataset_kit import DatasetMixin
from dataset_kit._http import DownloadError
from dataset_kit._mxnet_errors import MXNetError
from dataset_kit.distributed import ShardedIterator
from dataset_kit.download import HashMismatchError, OfflineError
from dataset_kit.formats.nnabla_cache import CacheFormatError
from dataset_kit.image.decode import CorruptImageError
from dataset_kit.iterators import (
    MultiprocessIterator,
    MultithreadIterator,
    SerialIterator,
    WorkerError,
)
from dataset_kit.loader import DataLoader
from dataset_kit.recordio import IndexedRecordWriter, IRHeader, RecordIOError, pack
from dataset_kit.serializers import DictionarySerializer, NpzDeserializer
from dataset_kit.shards import (
    CacheFullError,
    ManifestChangedError,
    ShardDownloadError,
    ShardFormatError,
    ShardIntegrityError,
    ShardOrderSampler,
    ShardTimeoutError,
    StreamingDataset,
)
from dataset_kit.sources import data_iterator_simple
from tests.shards.conftest import write

# Every error class the docs name that reading a dataset can raise.
READ_ERRORS = [ShardFormatError, ShardIntegrityError, ShardDownloadError, ShardTimeoutError,
               CacheFullError, RecordIOError, CorruptImageError, CacheFormatError,
               DownloadError, HashMismatchError, OfflineError, MXNetError]


class Raising(DatasetMixin):
    """Example 5 raises ``error`` (a class); every other example is ``(i, i)``."""

    def __init__(self, error):
        self.error = error

    def __len__(self):
        return 12

    def get_example(self, i):
        if i == 5:
            raise self.error(f"example {i} is damaged")
        return np.float32(i), np.int64(i)


def _chainer(kind):
    def make(dataset):
        extra = {"thread": {"n_threads": 2}, "process": {"n_processes": 2}}.get(kind, {})
        cls = {"serial": SerialIterator, "thread": MultithreadIterator,
               "process": MultiprocessIterator}[kind]
        return cls(dataset, 4, shuffle=False, **extra)
    return make


def _gluon(workers, threads=False):
    def make(dataset):
        loader = DataLoader(dataset, 4, num_workers=workers, thread_pool=threads)
        return _Closing(iter(loader), loader.close if hasattr(loader, "close") else None)
    return make


def _torch(workers):
    def make(dataset):
        pytest.importorskip("torch", reason="the torch door needs PyTorch")
        from dataset_kit.torch import DataLoader as TorchLoader
        loader = TorchLoader(dataset, 4, num_workers=workers)
        return _Closing(iter(loader), loader.close)
    return make


def _sharded(**options):
    return lambda dataset: ShardedIterator(dataset, 4, shuffle=False, **options)


def _nnabla(**options):
    def make(dataset):
        return data_iterator_simple(dataset.get_example, len(dataset), 4, **options)
    return make


class _Closing:
    """An iterator with ``finalize()``, whatever its door calls it."""

    def __init__(self, inner, close):
        self.inner, self.close = inner, close

    def __next__(self):
        return next(self.inner)

    def finalize(self):
        if self.close is not None:
            self.close()


DOORS = {
    "chainer-serial": _chainer("serial"), "chainer-thread": _chainer("thread"),
    "chainer-process": _chainer("process"),
    "gluon": _gluon(0), "gluon-threads": _gluon(2, threads=True), "gluon-processes": _gluon(2),
    "torch": _torch(0), "torch-processes": _torch(2),
    "sharded": _sharded(), "sharded-processes": _sharded(n_processes=2),
    "nnabla": _nnabla(), "nnabla-processes": _nnabla(n_processes=2),
}


def _finalize(it):
    for name in ("finalize", "close"):
        if callable(getattr(it, name, None)):
            getattr(it, name)()
            return


@pytest.mark.parametrize("error", READ_ERRORS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("door", list(DOORS))
def test_every_read_error_the_docs_name_keeps_its_class_through_the_door(door, error):
    it = DOORS[door](Raising(error))
    try:
        next(it)
        with pytest.raises(error, match="example 5 is damaged") as raised:
            next(it)
        if door.endswith("processes") or door.endswith("process"):
            if not door.startswith("torch"):  # PyTorch's own: the original, re-raised
                assert isinstance(raised.value, WorkerError)
                assert type(raised.value.__cause__) is error
        else:
            assert type(raised.value) is error
    finally:
        _finalize(it)


# --- ManifestChangedError, raised when a state is loaded ---------------------------------


def _checkpoint_and_changed(tmp_path, kind):
    """A state of an iterator over one shard set, and the same set with shard 2's bytes changed."""
    write(tmp_path / "set", n=60, shard_size=700)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    it = kind(ds, ShardOrderSampler(ds, block_shards=2, seed=1))
    try:
        next(it)
        state, serialized = it.state_dict(), DictionarySerializer()
        it.serialize(serialized)
    finally:
        it.finalize()
    ds.close()
    # Same samples, counts and sizes; one value in shard 2 differs.
    from dataset_kit.shards import ShardWriter
    from tests.shards.conftest import COLUMNS, sample
    with ShardWriter(tmp_path / "set", COLUMNS, shard_size=700, overwrite=True) as writer:
        for i in range(60):
            changed = sample(i)
            if i == ds.manifest.starts[2]:
                changed["name"] = changed["name"].upper()  # as long as before
            writer.write(changed)
    fresh = StreamingDataset(tmp_path / "set", local=tmp_path / "cache2")
    assert [s.bytes for s in fresh.manifest.shards] == [s.bytes for s in ds.manifest.shards]
    return state, serialized.target, fresh


ITERATORS = {
    "serial": lambda ds, sampler: SerialIterator(ds, 8, order_sampler=sampler),
    "thread": lambda ds, sampler: MultithreadIterator(ds, 8, order_sampler=sampler, n_threads=2),
    "process": lambda ds, sampler: MultiprocessIterator(ds, 8, order_sampler=sampler,
                                                        n_processes=2),
    "sharded": lambda ds, sampler: ShardedIterator(ds, 8, seed=0, order_sampler=sampler),
}


@pytest.mark.parametrize("how", ["load_state_dict", "serialize"])
@pytest.mark.parametrize("door", list(ITERATORS))
def test_a_changed_shard_is_a_manifest_changed_error_naming_it(tmp_path, door, how):
    kind = ITERATORS[door]
    state, serialized, fresh = _checkpoint_and_changed(tmp_path, kind)
    it = kind(fresh, ShardOrderSampler(fresh, block_shards=2, seed=1))
    try:
        with pytest.raises(ManifestChangedError, match=r"shard 2 \(shard\.00002\.dks\) sha256 "
                                                       r"[0-9a-f]{8}\.\.\. -> [0-9a-f]{8}"):
            if how == "load_state_dict":
                it.load_state_dict(state)
            else:
                it.serialize(NpzDeserializer(serialized))
    finally:
        it.finalize()


# --- The MXNet door, on a real damaged record file ---------------------------------------


def _damaged_rec(tmp_path):
    """An indexed .rec of three PNG images; the second record's length runs past the end."""
    from PIL import Image
    rec, idx = str(tmp_path / "data.rec"), str(tmp_path / "data.idx")
    with IndexedRecordWriter(idx, rec) as writer:
        for i in range(3):
            out = io.BytesIO()
            Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(out, format="PNG")
            writer.write_idx(i, pack(IRHeader(0, float(i), i, 0), out.getvalue()))
    offsets = [int(line.split()[1]) for line in open(idx)]
    with open(rec, "r+b") as f:
        f.seek(offsets[1] + 4)  # after the magic: the length word (29 bits)
        f.write((0x1FFFFFF0).to_bytes(4, "little"))
    return rec, idx


@pytest.mark.parametrize("threads", [0, 2])
def test_a_damaged_record_is_a_record_io_error_through_the_mxnet_door(tmp_path, threads):
    pytest.importorskip("PIL", reason="the record images are PNG files made by Pillow")
    from dataset_kit.io import ImageIter, ImageRecordIter
    rec, idx = _damaged_rec(tmp_path)
    with pytest.raises(RecordIOError, match=os.path.basename(rec)):
        it = ImageIter(3, (3, 8, 8), path_imgrec=rec, path_imgidx=idx)
        next(it)
    with pytest.raises(RecordIOError, match=os.path.basename(rec)):
        it = ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 8, 8),
                             batch_size=3, preprocess_threads=threads)
        try:
            next(it)
        finally:
            it.close() if hasattr(it, "close") else None


# --- SamplerMismatchError, raised when a state of another sampler is loaded --------------


def _mxnet(shuffle):
    from dataset_kit.io import NDArrayIter
    return NDArrayIter(np.arange(20.0), batch_size=4, shuffle=shuffle)


SHUFFLING = {
    "chainer": lambda shuffle: SerialIterator(list(range(20)), 4, shuffle=shuffle, seed=0),
    "gluon": lambda shuffle: DataLoader(list(range(20)), 4, shuffle=shuffle, seed=0),
    # (ShardedIterator checks its own 'shuffle' field first: a plain ValueError naming it.)
    "nnabla": lambda shuffle: data_iterator_simple(lambda i: (np.float32(i),), 20, 4,
                                                   shuffle=shuffle,
                                                   rng=np.random.RandomState(0)),
    "mxnet": _mxnet,
}


@pytest.mark.parametrize("door", list(SHUFFLING))
def test_a_state_of_another_sampler_is_a_sampler_mismatch_error_through_the_door(door):
    from dataset_kit.engine import SamplerMismatchError
    saved = SHUFFLING[door](True)
    try:
        next(iter(saved) if door == "gluon" else saved)
        state = saved.state_dict()
    finally:
        _finalize(saved)
    other = SHUFFLING[door](False)
    try:
        with pytest.raises(SamplerMismatchError, match="saved with order sampler 'shuffle'"):
            other.load_state_dict(state)
    finally:
        _finalize(other)
