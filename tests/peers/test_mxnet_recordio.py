"""Record files move between MXNet 1.9.1 and dataset_kit, byte for byte, both ways."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from dataset_kit import recordio  # noqa: E402

MAGIC = b"\x0a\x23\xd7\xce"
records = st.lists(st.lists(st.sampled_from([MAGIC, b"a", b"bc", b"\0\0\0", b"wxyz"]),
                            max_size=10).map(b"".join), min_size=1, max_size=10)


@settings(max_examples=30)
@given(payloads=records)
def test_files_are_identical_and_readable_both_ways(tmp_path_factory, payloads):
    d = tmp_path_factory.mktemp("rec")
    theirs = mx.recordio.MXIndexedRecordIO(str(d / "m.idx"), str(d / "m.rec"), "w")
    for k, p in enumerate(payloads):
        theirs.write_idx(k, p)
    theirs.close()
    with recordio.IndexedRecordWriter(d / "o.idx", d / "o.rec") as ours:
        for k, p in enumerate(payloads):
            ours.write_idx(k, p)
    assert (d / "o.rec").read_bytes() == (d / "m.rec").read_bytes()
    assert (d / "o.idx").read_bytes() == (d / "m.idx").read_bytes()
    reader = mx.recordio.MXIndexedRecordIO(str(d / "o.idx"), str(d / "o.rec"), "r")
    assert [reader.read_idx(k) for k in range(len(payloads))] == payloads
    reader.close()
    ours = recordio.IndexedRecordReader(d / "m.idx", d / "m.rec")
    assert [ours.read_idx(k) for k in range(len(payloads))] == payloads


@pytest.mark.parametrize("label", [3.5, [1.0, 2.0, 3.0], np.arange(4, dtype=np.float32)])
def test_headers_equal_mxnets(label):
    header = (0, label, 12, 34)
    assert recordio.pack(header, b"xyz") == mx.recordio.pack(mx.recordio.IRHeader(*header), b"xyz")
    theirs = mx.recordio.unpack(recordio.pack(header, b"xyz"))
    ours = recordio.unpack(mx.recordio.pack(mx.recordio.IRHeader(*header), b"xyz"))
    assert theirs[0].flag == ours[0].flag and bytes(ours[1]) == theirs[1]
    assert np.array_equal(np.asarray(theirs[0].label), np.asarray(ours[0].label))


@pytest.mark.parametrize("quality", [1, 50, 95, 100])
def test_a_one_channel_jpeg_is_mxnets_bytes(quality):
    pytest.importorskip("cv2", reason="MXNet's pack_img encodes with OpenCV")
    gray = np.random.default_rng(quality).integers(0, 255, (23, 31, 1), dtype=np.uint8)
    header = (0, 2.0, 7, 0)
    assert recordio.pack_img(header, gray, quality=quality) == mx.recordio.pack_img(
        mx.recordio.IRHeader(*header), gray, quality=quality)


def test_our_record_classes_write_mxnets_bytes_and_read_as_mxnets_do(tmp_path):
    payloads = [b"a", recordio.pack((0, 1.0, 3, 0), b"xyz"), b"", MAGIC * 3 + b"tail"]
    makers = {"ours": recordio.MXIndexedRecordIO, "theirs": mx.recordio.MXIndexedRecordIO}
    tells = {}
    for name, make in makers.items():
        writer = make(str(tmp_path / f"{name}.idx"), str(tmp_path / f"{name}.rec"), "w")
        tells[name] = []
        for k, p in enumerate(payloads):
            tells[name].append(writer.tell())
            writer.write_idx(k, p)
        writer.close()
    assert tells["ours"] == tells["theirs"]
    for suffix in ("rec", "idx"):
        assert (tmp_path / f"ours.{suffix}").read_bytes() == \
            (tmp_path / f"theirs.{suffix}").read_bytes()
    readers = [make(str(tmp_path / "theirs.idx"), str(tmp_path / "theirs.rec"), "r")
               for make in makers.values()]
    for reader in readers:
        reader.seek(1)
    steps = [[r.read(), r.read(), r.read_idx(0), r.read(), r.keys, r.idx] for r in readers]
    assert steps[0] == steps[1]
    for reader in readers:
        reader.reset()
    assert [[r.read() for _ in range(5)] for r in readers] == [payloads + [None]] * 2


def test_im2rec_lists_equal_mxnets_and_mxnet_reads_our_records(tmp_path, monkeypatch):
    import argparse
    import sys
    import types

    from PIL import Image

    from dataset_kit.recordio import im2rec

    rng = np.random.default_rng(0)
    for folder, count in (("a", 5), ("b", 4), ("c", 3)):
        (tmp_path / "imgs" / folder).mkdir(parents=True)
        for k in range(count):
            Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(
                tmp_path / "imgs" / folder / f"{k}.jpg", quality=95)
    root = str(tmp_path / "imgs")
    # MXNet's tool imports cv2 only to pack; its list code does not use it.
    monkeypatch.setitem(sys.modules, "cv2", sys.modules.get("cv2") or types.ModuleType("cv2"))
    from mxnet.tools import im2rec as theirs

    for shuffle, train, test, chunks in ((True, 1.0, 0.0, 1), (True, 0.6, 0.2, 2),
                                         (True, 1.0, 0.2, 1), (False, 0.8, 0.5, 2)):
        args = argparse.Namespace(prefix=str(tmp_path / "m"), root=root, recursive=True,
                                  exts=[".jpg"], shuffle=shuffle, chunks=chunks,
                                  train_ratio=train, test_ratio=test)
        theirs.make_list(args)
        ours = im2rec.make_lists(str(tmp_path / "o"), root, True, [".jpg"], train, test,
                                 shuffle, chunks)
        for path in ours:
            mine = open(path).read()
            assert mine == open(path.replace("/o", "/m", 1)).read()
    (lst,) = im2rec.make_lists(str(tmp_path / "r"), root, True, [".jpg"])
    im2rec.pack_list(lst, root, progress=False)
    it = mx.io.ImageRecordIter(path_imgrec=str(tmp_path / "r.rec"), data_shape=(3, 32, 32),
                               batch_size=12, preprocess_threads=1)
    batch = next(iter(it))
    dataset = recordio.IndexedRecordReader(str(tmp_path / "r.idx"), str(tmp_path / "r.rec"))
    want = sorted(recordio.unpack(dataset.read_idx(k))[0].label for k in dataset.keys)
    assert sorted(batch.label[0].asnumpy().tolist()) == want
    assert batch.data[0].shape == (12, 3, 32, 32)
