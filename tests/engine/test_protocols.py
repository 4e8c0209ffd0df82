"""The engine's protocols: capabilities are decided by isinstance, never by probing names."""

import numpy as np
import pytest

import dataset_kit
from dataset_kit import engine
from dataset_kit.engine import protocols
from dataset_kit.iterators import SerialIterator
from tests.iterators.helpers import Curriculum


class PlainRotation:
    """A callable sampler of the same kind as Curriculum, but without a state of its own."""

    state_kind = Curriculum.state_kind

    def __call__(self, current_order, current_position):
        return np.roll(np.asarray(current_order), 1)


class LoadOnly(PlainRotation):
    """Half the StatefulSampler protocol is not the protocol."""

    def load_state_dict(self, state):
        raise AssertionError("never called: the sampler is not a StatefulSampler")


@pytest.mark.parametrize("sampler", [PlainRotation(), LoadOnly()])
def test_a_sampler_state_for_a_sampler_that_is_not_stateful_is_refused(sampler):
    state = SerialIterator(list(range(6)), 2, order_sampler=Curriculum(3)).state_dict()
    it = SerialIterator(list(range(6)), 2, order_sampler=sampler)
    with pytest.raises(ValueError, match="no state_dict\\(\\)/load_state_dict\\(\\)"):
        it.load_state_dict(state)


def test_sampler_capabilities_are_runtime_checkable_protocols():
    curriculum = Curriculum()
    assert isinstance(curriculum, protocols.StatefulSampler)
    assert isinstance(curriculum, protocols.RandomAccessOrder)
    assert isinstance(PlainRotation(), protocols.OrderSamplerLike)
    assert not isinstance(PlainRotation(), protocols.StatefulSampler)
    assert not isinstance(LoadOnly(), protocols.StatefulSampler)


def test_the_dataset_protocols_are_the_dataset_modules_own():
    assert engine.MapDataset is dataset_kit.dataset.MapDataset is protocols.MapDataset
    assert not hasattr(engine, "SizedDataset")  # the old alias is gone
    assert engine.BatchDataset is dataset_kit.dataset.BatchDataset
    assert isinstance(dataset_kit.datasets.TupleDataset(np.arange(3)), engine.BatchDataset)
    assert isinstance(range(3), engine.MapDataset)
    assert not isinstance(range(3), engine.BatchDataset)
