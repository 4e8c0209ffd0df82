"""ResumeMismatchError: one except for every refused resume, naming its cause."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import dataset_kit
from dataset_kit.engine import Engine, ResumeMismatchError, SamplerMismatchError
from dataset_kit.shards import ManifestChangedError


def test_every_refused_resume_is_one_value_error_with_a_cause():
    assert dataset_kit.ResumeMismatchError is ResumeMismatchError
    assert issubclass(ResumeMismatchError, ValueError)
    assert issubclass(SamplerMismatchError, ResumeMismatchError)
    assert issubclass(ManifestChangedError, ResumeMismatchError)
    assert SamplerMismatchError("x").cause == "sampler"
    assert ManifestChangedError("x").cause == "files"
    error = pickle.loads(pickle.dumps(ResumeMismatchError("m", cause="ranks")))
    assert (error.cause, str(error)) == ("ranks", "m")


def test_an_unknown_cause_is_refused_naming_it():
    with pytest.raises(ValueError, match="'weather'"):
        ResumeMismatchError("m", cause="weather")


def test_a_state_of_another_dataset_length_names_the_length():
    state = Engine(np.arange(10), batch_size=3, seed=0).state_dict()
    with pytest.raises(ResumeMismatchError, match="dataset_length") as info:
        Engine(np.arange(11), batch_size=3, seed=0).load_state_dict(state)
    assert info.value.cause == "dataset length"
