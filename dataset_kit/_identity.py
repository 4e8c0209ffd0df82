"""A short hash of an identity: what a fingerprint stands for, written as canonical JSON.

A dataset's fingerprint made of stamps and a mixture's fingerprint (both
in a checkpoint's ledger), and a rank's order fingerprint (compared across
ranks) all hash a small structure of
JSON-ready values: the same structure must give the same hash in every
process and run, so it is written with sorted keys, and a value that is not
JSON (a source's fingerprint of another type) as its ``str``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: The hashes :func:`identity_digest` knows, each as recorded states have it
#: (a checkpoint's fingerprint must not change with the code).
_DIGESTS = {
    "sha256": lambda data: hashlib.sha256(data).digest()[:8],
    "blake2b": lambda data: hashlib.blake2b(data, digest_size=8).digest(),
}


def identity_digest(identity: Any, algorithm: str, *, strict: bool = False) -> bytes:
    """Eight bytes standing for ``identity``: a hash of its canonical JSON.

    Args:
        identity: JSON-ready values (dicts, lists, numbers, strings); any
            other value counts as its ``str``.
        algorithm: ``"sha256"`` (its first eight bytes) or ``"blake2b"`` (its
            eight-byte form): the one the fingerprint has always used.
        strict: refuse a value that is not JSON-ready instead of taking its ``str``.

    Raises:
        ValueError: if ``algorithm`` is neither, or ``identity`` contains itself.
        TypeError: (``strict``) if a value is not JSON-ready.
    """
    digest = _DIGESTS.get(algorithm)
    if digest is None:
        raise ValueError(f"algorithm must be one of {sorted(_DIGESTS)}, got {algorithm!r}")
    text = json.dumps(identity, sort_keys=True, default=None if strict else str)
    return digest(text.encode())
