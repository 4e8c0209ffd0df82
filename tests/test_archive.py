import io
import os
import stat
import tarfile
import zipfile

import pytest

from dataset_kit import UnsafeArchiveError, _archive, cached_extract, extract_archive


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


# -- the fallback for Pythons without tarfile's data filter ---------------------

@pytest.fixture(params=["data_filter", "fallback"])
def tar_check(request, monkeypatch):
    """Run with tarfile's data filter, and with the fallback forced (as on 3.11.0-3.11.3)."""
    if request.param == "fallback":
        monkeypatch.setattr(_archive, "_HAS_DATA_FILTER", False)
    return request.param


def make_tar_with(path, entries):
    """entries: (name, type, payload) with a tarfile type constant; payload is data or a link."""
    with tarfile.open(path, "w") as tar:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.linkname = payload
                tar.addfile(info)


SYMLINK_CHAINS = {
    "dotdot_through_a_later_link": [("a", tarfile.SYMTYPE, "b/.."), ("b", tarfile.SYMTYPE, "."),
                                    ("a/escape.txt", tarfile.REGTYPE, b"x")],
    "link_made_outside_by_a_later_link": [("a", tarfile.SYMTYPE, "b/.."),
                                          ("b", tarfile.SYMTYPE, ".")],
    "link_to_a_link_outside": [("d", tarfile.DIRTYPE, ""), ("d/up", tarfile.SYMTYPE, ".."),
                               ("d/up2", tarfile.SYMTYPE, "up/.."),
                               ("d/up2/escape.txt", tarfile.REGTYPE, b"x")],
    "write_through_a_link_to_a_dir_link": [("s", tarfile.SYMTYPE, "."),
                                           ("t", tarfile.SYMTYPE, "s/s/s/.."),
                                           ("t/escape.txt", tarfile.REGTYPE, b"x")],
    "hardlink_through_a_symlink": [("up", tarfile.SYMTYPE, "b/.."), ("b", tarfile.SYMTYPE, "."),
                                   ("h", tarfile.LNKTYPE, "up/secret")],
    "absolute": [("/tmp/dataset_kit_abs_escape.txt", tarfile.REGTYPE, b"x")],
    "dotdot": [("../escape.txt", tarfile.REGTYPE, b"x")],
    "hardlink_outside": [("h", tarfile.LNKTYPE, "../secret")],
    "symlink_absolute": [("l", tarfile.SYMTYPE, "/etc")],
    "char_device": [("dev", tarfile.CHRTYPE, "")],
    "block_device": [("dev", tarfile.BLKTYPE, "")],
    "fifo": [("fifo", tarfile.FIFOTYPE, "")],
}


@pytest.mark.parametrize("case", sorted(SYMLINK_CHAINS))
def test_tar_attacks_are_rejected_with_and_without_the_data_filter(tmp_path, tar_check, case):
    (tmp_path / "secret").write_bytes(b"secret")
    archive = tmp_path / "evil.tar"
    make_tar_with(archive, SYMLINK_CHAINS[case])
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(UnsafeArchiveError) as info:
        extract_archive(archive, work / "out")
    assert str(archive) in str(info.value)
    assert os.listdir(work) == []
    assert sorted(os.listdir(tmp_path)) == ["evil.tar", "secret", "work"]
    assert not os.path.exists("/tmp/dataset_kit_abs_escape.txt")


def test_the_fallback_resolves_links_as_the_kernel_does(tmp_path):
    """The replay agrees with the real filesystem, link by link, for chains that stay inside."""
    links = {"a": "b/..", "b": "c", "c/d": "../e"}
    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    (root / "e").mkdir()
    for name, target in links.items():
        os.symlink(target, root / name)
    for path in ["a/c/d/x", "b/d/x", "c/d/../c/d", "a/e/f"]:
        expected = os.path.relpath(os.path.realpath(root / path), root).split(os.sep)
        assert _archive._resolve(path.split("/"), links, "t") == expected, path
    assert _archive._resolve(["a", "..", "x"], links, "t") is None


def test_the_fallback_keeps_links_inside_and_drops_setuid_and_owner(tmp_path, monkeypatch):
    monkeypatch.setattr(_archive, "_HAS_DATA_FILTER", False)
    archive = tmp_path / "ok.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("tool")
        info.size, info.mode, info.uid, info.gid = 2, 0o6777, 4242, 4242
        tar.addfile(info, io.BytesIO(b"hi"))
        for name, target in (("sub/l", "../tool"), ("here", ".")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
    extract_archive(archive, tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "l").read_bytes() == b"hi"
    assert (tmp_path / "out" / "here" / "tool").read_bytes() == b"hi"
    st = os.stat(tmp_path / "out" / "tool")
    assert st.st_mode & 0o7022 == 0 and st.st_uid == os.getuid()


def test_a_directory_given_as_archive_is_named(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        extract_archive(tmp_path, tmp_path / "out")
