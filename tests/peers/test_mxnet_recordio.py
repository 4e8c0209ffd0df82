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
