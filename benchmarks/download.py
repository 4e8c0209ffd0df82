"""Throughput of cached_download against a bare urllib copy of the same file.

A 200 MB file is served by ``python -m http.server`` on 127.0.0.1 (its own
process, so the server does not share the client's GIL). Each run downloads
into a fresh dataset root. Prints the throughputs and ratios against:

* a bare urllib copy (the issue's baseline; it never waits for the disk),
* the same copy followed by an fsync (equally durable),

and, to separate our overhead from the disk's, cached_download with fsync
patched out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from _timing import best_of

import dataset_kit

SIZE = 200 * 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("http.server did not start")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        served = os.path.join(tmp, "served")
        os.mkdir(served)
        with open(os.path.join(served, "blob.bin"), "wb") as f:
            f.write(os.urandom(SIZE))
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
             "--directory", served],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for(port)
            url = f"http://127.0.0.1:{port}/blob.bin"
            runs = iter(range(1000))

            def bare_urllib() -> None:
                target = os.path.join(tmp, "bare.bin")
                with urllib.request.urlopen(url) as response, open(target, "wb") as out:
                    shutil.copyfileobj(response, out, 1 << 20)
                os.unlink(target)

            def with_cache() -> None:
                root = os.path.join(tmp, f"root{next(runs)}")
                dataset_kit.set_dataset_root(root)
                path = dataset_kit.cached_download(url, progress=False)
                assert os.path.getsize(path) == SIZE
                shutil.rmtree(root)

            def urllib_fsync() -> None:
                target = os.path.join(tmp, "bare.bin")
                with urllib.request.urlopen(url) as response, open(target, "wb") as out:
                    shutil.copyfileobj(response, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                os.unlink(target)

            t = best_of(3, bare_urllib=bare_urllib, urllib_fsync=urllib_fsync,
                        cached_download=with_cache)
            real = os.fsync, os.fdatasync
            os.fsync = os.fdatasync = lambda fd: None
            try:
                t.update(best_of(3, no_sync=with_cache))
            finally:
                os.fsync, os.fdatasync = real
        finally:
            server.terminate()
            server.wait()
    mb = SIZE / 1e6
    for name, label in (("bare_urllib", "bare urllib copy"),
                        ("urllib_fsync", "urllib copy + fsync"),
                        ("cached_download", "cached_download"),
                        ("no_sync", "cached_download, fsync patched out")):
        print(f"{label + ':':37s} {mb / t[name]:6.0f} MB/s")
    print(f"ratio cached_download / bare urllib:          "
          f"{t['bare_urllib'] / t['cached_download']:.2f}  (target >= 0.8)")
    print(f"ratio cached_download / urllib + fsync:       "
          f"{t['urllib_fsync'] / t['cached_download']:.2f}")
    print(f"ratio cached_download (no fsync) / bare urllib: "
          f"{t['bare_urllib'] / t['no_sync']:.2f}")


if __name__ == "__main__":
    main()
