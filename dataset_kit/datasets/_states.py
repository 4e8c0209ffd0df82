"""What dataset states (a mixture's, a packing's) share: the envelope check, a checksum."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dataset_kit._resume_errors import ResumeMismatchError


def check_state(state: Any, kind: str, made_by: str, fields: Iterable[tuple[str, Any]],
                owner: str, why: str, cause: str) -> dict:
    """Return ``state`` if it is a dict of ``kind`` whose ``fields`` equal this dataset's.

    Args:
        state: what a caller passed as a state.
        kind: the ``"kind"`` the state must have.
        made_by: the method that makes such states, for the error.
        fields: ``(name, value now)`` pairs the state must match.
        owner: what the dataset is called in the error ("mixture").
        why: why a difference matters, for the error.
        cause: the :class:`~dataset_kit.ResumeMismatchError` cause of a field
            that differs (a ``"seed"`` field's is ``"seed"``).

    Raises:
        ValueError: if ``state`` is not a state of ``kind``.
        ResumeMismatchError: naming the first field that differs, both values
            and why: the state is of another dataset, a refused resume.
    """
    if not isinstance(state, dict) or state.get("kind") != kind:
        raise ValueError(f"state must be a {kind} state (from {made_by}), got {state!r:.200}")
    for name, now in fields:
        if state.get(name) != now:
            raise ResumeMismatchError(f"state's {name} is {state.get(name)!r}, this "
                                      f"{owner}'s {now!r}: {why}",
                                      cause="seed" if name == "seed" else cause)
    return state


def checksum(counts: Sequence[int]) -> str:
    """A short checksum of integers (sources' lengths, counts) that a state carries to check."""
    return f"{zlib.crc32(np.asarray(counts, dtype='<i8').tobytes()):08x}"
