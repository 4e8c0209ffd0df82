"""One HTTP(S) transfer into an open file: retries, backoff, Range resumption.

Kept apart from the cache logic in :mod:`dataset_kit.download`, which decides
where bytes go and who may write them; this module only moves bytes.
"""

from __future__ import annotations

import email.utils
import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import BinaryIO

CHUNK = 1 << 20
BACKOFF_SECONDS = 0.25
MAX_BACKOFF_SECONDS = 10.0
USER_AGENT = "dataset_kit"


class DownloadError(OSError):
    """A download failed for good (a 4xx answer, or every retry used up)."""


class _NoDowngradeRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, except from https to anything that is not https."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        if req.full_url.lower().startswith("https:") and not newurl.lower().startswith("https:"):
            raise DownloadError(
                f"refusing redirect from {req.full_url} to {newurl}: it leaves https"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_opener = urllib.request.build_opener(_NoDowngradeRedirects)


def _retryable(error: BaseException) -> bool:
    if isinstance(error, urllib.error.HTTPError):
        return error.code >= 500 or error.code == 429
    return isinstance(error, (urllib.error.URLError, http.client.HTTPException,
                              ConnectionError, TimeoutError))


def _retry_after(error: BaseException) -> float | None:
    if not isinstance(error, urllib.error.HTTPError) or error.headers is None:
        return None
    value = error.headers.get("Retry-After")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def fetch(
    url: str,
    out: BinaryIO,
    *,
    timeout: float,
    retries: int,
    on_start: Callable[[int | None], None],
    on_bytes: Callable[[int], None],
    on_restart: Callable[[], None],
) -> None:
    """Write the body of ``url`` into ``out`` (opened for writing, empty).

    A body cut short is resumed with ``Range`` (guarded by ``If-Range`` so a
    changed file is fetched whole); a server answering 200 to a ranged request
    makes the transfer start over, after ``on_restart`` has been called.

    Args:
        url: an http or https URL.
        out: the binary file to write into.
        timeout: socket timeout in seconds, per connection attempt.
        retries: extra attempts after the first, for retryable failures.
        on_start: called with the total size (or None) when a full body starts.
        on_bytes: called with the size of each chunk written.
        on_restart: called when the body starts over from byte 0.

    Raises:
        DownloadError: for a 4xx answer (but 429), or when retries run out.
    """
    received, validator, attempt = 0, None, 0
    while True:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        if received:
            request.add_header("Range", f"bytes={received}-")
            if validator:
                request.add_header("If-Range", validator)
        try:
            with _opener.open(request, timeout=timeout) as response:
                if received and response.status == 206 and _range_start(response) == received:
                    pass
                else:
                    if received:
                        out.seek(0)
                        out.truncate()
                        received = 0
                        on_restart()
                    length = response.headers.get("Content-Length")
                    on_start(int(length) if length and length.isdigit() else None)
                    validator = response.headers.get("ETag") or response.headers.get(
                        "Last-Modified")
                received = _copy_body(response, out, received, on_bytes)
                return
        except DownloadError:
            raise
        except BaseException as error:  # noqa: BLE001 - classified below
            if isinstance(error, (KeyboardInterrupt, SystemExit)) or not _retryable(error):
                if isinstance(error, urllib.error.HTTPError):
                    raise DownloadError(
                        f"downloading {url} failed: HTTP {error.code} {error.reason}"
                    ) from None
                raise
            received = out.tell()
            if attempt >= retries:
                raise DownloadError(
                    f"downloading {url} failed after {attempt + 1} attempts: {error}"
                ) from error
            delay = _retry_after(error)
            if delay is None:
                delay = BACKOFF_SECONDS * 2**attempt
            time.sleep(min(delay, MAX_BACKOFF_SECONDS))
            attempt += 1


def _range_start(response: http.client.HTTPResponse) -> int | None:
    content_range = response.headers.get("Content-Range", "")
    # "bytes START-END/TOTAL"
    try:
        return int(content_range.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _copy_body(response: http.client.HTTPResponse, out: BinaryIO, received: int,
               on_bytes: Callable[[int], None]) -> int:
    expected = response.headers.get("Content-Length")
    start = received
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    while True:
        n = response.readinto(view)
        if not n:
            break
        out.write(view[:n])
        received += n
        on_bytes(n)
    if expected and expected.isdigit() and received - start != int(expected):
        raise http.client.IncompleteRead(b"", int(expected) - (received - start))
    return received
