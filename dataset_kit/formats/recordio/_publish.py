"""Publishing a ``.rec`` and its ``.idx`` as one unit, and opening them as one unit.

Two renames cannot be made atomic together, so a writer of a pair:

1. stages both files completely (written and fsynced under private names);
2. takes :func:`dataset_kit._files.lock_for` of the ``.rec`` (every writer
   and reader of the pair takes that lock);
3. writes a small journal, ``.<name>.rec.publish``, atomically: its pid and
   the ``(staged, final)`` renames;
4. renames both files into place, then removes the journal.

Whoever next takes the lock and finds a journal completes the renames (the
staged files are complete, and a rename whose source is gone was already
done), so a crash at any point leaves the old pair or the new one. Readers
open both files under the lock, so they hold the inodes of one
generation; what they read after that cannot change under them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence

from dataset_kit import _files
from dataset_kit.formats.recordio._format import RecordIOError


def journal_path(rec_path: str) -> str:
    """Where a publish of the pair of ``rec_path`` records its intent."""
    directory, base = os.path.split(os.path.abspath(rec_path))
    return os.path.join(directory, f".{base}.publish")


def _rename_all(moves: Sequence[Sequence[str]]) -> None:
    for staged, final in moves:
        # Gone already: an earlier roll-forward (or the writer itself) did this rename.
        with contextlib.suppress(FileNotFoundError):
            os.replace(staged, final)
    for directory in {os.path.dirname(final) for _, final in moves}:
        _files.fsync_directory(directory)


def _discard_staging(moves: Sequence[Sequence[str]]) -> None:
    for staged, _ in moves:
        shutil.rmtree(os.path.dirname(staged), ignore_errors=True)


def settle(rec_path: str) -> None:
    """Finish a publish that a writer left half done. Call with the pair's lock held.

    Under the lock no publish is in progress, so a journal means its writer
    died (or failed) after staging both files completely: its renames are
    done now.

    Raises:
        RecordIOError: if the journal is unreadable, naming it.
    """
    journal = journal_path(rec_path)
    try:
        with open(journal, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return
    try:
        intent = json.loads(text)
        moves = [(str(a), str(b)) for a, b in intent["moves"]]
    except (ValueError, KeyError, TypeError) as error:
        raise RecordIOError(f"{journal}: unreadable publish journal of {rec_path} ({error}); "
                            f"remove it after checking the pair by hand") from None
    _rename_all(moves)
    _discard_staging(moves)
    os.unlink(journal)
    _files.fsync_directory(os.path.dirname(journal))


def remove_debris(paths: Sequence[str]) -> None:
    """Remove staging leftovers of dead writers of ``paths``.

    Best effort: readers may not own the folder.
    """
    for path in paths:
        with contextlib.suppress(OSError):
            _files.remove_stale_parts(path, under_lock=False)
        with contextlib.suppress(OSError):
            _files.remove_stale_parts(journal_path(path), under_lock=False)


def publish(rec_path: str, moves: Sequence[tuple[str, str]]) -> None:
    """Rename the staged files of ``moves`` into place, all or none, under the pair's lock.

    Args:
        rec_path: the record file (its lock and journal serve the pair).
        moves: ``(staged, final)`` paths; each staged file sits alone in its
            staging directory, which is removed afterwards.
    """
    pending = False  # a journal names the staged files: they must outlive a failure
    try:
        with _files.lock_for(rec_path):
            settle(rec_path)
            if len(moves) == 1:
                _rename_all(moves)
            else:
                journal = journal_path(rec_path)
                with _files.atomic_write(journal) as temp, open(temp, "w") as f:
                    json.dump({"pid": os.getpid(), "moves": moves}, f)
                pending = True
                _rename_all(moves)
                os.unlink(journal)
                pending = False
                _files.fsync_directory(os.path.dirname(journal))
            remove_debris([final for _, final in moves])
    finally:
        if not pending:
            _discard_staging(moves)


@contextlib.contextmanager
def locked_pair(rec_path: str) -> Iterator[None]:
    """Hold the pair's lock with any half-done publish finished and dead writers' debris gone."""
    with _files.lock_for(rec_path):
        settle(rec_path)
        yield
