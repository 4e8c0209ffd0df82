"""Safe archive extraction: every entry is checked before anything is written."""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile

from dataset_kit._files import atomic_dir

# Whether tarfile has extraction filters (3.10.12+, 3.11.4+, 3.12+). Where it
# does not, _check_tar_links is the only check and _extract_tar strips modes
# and owners itself; tests set this to False to run that path on any Python.
_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")


class UnsafeArchiveError(ValueError):
    """An archive entry would land (or link) outside the extraction directory."""


def _inside(root: str, path: str) -> bool:
    root = os.path.realpath(root)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _check_name(archive: str, name: str, root: str) -> str:
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"archive {archive} has an entry with an absolute path: {name!r}")
    if ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(
            f"archive {archive} has an entry that climbs out with '..': {name!r}")
    target = os.path.join(root, name)
    if not _inside(root, target):
        raise UnsafeArchiveError(f"archive {archive} has an entry outside the target: {name!r}")
    return target


def _check_link(archive: str, name: str, link: str, root: str, hard: bool) -> None:
    if os.path.isabs(link):
        raise UnsafeArchiveError(
            f"archive {archive}: link {name!r} points to absolute path {link!r}")
    base = root if hard else os.path.dirname(os.path.join(root, name))
    if not _inside(root, os.path.join(base, link)):
        raise UnsafeArchiveError(
            f"archive {archive}: link {name!r} points outside the target: {link!r}")


def _resolve(parts: list[str], links: dict[str, str], archive: str, depth: int = 0
             ) -> list[str] | None:
    """Resolve a path inside the target as the OS will once the links are extracted.

    ``parts`` are components relative to the target; ``links`` maps each
    symlink extracted so far (its resolved location) to its target. Symlinks
    are followed wherever they occur, ``..`` after a symlink climbs from where
    the link points (as the kernel does). Returns the resolved components, or
    None if the path leaves the target.
    """
    if depth > 40:  # the kernel's own limit (ELOOP)
        raise UnsafeArchiveError(f"archive {archive} has a symlink loop")
    resolved: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
            continue
        resolved.append(part)
        target = links.get("/".join(resolved))
        if target is not None:
            if target.startswith("/"):
                return None
            followed = _resolve(resolved[:-1] + target.split("/"), links, archive, depth + 1)
            if followed is None:
                return None
            resolved = followed
    return resolved


def _check_tar_links(path: str, members: list[tarfile.TarInfo]) -> None:
    """Replay the extraction's links: nothing may resolve outside the target.

    Checking each name against the disk is not enough: the links an archive
    creates change what later names mean (``a -> b/..``, ``b -> .``, then
    ``a/x`` writes beside the target). So the extraction is replayed on a
    table of the links it creates: every member's location, every hard link's
    target, and (once all links exist) every symlink's target must resolve
    inside the target. This is the whole defence where tarfile lacks the
    ``data`` filter (3.10.0-3.10.11, 3.11.0-3.11.3); with the filter it still
    catches what the filter lets through: a link that points inside when it is
    extracted and outside once a later link exists (``a -> b/..``, ``b -> .``).
    """
    links: dict[str, str] = {}
    for member in members:
        name = member.name.replace("\\", "/")
        where = _resolve(name.split("/"), links, path)  # final component followed too
        if where is None:
            raise UnsafeArchiveError(
                f"archive {path} has an entry that resolves outside the target through its "
                f"links: {member.name!r}")
        if member.issym():
            parent = _resolve(name.split("/")[:-1], links, path)
            assert parent is not None  # a prefix of ``where``, which resolved inside
            links["/".join([*parent, name.rsplit("/", 1)[-1]])] = member.linkname
        elif member.islnk() and _resolve(member.linkname.split("/"), links, path) is None:
            raise UnsafeArchiveError(f"archive {path}: hard link {member.name!r} points "
                                     f"outside the target: {member.linkname!r}")
    for location, target in links.items():
        if _resolve(location.split("/"), links, path) is None:
            raise UnsafeArchiveError(f"archive {path}: symlink {location!r} points outside the "
                                     f"target once all links exist: {target!r}")


def _check_tar(path: str, tar: tarfile.TarFile, root: str) -> None:
    members = tar.getmembers()
    for member in members:
        _check_name(path, member.name, root)
        if member.issym() or member.islnk():
            _check_link(path, member.name, member.linkname, root, member.islnk())
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchiveError(
                f"archive {path}: entry {member.name!r} is a device, fifo or other special file")
    _check_tar_links(path, members)


def _extract_tar(tar: tarfile.TarFile, staging: str) -> None:
    if _HAS_DATA_FILTER:
        tar.extractall(staging, filter="data")
        return
    # What the data filter does besides checking paths: no setuid, setgid,
    # sticky or group/other-write bits, and no owner taken from the archive.
    for member in tar.getmembers():
        member.mode &= ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH)
        member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
    if hasattr(tarfile, "fully_trusted_filter"):  # only when a test forces the fallback
        tar.extractall(staging, filter="fully_trusted")
    else:
        tar.extractall(staging)


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
        IsADirectoryError: if ``path`` is a directory.
        FileExistsError: if ``dest`` exists already.
        UnsafeArchiveError: if an entry would land or link outside ``dest``.
        ValueError: if ``path`` is neither a zip nor a tar archive.
    """
    path, dest = os.fspath(path), os.path.abspath(os.fspath(dest))
    if os.path.isdir(path):
        raise IsADirectoryError(f"archive {path} is a directory, not an archive file")
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
                _extract_tar(archive, staging)
        else:
            raise ValueError(f"archive {path} is neither a zip nor a tar file")
    return dest
