"""The verifiers: a manifest's sha256, and the size and ETag a store listed at open."""

from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit.filecache import IntegrityError, Sha256, SizeAndStamp, listed_stamp


class _Changed(ValueError):
    pass


def _fed(verifier, data: bytes):
    digest = verifier.digest()
    for start in range(0, len(data), 7):  # the download feeds ranges, in order
        digest.update(data[start:start + 7])
    return digest


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_sha256_passes_exactly_the_bytes_the_manifest_names(data, other):
    verifier = Sha256(hashlib.sha256(data).hexdigest(), "shard")
    assert verifier.check(_fed(verifier, data), None, "p") is None
    found = verifier.check(_fed(verifier, other), None, "p")
    assert (found is None) == (other == data)
    if found is not None:
        assert found == hashlib.sha256(other).hexdigest()
        error = verifier.refuse("shard.0", "s3://b/shard.0", [found, found])
        assert isinstance(error, IntegrityError) and "shard shard.0 from s3://b/shard.0" in \
            str(error)


@given(st.binary(max_size=200))
def test_an_md5_etag_checks_the_bytes_without_asking_the_store(data):
    etag = '"' + hashlib.md5(data).hexdigest() + '"'
    verifier = SizeAndStamp("s3://b/f.parquet", len(data), "t", etag, _Changed)
    assert verifier.check(_fed(verifier, data), None, "b/f.parquet") is None  # fs unused


def test_other_bytes_under_an_md5_etag_still_listed_are_a_mismatch(tmp_path):
    pytest.importorskip("fsspec", reason="the file cache reads through fsspec")
    import fsspec

    path = tmp_path / "f.parquet"
    path.write_bytes(b"abcd")
    fs = fsspec.filesystem("file")
    size, mtime, _ = listed_stamp(fs.info(str(path)))
    # A store whose listing has no ETag: the one at open is compared with none now.
    verifier = SizeAndStamp(str(path), size, mtime, hashlib.md5(b"abcd").hexdigest(), _Changed)
    with pytest.raises(_Changed, match=rf"file {path} changed in its store .*ETag"):
        verifier.check(_fed(verifier, b"abcX"), fs, str(path))


def test_without_an_etag_the_listing_is_asked_again_and_a_change_is_refused(tmp_path):
    pytest.importorskip("fsspec", reason="the file cache reads through fsspec")
    import fsspec

    path = tmp_path / "f.parquet"
    path.write_bytes(b"abcd")
    fs = fsspec.filesystem("file")
    size, mtime, etag = listed_stamp(fs.info(str(path)))
    assert etag is None and size == 4
    verifier = SizeAndStamp(str(path), size, mtime, etag, _Changed)
    assert verifier.check(_fed(verifier, b"abcd"), fs, str(path)) is None
    path.write_bytes(b"abcde")
    os.utime(path, ns=(1, 1))
    with pytest.raises(_Changed, match=r"changed in its store since the dataset was opened "
                                       r"\(size 4 -> 5; modification time"):
        verifier.check(_fed(verifier, b"abcd"), fs, str(path))
