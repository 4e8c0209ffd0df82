import numpy as np
import pytest

from dataset_kit.serializers import (
    DictionarySerializer,
    NpzDeserializer,
    load_npz,
    save_npz,
)


class Counter:
    def __init__(self):
        self.count = 0
        self.weights = np.zeros(3)
        self.name = ""

    def serialize(self, serializer):
        self.count = serializer("count", self.count)
        self.weights = serializer("weights", self.weights)
        self.name = serializer("name", self.name)


def test_round_trip_through_npz(tmp_path):
    a = Counter()
    a.count, a.weights, a.name = 7, np.array([1.0, 2.0, 3.0]), "hello"
    save_npz(tmp_path / "c.npz", a)
    b = Counter()
    load_npz(tmp_path / "c.npz", b)
    assert b.count == 7 and b.name == "hello"
    np.testing.assert_array_equal(b.weights, [1, 2, 3])
    assert [p.name for p in tmp_path.iterdir()] == ["c.npz"]


def test_dictionary_serializer_and_deserializer_use_a_prefix():
    s = DictionarySerializer(path="it/")
    s("x", 3)
    d = NpzDeserializer(s.target, path="it/")
    assert d("x", 0) == 3
    with pytest.raises(KeyError):
        d("missing", 0)


def test_objects_without_serialize_are_rejected(tmp_path):
    with pytest.raises(TypeError, match="serialize"):
        save_npz(tmp_path / "x.npz", object())
    with pytest.raises(TypeError, match="serialize"):
        load_npz(tmp_path / "x.npz", object())
