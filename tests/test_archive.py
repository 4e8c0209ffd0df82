import io
import os
import stat
import tarfile
import zipfile

import pytest

from dataset_kit import UnsafeArchiveError, cached_extract, extract_archive


def make_tar(path, entries, mode="w:gz"):
    """entries: (name, kind, payload) with kind 'file', 'symlink' or 'hardlink'."""
    with tarfile.open(path, mode) as tar:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = payload
                tar.addfile(info)


def make_zip(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, kind, payload in entries:
            info = zipfile.ZipInfo(name)
            if kind == "symlink":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                archive.writestr(info, payload)
            else:
                archive.writestr(info, payload)


GOOD = [("a.txt", "file", b"alpha"), ("sub/b.txt", "file", b"beta")]


@pytest.mark.parametrize("suffix, mode", [(".tar", "w"), (".tar.gz", "w:gz"),
                                          (".tar.bz2", "w:bz2"), (".tar.xz", "w:xz")])
def test_tar_archives_extract_completely(tmp_path, suffix, mode):
    archive = tmp_path / ("data" + suffix)
    make_tar(archive, GOOD, mode)
    dest = extract_archive(archive, tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "b.txt").read_bytes() == b"beta"
    assert dest == str(tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == sorted([archive.name, "out"])


def test_zip_archives_extract_completely(tmp_path):
    make_zip(tmp_path / "d.zip", GOOD)
    extract_archive(tmp_path / "d.zip", tmp_path / "out")
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"alpha"


HOSTILE = {
    "dotdot": [("ok.txt", "file", b"ok"), ("../escape.txt", "file", b"x")],
    "absolute": [("ok.txt", "file", b"ok"), ("/tmp/dataset_kit_abs_escape.txt", "file", b"x")],
    "symlink_out": [("ok.txt", "file", b"ok"), ("link", "symlink", "../../outside")],
    "symlink_abs": [("link", "symlink", "/etc/passwd")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_hostile_archives_are_rejected_and_write_nothing(tmp_path, case, kind):
    archive = tmp_path / f"evil.{kind}"
    (make_tar if kind == "tar" else make_zip)(archive, HOSTILE[case])
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(UnsafeArchiveError) as info:
        extract_archive(archive, work / "out")
    assert str(archive) in str(info.value)
    assert os.listdir(work) == []
    assert not (tmp_path / "escape.txt").exists()
    assert not os.path.exists("/tmp/dataset_kit_abs_escape.txt")


def test_tar_hardlink_outside_is_rejected(tmp_path):
    make_tar(tmp_path / "h.tar", [("h", "hardlink", "../../etc/passwd")], "w")
    with pytest.raises(UnsafeArchiveError, match="link"):
        extract_archive(tmp_path / "h.tar", tmp_path / "out")


def test_symlink_inside_the_target_is_allowed(tmp_path):
    make_tar(tmp_path / "s.tar", [("a.txt", "file", b"a"), ("sub/l", "symlink", "../a.txt")], "w")
    extract_archive(tmp_path / "s.tar", tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "l").read_bytes() == b"a"


def test_existing_destination_and_non_archives_are_errors(tmp_path):
    make_zip(tmp_path / "d.zip", GOOD)
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError, match="out"):
        extract_archive(tmp_path / "d.zip", tmp_path / "out")
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(ValueError, match="neither a zip nor a tar"):
        extract_archive(tmp_path / "plain.txt", tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="missing"):
        extract_archive(tmp_path / "missing.zip", tmp_path / "y")


def test_cached_extract_downloads_and_extracts_once(tmp_path, dataset_root):
    make_zip(tmp_path / "d.zip", GOOD)
    first = cached_extract(str(tmp_path / "d.zip"))
    assert open(os.path.join(first, "sub", "b.txt"), "rb").read() == b"beta"
    (tmp_path / "d.zip").unlink()
    assert cached_extract(str(tmp_path / "d.zip")) == first
