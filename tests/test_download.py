import contextlib
import errno
import hashlib
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import time

import numpy as np
import pytest

from dataset_kit import (
    DownloadError,
    HashMismatchError,
    OfflineError,
    _files,
    _http,
    cache_or_load_file,
    cached_download,
    cached_download_path,
    download_file,
    get_dataset_directory,
    get_dataset_root,
    set_dataset_root,
)
from tests.http_server import Route
from tests.processes import run_together

BODY = os.urandom(300_000)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(_http, "BACKOFF_SECONDS", 0.01)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def leftovers(root):
    downloads = root / "downloads"
    return sorted(p.name for p in downloads.iterdir()) if downloads.exists() else []


# -- root ---------------------------------------------------------------------

def test_root_follows_setter_then_env_then_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("DATASET_KIT_DATASET_ROOT", raising=False)
    monkeypatch.delenv("CHAINER_DATASET_ROOT", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    set_dataset_root(None)
    assert get_dataset_root() == str(tmp_path / "xdg" / "dataset_kit")
    monkeypatch.setenv("DATASET_KIT_DATASET_ROOT", str(tmp_path / "env"))
    assert get_dataset_root() == str(tmp_path / "env")
    set_dataset_root(tmp_path / "set")
    try:
        assert get_dataset_root() == str(tmp_path / "set")
    finally:
        set_dataset_root(None)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("DATASET_KIT_DATASET_ROOT")
    assert get_dataset_root() == os.path.expanduser("~/.cache/dataset_kit")


def test_chainers_root_variable_is_read_after_ours(tmp_path, monkeypatch):
    monkeypatch.delenv("DATASET_KIT_DATASET_ROOT", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CHAINER_DATASET_ROOT", str(tmp_path / "chainer"))
    set_dataset_root(None)
    assert get_dataset_root() == str(tmp_path / "chainer")
    monkeypatch.setenv("DATASET_KIT_DATASET_ROOT", str(tmp_path / "ours"))
    assert get_dataset_root() == str(tmp_path / "ours")
    set_dataset_root(tmp_path / "set")
    try:
        assert get_dataset_root() == str(tmp_path / "set")
    finally:
        set_dataset_root(None)


def test_a_chainer_cache_is_found_through_chainers_variable(tmp_path, monkeypatch):
    # Chainer's get_mnist keeps <root>/pfnet/chainer/mnist/train.npz (x, y); ours
    # uses the same path and keys, so the file is loaded, not made again.
    from dataset_kit.datasets import get_mnist

    chainer_root = tmp_path / "chainer-root"
    directory = chainer_root / "pfnet" / "chainer" / "mnist"
    directory.mkdir(parents=True)
    x = np.arange(3 * 784, dtype=np.uint8).reshape(3, 784)
    y = np.array([7, 1, 4], dtype=np.uint8)
    for split in ("train", "test"):
        np.savez_compressed(directory / f"{split}.npz", x=x, y=y)
    monkeypatch.delenv("DATASET_KIT_DATASET_ROOT", raising=False)
    monkeypatch.setenv("CHAINER_DATASET_ROOT", str(chainer_root))
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")  # nothing may be fetched
    set_dataset_root(None)
    train, test = get_mnist(scale=255.0)
    assert len(train) == len(test) == 3
    np.testing.assert_array_equal(train[1][0], x[1].astype(np.float32))
    assert train[2][1] == 4


def _as_chainer_left_it(root, url, body):
    """Put ``body`` where Chainer's cached_download keeps ``url``: <root>/_dl_cache/<md5>."""
    path = root / "_dl_cache" / hashlib.md5(url.encode("utf-8")).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def test_a_download_chainer_cached_is_copied_in_not_requested(http_server, dataset_root,
                                                              monkeypatch):
    route = Route(BODY)
    url = http_server.add("/chainer.bin", route)
    chainers = _as_chainer_left_it(dataset_root, url, BODY)
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")  # no request needed, none made
    path = cached_download(url, sha256=route.sha256)
    assert path == cached_download_path(url) and read(path) == BODY
    assert route.gets == 0 and read(chainers) == BODY  # Chainer's copy stays for Chainer


def test_a_chainer_download_with_another_hash_is_not_used(http_server, dataset_root):
    route = Route(BODY)
    url = http_server.add("/stale.bin", route)
    _as_chainer_left_it(dataset_root, url, b"an older release")
    assert read(cached_download(url, sha256=route.sha256)) == BODY
    assert route.gets == 1
    other = http_server.add("/unpinned.bin", Route(b"new"))
    _as_chainer_left_it(dataset_root, other, b"as chainer had it")
    assert read(cached_download(other)) == b"as chainer had it"  # nothing to check it against


def test_set_dataset_root_validates(tmp_path):
    with pytest.raises(TypeError, match="path must be"):
        set_dataset_root(3)
    with pytest.raises(ValueError, match="empty"):
        set_dataset_root("")


def test_get_dataset_directory_creates_unless_asked(dataset_root):
    path = get_dataset_directory("pfnet/mnist", create_directory=False)
    assert path == str(dataset_root / "pfnet" / "mnist") and not os.path.exists(path)
    assert os.path.isdir(get_dataset_directory("pfnet/mnist"))
    for bad in ("", "/abs", "../up"):
        with pytest.raises(ValueError, match="dataset_name"):
            get_dataset_directory(bad)


# -- downloads ------------------------------------------------------------------

def test_download_caches_under_a_stable_name_and_downloads_once(http_server, dataset_root):
    route = Route(BODY)
    url = http_server.add("/data/train.bin", route)
    path = cached_download(url, sha256=route.sha256, progress=False)
    assert read(path) == BODY
    assert path.startswith(str(dataset_root / "downloads"))
    assert path.endswith("-train.bin")
    assert cached_download(url) == path
    assert route.gets == 1
    assert leftovers(dataset_root) == [os.path.basename(path),
                                       os.path.basename(path) + ".sha256-stamp"]


def test_file_mode_follows_the_umask(http_server, dataset_root):
    url = http_server.add("/m", Route(b"x"))
    old = os.umask(0o022)
    try:
        path = cached_download(url)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_hash_mismatch_leaves_nothing_cached(http_server, dataset_root):
    url = http_server.add("/bad", Route(BODY))
    wrong = "0" * 64
    with pytest.raises(HashMismatchError) as info:
        cached_download(url, sha256=wrong)
    message = str(info.value)
    assert url in message and wrong in message and hashlib.sha256(BODY).hexdigest() in message
    assert isinstance(info.value, ValueError)
    assert leftovers(dataset_root) == []


def test_verify_rehashes_a_cached_file_and_replaces_a_corrupt_one(http_server, dataset_root):
    route = Route(BODY)
    url = http_server.add("/v", route)
    path = cached_download(url)
    with open(path, "wb") as f:
        f.write(b"corrupt")
    assert read(cached_download(url)) == b"corrupt"  # trusted without verify
    assert read(cached_download(url, sha256=route.sha256, verify=True)) == BODY
    assert route.gets == 2


def test_server_errors_are_retried_with_backoff(http_server, dataset_root):
    route = Route(BODY, fail=[500, 503, 429])
    url = http_server.add("/flaky", route)
    assert read(cached_download(url)) == BODY
    assert route.gets == 4


def test_client_errors_are_not_retried(http_server, dataset_root):
    route = Route(BODY, fail=[403])
    url = http_server.add("/forbidden", route)
    with pytest.raises(DownloadError, match="403"):
        cached_download(url)
    assert route.gets == 1
    with pytest.raises(DownloadError, match="404"):
        cached_download(http_server.url("/missing"))
    assert leftovers(dataset_root) == []


def test_retries_run_out_with_a_clear_error(http_server, dataset_root):
    route = Route(BODY, fail=[500] * 10)
    url = http_server.add("/down", route)
    with pytest.raises(DownloadError, match="after 3 attempts"):
        cached_download(url, retries=2)
    assert route.gets == 3
    assert leftovers(dataset_root) == []


def test_cut_connection_resumes_with_range(http_server, dataset_root):
    route = Route(BODY, drop_after=100_000, drops=2)
    url = http_server.add("/cut", route)
    assert read(cached_download(url, sha256=route.sha256)) == BODY
    assert route.range_requests >= 1


def test_cut_connection_restarts_when_server_ignores_range(http_server, dataset_root):
    route = Route(BODY, ranges=False, drop_after=100_000, drops=1)
    url = http_server.add("/norange", route)
    assert read(cached_download(url, sha256=route.sha256)) == BODY
    assert route.gets == 2 and route.range_requests == 0


def test_slow_server_times_out_then_succeeds(http_server, dataset_root):
    route = Route(BODY, delay=0.5, slow_requests=1)
    url = http_server.add("/slow", route)
    assert read(cached_download(url, timeout=0.2)) == BODY
    assert route.gets >= 2


def test_file_urls_and_local_paths_are_copied_in(tmp_path, dataset_root):
    source = tmp_path / "source.npz"
    source.write_bytes(BODY)
    by_path = cached_download(str(source))
    by_url = cached_download(source.as_uri())
    assert by_path == by_url and read(by_path) == BODY
    assert by_path != str(source)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cached_download(str(tmp_path / "nope"))
    assert leftovers(dataset_root) == [os.path.basename(by_path)]


def test_offline_returns_cached_files_and_names_missing_ones(http_server, dataset_root,
                                                              monkeypatch):
    route = Route(BODY)
    url = http_server.add("/o", route)
    path = cached_download(url)
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")
    assert cached_download(url) == path
    missing = http_server.url("/never")
    with pytest.raises(OfflineError) as info:
        cached_download(missing)
    assert missing in str(info.value) and str(dataset_root / "downloads") in str(info.value)
    assert route.gets == 1


@pytest.mark.parametrize("kwargs, name", [
    ({"sha256": "xyz"}, "sha256"),
    ({"timeout": 0}, "timeout"),
    ({"retries": -1}, "retries"),
    ({"verify": True}, "verify"),
])
def test_bad_arguments_are_named(kwargs, name, dataset_root):
    with pytest.raises(ValueError, match=name):
        cached_download("http://127.0.0.1:9/x", **kwargs)


def test_unsupported_scheme_is_named(dataset_root):
    with pytest.raises(ValueError, match="ftp://x"):
        cached_download("ftp://x/y")


def test_progress_bar_reports_to_stderr(http_server, dataset_root, capsys):
    url = http_server.add("/p", Route(BODY))
    cached_download(url, progress=True)
    assert "B" in capsys.readouterr().err


def _download_in_child(url, root, barrier, results):
    set_dataset_root(root)
    barrier.wait()
    path = cached_download(url, progress=False)
    results.put((path, hashlib.sha256(read(path)).hexdigest()))


def test_eight_processes_make_one_request_and_get_the_same_bytes(http_server, dataset_root):
    route = Route(BODY, delay=0.02)
    url = http_server.add("/shared", route)
    answers = run_together(8, _download_in_child, url, str(dataset_root))
    assert route.gets == 1
    assert len(set(answers)) == 1
    assert answers[0][1] == route.sha256


def _slow_download(url, root):
    set_dataset_root(root)
    cached_download(url, progress=False)


def test_sigkill_mid_download_leaves_no_cached_file(http_server, dataset_root):
    route = Route(BODY, delay=0.2, slow_requests=1)
    url = http_server.add("/killme", route)
    proc = multiprocessing.get_context("spawn").Process(
        target=_slow_download, args=(url, str(dataset_root)))
    proc.start()
    deadline = time.monotonic() + 30
    while not any(n.endswith(".part") for n in leftovers(dataset_root)):
        assert time.monotonic() < deadline, "the child never started writing"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    assert not any(not n.endswith(".part") for n in leftovers(dataset_root))
    path = cached_download(url)
    assert read(path) == BODY
    assert leftovers(dataset_root) == [os.path.basename(path)]


# -- cache_or_load_file ---------------------------------------------------------

def test_cache_or_load_file_creates_once_then_loads(tmp_path, dataset_root):
    calls = []

    def creator(path):
        calls.append(path)
        np.savez(path, a=np.arange(3))
        return [0, 1, 2]

    target = tmp_path / "cache" / "arrays.npz"
    first = cache_or_load_file(target, creator, lambda p: np.load(p)["a"].tolist())
    second = cache_or_load_file(target, creator, lambda p: np.load(p)["a"].tolist())
    assert first == second == [0, 1, 2]
    assert len(calls) == 1 and os.path.basename(calls[0]) == "arrays.npz"
    assert sorted(os.listdir(target.parent)) == ["arrays.npz"]


def test_the_call_that_creates_returns_the_creators_value_as_chainer_does(tmp_path,
                                                                          dataset_root):
    # Chainer's cache_or_load_file returns "the returned values by the creator or the
    # loader": a creator's value can differ from what loading gives (a dict against an
    # NpzFile, a list against a tuple), and code written for Chainer sees the creator's.
    def creator(path):
        np.savez(path, a=np.arange(3))
        return "made"

    target = tmp_path / "cache" / "arrays.npz"
    assert cache_or_load_file(target, creator, lambda p: "loaded") == "made"
    assert cache_or_load_file(target, creator, lambda p: "loaded") == "loaded"


def test_cache_or_load_file_leaves_nothing_when_the_creator_raises(tmp_path, dataset_root):
    def creator(path):
        with open(path, "w") as f:
            f.write("half")
        raise RuntimeError("creator failed")

    directory = tmp_path / "cache"
    directory.mkdir()
    with pytest.raises(RuntimeError, match="creator failed"):
        cache_or_load_file(directory / "x.txt", creator, read)
    assert os.listdir(directory) == []


def test_cache_or_load_file_validates_callables(tmp_path):
    with pytest.raises(TypeError, match="creator and loader"):
        cache_or_load_file(tmp_path / "x", None, read)


def test_creator_that_writes_nothing_is_an_error(tmp_path, dataset_root):
    directory = tmp_path / "cache"
    with pytest.raises(FileNotFoundError, match="without writing"):
        cache_or_load_file(directory / "x", lambda p: None, read)
    assert os.listdir(directory) == []


def _race_creator(target, root, log, barrier, results):
    set_dataset_root(root)

    def creator(path):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)
        with open(path, "w") as f:
            f.write(str(os.getpid()))
        return str(os.getpid())

    barrier.wait()
    results.put(cache_or_load_file(target, creator, lambda p: open(p).read()))


def test_eight_processes_race_and_the_creator_runs_once(tmp_path, dataset_root):
    target, log = str(tmp_path / "shared.txt"), str(tmp_path / "log")
    answers = run_together(8, _race_creator, target, str(dataset_root), log)
    with open(log) as f:
        creators = f.read().split()
    assert len(creators) == 1
    assert set(answers) == {creators[0]}


def test_redirects_from_https_to_http_are_refused():
    import urllib.request

    handler = _http._NoDowngradeRedirects()
    request = urllib.request.Request("https://example.invalid/data.bin")
    with pytest.raises(DownloadError, match="leaves https"):
        handler.redirect_request(request, None, 302, "Found", {}, "http://example.invalid/d")
    same = handler.redirect_request(request, None, 302, "Found", {}, "https://mirror.invalid/d")
    assert same.full_url == "https://mirror.invalid/d"


# -- a pinned sha256 is checked on every use --------------------------------------

def age(path, seconds=3600):
    """Make a file look written long ago: its stamp then vouches without re-hashing."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns - seconds * 10**9, st.st_mtime_ns - seconds * 10**9))


def corrupt_in_place(path):
    """Flip the first byte without changing the size (nor, on a coarse clock, the times)."""
    with open(path, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))


def test_a_cached_file_corrupted_in_place_is_downloaded_again(http_server, dataset_root):
    route = Route(BODY)
    url = http_server.add("/pinned.bin", route)
    path = cached_download(url, sha256=route.sha256)
    corrupt_in_place(path)
    assert read(cached_download(url, sha256=route.sha256)) == BODY
    assert route.gets == 2
    age(path)
    assert read(cached_download(url, sha256=route.sha256)) == BODY  # re-stamped, old file
    corrupt_in_place(path)  # changes ctime, which no user call can set back
    assert read(cached_download(url, sha256=route.sha256)) == BODY
    assert route.gets == 3
    assert leftovers(dataset_root) == sorted([os.path.basename(path),
                                              os.path.basename(path) + ".sha256-stamp"])


def test_an_unchanged_verified_file_is_not_hashed_again(http_server, dataset_root, monkeypatch):
    route = Route(BODY)
    url = http_server.add("/stamp.bin", route)
    path = cached_download(url, sha256=route.sha256)
    age(path)
    cached_download(url, sha256=route.sha256)  # hashes once more, stamps the aged file
    hashed = []
    real = _files.sha256_of
    monkeypatch.setattr(_files, "sha256_of", lambda p: hashed.append(p) or real(p))
    for _ in range(3):
        assert cached_download(url, sha256=route.sha256) == path
    assert hashed == []
    assert read(cached_download(url, sha256=route.sha256, verify=True)) == BODY
    assert hashed == [path]  # verify=True re-hashes whatever the stamp says


def test_offline_a_cached_file_with_the_wrong_hash_is_an_error(http_server, dataset_root,
                                                               monkeypatch):
    route = Route(BODY)
    url = http_server.add("/off.bin", route)
    path = cached_download(url, sha256=route.sha256)
    corrupt_in_place(path)
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")
    with pytest.raises(OfflineError, match=f"{path}.*expected {route.sha256}"):
        cached_download(url, sha256=route.sha256)
    assert route.gets == 1


def test_a_directory_as_a_local_source_is_named(tmp_path, dataset_root):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        cached_download(str(tmp_path))


# -- a read-only dataset root ---------------------------------------------------------

@contextlib.contextmanager
def made_read_only(directory, monkeypatch):
    """Make ``directory`` (already filled) refuse writes for the block, as a shared root does.

    As root with mount rights: ``directory`` is a tmpfs remounted read-only, so
    every write is EROFS from the kernel. As another user: the directory and
    its subdirectories lose their write bits, so writes are EACCES. As root
    without mount rights (chmod does not stop root), ``os.mkdir``, ``os.open``
    for writing, ``os.unlink``, ``os.rename`` and ``os.replace`` under
    ``directory`` raise EROFS: that simulates the kernel's answer at the calls
    through which every change to a directory starts.
    """
    directory = str(directory)
    if os.path.ismount(directory) and _remount(directory, "ro"):
        try:
            yield "a tmpfs remounted read-only"
        finally:
            _remount(directory, "rw")
        return
    if os.geteuid() != 0:
        modes = {}
        for here, _, _ in os.walk(directory):
            modes[here] = stat.S_IMODE(os.stat(here).st_mode)
            os.chmod(here, 0o555)
        try:
            yield "directories without write permission"
        finally:
            for here, mode in modes.items():
                os.chmod(here, mode)
        return

    def inside(path):
        return os.path.abspath(os.fsdecode(path)).startswith(directory + os.sep)

    real_mkdir, real_open = os.mkdir, os.open

    def mkdir(path, *args, **kwargs):
        if inside(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_mkdir(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):
        if inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_open(path, flags, *args, **kwargs)

    def refusing(real):
        def call(path, *args, **kwargs):
            if inside(path) or any(inside(a) for a in args if isinstance(a, (str, bytes))):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
            return real(path, *args, **kwargs)
        return call

    with monkeypatch.context() as patch:
        patch.setattr(os, "mkdir", mkdir)
        patch.setattr(os, "open", open_)
        for name in ("unlink", "rename", "replace"):
            patch.setattr(os, name, refusing(getattr(os, name)))
        yield "os.mkdir, os.open, os.unlink, os.rename and os.replace raising EROFS"


def _remount(directory, mode):
    """Switch the file system mounted at ``directory`` to ``mode``; False if refused."""
    return subprocess.run(["mount", "-o", f"remount,{mode}", directory],
                          capture_output=True).returncode == 0


@pytest.fixture
def mountable_root(tmp_path, monkeypatch):
    """A dataset root on its own tmpfs when this user may mount one, else a plain directory."""
    root = tmp_path / "shared-root"
    root.mkdir()
    mounted = os.geteuid() == 0 and shutil.which("mount") is not None and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root)],
        capture_output=True).returncode == 0
    monkeypatch.setenv("DATASET_KIT_DATASET_ROOT", str(root))
    monkeypatch.delenv("DATASET_KIT_OFFLINE", raising=False)
    set_dataset_root(None)
    try:
        yield root
    finally:
        set_dataset_root(None)
        if mounted:
            subprocess.run(["umount", "-l", str(root)], capture_output=True)


def test_a_verified_file_on_a_read_only_root_is_served_without_a_stamp(
        http_server, mountable_root, monkeypatch):
    route = Route(BODY)
    url = http_server.add("/shared.bin", route)
    path = cached_download(url, sha256=route.sha256)  # an administrator fills the root
    # Copied in without its stamp (as rsync of the files alone would): it must be hashed.
    os.unlink(path + ".sha256-stamp")
    with made_read_only(mountable_root, monkeypatch):
        for _ in range(2):  # no stamp is left behind, so every call verifies again
            assert cached_download(url, sha256=route.sha256) == path
        assert cached_download(url, sha256=route.sha256, verify=True) == path
        assert cached_download(url) == path
    assert read(path) == BODY and route.gets == 1
    assert leftovers(mountable_root) == [os.path.basename(path)]


def test_a_corrupt_file_on_a_read_only_root_is_named_not_replaced(
        http_server, mountable_root, monkeypatch):
    route = Route(BODY)
    url = http_server.add("/corrupt.bin", route)
    path = cached_download(url, sha256=route.sha256)
    os.unlink(path + ".sha256-stamp")
    corrupt_in_place(path)
    with made_read_only(mountable_root, monkeypatch), \
            pytest.raises(HashMismatchError, match=f"{path}.*cannot be replaced"):
        cached_download(url, sha256=route.sha256)
    assert route.gets == 1


# -- the cache path of a URL, and downloads to a path of one's own ----------------------

def test_cached_download_path_is_where_cached_download_puts_the_file(
        http_server, dataset_root, tmp_path):
    url = http_server.add("/dir/some-file.tar.gz", Route(b"x"))
    expected = cached_download_path(url)
    assert os.path.dirname(expected) == str(dataset_root / "downloads")
    assert not os.path.exists(expected) and cached_download(url) == expected
    local = tmp_path / "local.bin"
    local.write_bytes(b"local")
    assert cached_download_path(str(local)) == cached_download_path(local.as_uri()) \
        == cached_download(str(local))
    set_dataset_root(tmp_path / "other")
    try:
        assert cached_download_path(url) == str(
            tmp_path / "other" / "downloads" / os.path.basename(expected))
    finally:
        set_dataset_root(None)
    for bad in ("", None, "ftp://host/file"):
        with pytest.raises(ValueError, match="url"):
            cached_download_path(bad)


def test_download_file_writes_its_target_and_replaces_it_only_when_asked(
        http_server, dataset_root, tmp_path):
    route = Route(BODY)
    url = http_server.add("/model.bin", route)
    target = tmp_path / "a" / "b" / "model.bin"
    assert download_file(url, target, progress=False) == str(target)
    assert read(target) == BODY
    target.write_bytes(b"old")
    assert read(download_file(url, str(target))) == b"old" and route.gets == 1
    assert read(download_file(url, target, overwrite=True)) == BODY and route.gets == 2
    assert sorted(os.listdir(target.parent)) == ["model.bin"]
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        download_file(url, tmp_path)
    with pytest.raises(TypeError, match="path"):
        download_file(url, None)
    with pytest.raises(ValueError, match="overwrite"):
        download_file(url, target, overwrite="yes")
    with pytest.raises(ValueError, match="timeout"):
        download_file(url, target, timeout=0)
    assert not os.path.exists(dataset_root / "downloads")  # the cache is not involved
