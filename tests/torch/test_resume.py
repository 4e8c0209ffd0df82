"""state_dict()/load_state_dict(): the exact batches after a resume, for any num_workers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.torch.helpers import Uniform, assert_same_batches, torch

from torch.utils.data import DistributedSampler, RandomSampler  # noqa: E402

from dataset_kit.torch import DataLoader  # noqa: E402


def _loader(num_workers: int = 0, seed: int = 5, **kwargs) -> DataLoader:
    kwargs.setdefault("batch_size", 4)
    if "sampler" not in kwargs and "batch_sampler" not in kwargs:
        kwargs.setdefault("shuffle", True)
        kwargs.setdefault("generator", torch.Generator().manual_seed(seed))
    return DataLoader(Uniform(18, (2, 3)), num_workers=num_workers, **kwargs)


def _through_json(state: dict) -> dict:
    return json.loads(json.dumps(state))


@pytest.mark.parametrize("saved_with,resumed_with", [(0, 2), (2, 0)])
def test_resume_mid_epoch_repeats_the_batches_augmentation_included(saved_with, resumed_with):
    reference = _loader()
    epochs = [list(reference) for _ in range(3)]
    saving = _loader(saved_with)
    resumed = _loader(resumed_with, seed=999)  # its generator is restored from the state
    try:
        list(saving)
        it = iter(saving)
        head = [next(it) for _ in range(2)]
        state = _through_json(saving.state_dict())
        resumed.load_state_dict(state)
        assert_same_batches(head + list(resumed), epochs[1])
        assert_same_batches(list(resumed), epochs[2])
    finally:
        saving.close()
        resumed.close()


@given(step=st.integers(0, 11), drop_last=st.booleans())
def test_resume_after_any_step_repeats_the_same_batches(step, drop_last):
    reference = _loader(drop_last=drop_last)
    flat = [b for _ in range(3) for b in list(reference)]
    per_epoch = len(reference)
    saving = _loader(drop_last=drop_last)
    done = []
    while len(done) < step:
        for batch in saving:
            done.append(batch)
            if len(done) == step:
                break
    state = _through_json(saving.state_dict())
    resumed = _loader(drop_last=drop_last, seed=1)
    resumed.load_state_dict(state)
    rest = []
    while len(done) + len(rest) < 3 * per_epoch:
        rest.extend(list(resumed))
    assert_same_batches(done + rest, flat)


def test_a_sampler_without_a_generator_resumes_its_current_epoch():
    torch.manual_seed(0)
    saving = _loader(sampler=RandomSampler(range(18)))
    it = iter(saving)
    head = [next(it)]
    state = saving.state_dict()
    rest = list(it)
    resumed = _loader(sampler=RandomSampler(range(18)))
    resumed.load_state_dict(state)
    assert_same_batches(list(resumed), rest)
    assert len(head) + len(rest) == len(saving)


def test_a_distributed_sampler_resumes_with_its_epoch():
    def make():
        return _loader(sampler=DistributedSampler(range(18), num_replicas=2, rank=0, seed=3))
    reference = make()
    reference.sampler.set_epoch(4)
    expected = list(reference)
    saving = make()
    saving.sampler.set_epoch(4)
    it = iter(saving)
    head = [next(it)]
    resumed = make()
    resumed.sampler.set_epoch(4)
    resumed.load_state_dict(saving.state_dict())
    assert_same_batches(head + list(resumed), expected)


def test_a_failed_load_leaves_the_loader_unchanged():
    loader, reference = _loader(), _loader()
    expected = list(reference) + list(reference)
    good = loader.state_dict()
    bad_generators = dict(good, door={"name": "torch", "torch": {"generators": ["not base64!"]}})
    other_length = DataLoader(Uniform(7, (2, 3)), batch_size=4, shuffle=True,
                              generator=torch.Generator().manual_seed(5)).state_dict()
    short = dict(good, door={"name": "torch", "torch": {"generators": ["AAAA"]}})
    no_engine = dict(good, engine=1)
    for state, match in [(bad_generators, "not base64"), (no_engine, r"state\['engine'\]"),
                         (short, "not a CPU generator state"),
                         (other_length, "length"), ([], "not a dataset_kit iterator state")]:
        with pytest.raises(ValueError, match=match):
            loader.load_state_dict(state)
    assert_same_batches(list(loader) + list(loader), expected)  # generators untouched too


def test_the_state_is_small_and_json_ready():
    state = _loader().state_dict()
    assert json.loads(json.dumps(state)) == state
    assert len(json.dumps(state)) < 20_000
