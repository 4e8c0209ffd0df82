"""Safe archive extraction: every entry is checked before anything is written."""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile

from dataset_kit._files import atomic_dir


class UnsafeArchiveError(ValueError):
    """An archive entry would land (or link) outside the extraction directory."""


def _inside(root: str, path: str) -> bool:
    root = os.path.realpath(root)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _check_name(archive: str, name: str, root: str) -> str:
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"archive {archive} has an entry with an absolute path: {name!r}")
    if ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(f"archive {archive} has an entry that climbs out with '..': {name!r}")
    target = os.path.join(root, name)
    if not _inside(root, target):
        raise UnsafeArchiveError(f"archive {archive} has an entry outside the target: {name!r}")
    return target


def _check_link(archive: str, name: str, link: str, root: str, hard: bool) -> None:
    if os.path.isabs(link):
        raise UnsafeArchiveError(f"archive {archive}: link {name!r} points to absolute path {link!r}")
    base = root if hard else os.path.dirname(os.path.join(root, name))
    if not _inside(root, os.path.join(base, link)):
        raise UnsafeArchiveError(
            f"archive {archive}: link {name!r} points outside the target: {link!r}")


def _check_tar(path: str, tar: tarfile.TarFile, root: str) -> None:
    for member in tar.getmembers():
        _check_name(path, member.name, root)
        if member.issym() or member.islnk():
            _check_link(path, member.name, member.linkname, root, member.islnk())
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchiveError(
                f"archive {path}: entry {member.name!r} is a device, fifo or other special file")


def _check_zip(path: str, archive: zipfile.ZipFile, root: str) -> None:
    for info in archive.infolist():
        _check_name(path, info.filename, root)
        if stat.S_ISLNK(info.external_attr >> 16):
            link = archive.read(info).decode("utf-8", "replace")
            _check_link(path, info.filename, link, root, hard=False)


def extract_archive(path: str | os.PathLike, dest: str | os.PathLike) -> str:
    """Extract a zip or tar (plain, gz, bz2, xz) archive into a new directory.

    Every entry is checked first: absolute paths, ``..`` components, links
    that point outside ``dest`` and special files are rejected before anything
    is written. Extraction goes into a temporary directory beside ``dest``,
    which is then renamed to ``dest``, so ``dest`` appears complete or not at
    all.

    Args:
        path: the archive.
        dest: the directory to create; it must not exist yet.

    Returns:
        ``dest`` as a string.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        FileExistsError: if ``dest`` exists already.
        UnsafeArchiveError: if an entry would land or link outside ``dest``.
        ValueError: if ``path`` is neither a zip nor a tar archive.
    """
    path, dest = os.fspath(path), os.path.abspath(os.fspath(dest))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"archive {path} does not exist")
    if os.path.exists(dest):
        raise FileExistsError(f"extraction target {dest} exists already")
    with atomic_dir(dest) as staging:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                _check_zip(path, archive, staging)
                archive.extractall(staging)
        elif tarfile.is_tarfile(path):
            with tarfile.open(path) as archive:
                _check_tar(path, archive, staging)
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(staging, filter="data")
                else:  # pragma: no cover - Pythons before the filter backport
                    archive.extractall(staging)
        else:
            raise ValueError(f"archive {path} is neither a zip nor a tar file")
    return dest
