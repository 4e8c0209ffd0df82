"""The refused resume: an error every layer may raise, storage included.

:mod:`dataset_kit.engine.errors` re-exports these names; they live here,
beneath every layer, so that a file format (a shard manifest that changed)
raises the same error class as the engine's ledger check.
"""

from __future__ import annotations

#: The causes a :class:`ResumeMismatchError` names, in the order they are checked.
RESUME_MISMATCH_CAUSES = ("dataset length", "files", "seed", "sampler", "mixture", "ranks",
                          "epoch", "order")

#: How a mixture's fingerprint begins (:meth:`dataset_kit.datasets.mixture.Mixture.fingerprint`):
#: the engine names a changed one cause "mixture", not "files".
MIXTURE_FINGERPRINT = "mixture:"


class ResumeMismatchError(ValueError):
    """A state does not fit the data or the iterator it is loaded into: the resume is refused.

    Raised by ``load_state_dict(state, strict=True)`` of every door (and by
    Chainer's ``serialize`` path) when the state's ledger, recomputed from the
    state and this iterator's data and sampler, differs from the one the state
    carries, or the state was saved for another dataset, sampler, mixture or
    number of ranks. The iterator is left unchanged. One ``except`` catches
    every refused resume (:class:`SamplerMismatchError` and
    :class:`~dataset_kit.shards.ManifestChangedError` are kinds of it).

    Attributes:
        cause: what differs, one of :data:`RESUME_MISMATCH_CAUSES`:
            ``"dataset length"``, ``"files"``, ``"seed"``, ``"sampler"``,
            ``"mixture"``, ``"ranks"``, ``"epoch"`` or ``"order"`` (the ids the
            state says were consumed are not the ones this iterator's orders give).
    """

    def __init__(self, *args: object, cause: str = "order") -> None:
        if cause not in RESUME_MISMATCH_CAUSES:
            raise ValueError(f"cause must be one of {list(RESUME_MISMATCH_CAUSES)}, got "
                             f"{cause!r}")
        super().__init__(*args)
        self.cause = cause

    def __reduce__(self) -> tuple:
        # Keeps the cause through pickling (a worker or another rank may raise it).
        return _rebuild_mismatch, (type(self), self.args, self.cause)


def _rebuild_mismatch(cls: type, args: tuple, cause: str) -> ResumeMismatchError:
    return cls(*args, cause=cause)


class ResumeMismatchWarning(UserWarning):
    """A resume that is not checked or not exact, loaded anyway.

    Warned by ``load_state_dict(state, strict=False)`` instead of a
    :class:`ResumeMismatchError` (the message says what changed), and once
    per load of a state saved before states carried a ledger.
    """
