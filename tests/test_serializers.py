import io
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.engine._orders import SamplerMismatchError
from dataset_kit.iterators import SerialIterator
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


# -- checkpoints that must not be believed (issue 19, points 4 and 10) -------------------

N = 10


def iterator(**kwargs):
    return SerialIterator(np.arange(N), 4, **{"seed": 3, **kwargs})


def take(it, k):
    return [[int(x) for x in next(it)] for _ in range(k)]


def saved(tmp_path, it, name="it.npz", compression=True):
    path = tmp_path / name
    save_npz(path, it, compression=compression)
    return path


def rewritten(tmp_path, path, change):
    """The npz at ``path`` with its arrays changed by ``change(dict)``, saved beside it."""
    with np.load(path) as npz:
        arrays = dict(npz)
    change(arrays)
    out = tmp_path / ("changed-" + path.name)
    np.savez(out, **arrays)
    return out


def test_a_chainer_snapshot_whose_order_has_one_element_is_refused_not_broadcast(tmp_path):
    source = iterator()
    take(source, 1)

    def chainer_style(arrays):
        del arrays["dataset_kit_state"]
        arrays["order"] = np.array([3])

    path = rewritten(tmp_path, saved(tmp_path, source), chainer_style)
    it, twin = iterator(), iterator()
    with pytest.raises(ValueError, match=r"changed-it.npz: key 'order' holds an array of shape "
                                         r"\(1,\).*expected an array of shape \(10,\)"):
        load_npz(path, it)
    assert take(it, 5) == take(twin, 5)


def test_a_no_shuffle_checkpoint_in_a_shuffled_iterator_says_why_it_cannot_load(tmp_path):
    path = saved(tmp_path, iterator(shuffle=False, seed=None))
    it = iterator()
    message = (r"order sampler 'none', but this iterator uses 'shuffle'"
               r".*no 'order' \(nor '_order'\)")
    with pytest.raises(SamplerMismatchError, match=message):
        load_npz(path, it)


@pytest.mark.parametrize("key, value, message", [
    ("dataset_kit_state", np.asarray('{"format": "dataset_kit.iter'),
     r"'dataset_kit_state' is not valid JSON \(JSONDecodeError"),
    ("dataset_kit_state", np.asarray("[" * 100000),
     r"'dataset_kit_state' is not valid JSON \(RecursionError"),
    ("dataset_kit_state", np.arange(3), r"key 'dataset_kit_state' holds an array of shape "
                                        r"\(3,\) and dtype int64; expected one str"),
    ("epoch", np.array([1, 2]), r"key 'epoch' holds an array of shape \(2,\).*expected one int"),
    ("is_new_epoch", np.array(2.5), r"key 'is_new_epoch' .*dtype float64; expected one bool"),
    ("order", np.zeros((2, 5), np.int64), r"key 'order' holds an array of shape \(2, 5\)"),
])
def test_a_damaged_value_names_its_key_and_changes_nothing(tmp_path, key, value, message):
    source = iterator()
    take(source, 2)
    path = rewritten(tmp_path, saved(tmp_path, source), lambda a: a.update({key: value}))
    it, twin = iterator(), iterator()
    with pytest.raises(ValueError, match=message):
        load_npz(path, it)
    assert take(it, 5) == take(twin, 5)


def test_a_chainer_snapshot_of_zeros_is_refused_by_a_shuffled_iterator(tmp_path):
    source = iterator()

    def zeros(arrays):
        del arrays["dataset_kit_state"]
        arrays["order"] = np.zeros(N, np.int64)

    path = rewritten(tmp_path, saved(tmp_path, source), zeros)
    with pytest.raises(ValueError, match=r"Chainer keys .* is not a permutation of range\(10\)"):
        load_npz(path, iterator())


@settings(max_examples=150, deadline=None)
@given(compression=st.booleans(), steps=st.integers(0, 6), data=st.data())
def test_a_truncated_or_bit_flipped_checkpoint_is_refused_or_loads_right(
        tmp_path_factory, compression, steps, data):
    tmp_path = tmp_path_factory.mktemp("npz")
    source = iterator()
    take(source, steps)
    path = saved(tmp_path, source, compression=compression)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1), label="length")]
    else:
        for bit in data.draw(st.lists(st.integers(0, 8 * len(raw) - 1), min_size=1,
                                      max_size=3), label="bits"):
            raw[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(raw))
    it, twin = iterator(), iterator()
    tracemalloc.start()
    try:
        load_npz(path, it)
    except (ValueError, KeyError) as error:
        assert str(error)
        assert take(it, 4) == take(twin, 4)
    else:
        assert take(it, 4) == take(source, 4)  # the right state, or nothing
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 16 << 20, f"loading a {len(raw)}-byte file allocated {peak} bytes"


def test_an_npz_with_python_objects_or_foreign_members_is_refused(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="objects.npz: member 'x.npy' holds Python objects"):
        load_npz(path, Counter())
    with zipfile.ZipFile(tmp_path / "foreign.npz", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ValueError, match="member 'notes.txt' is not an array"):
        load_npz(tmp_path / "foreign.npz", Counter())


# -- debris of killed writers --------------------------------------------------------------

WRITER = """
import sys
import numpy as np
from dataset_kit.serializers import save_npz

class Big:
    def serialize(self, serializer):
        serializer("weights", np.random.default_rng().integers(0, 255, 48 << 20, np.uint8))

while True:
    save_npz(sys.argv[1], Big(), compression=False)
"""


def parts(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".part"))


def kill_mid_save(path):
    """Start a process that saves ``path`` over and over; SIGKILL it mid-write."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            staged = [f for d in path.parent.glob(f".{path.name}.{writer.pid}-*.part")
                      for f in d.iterdir() if f.stat().st_size > 0]
            if staged:
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the writer never started writing")
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL


def test_the_next_save_removes_what_killed_saves_left_and_keeps_a_live_writers(tmp_path):
    path = tmp_path / "it.npz"
    for _ in range(3):
        kill_mid_save(path)
    assert len(parts(tmp_path)) == 3
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".it.npz.{sleeper.pid}-0badf00d.part"
        live.mkdir()
        it = iterator()
        take(it, 2)
        save_npz(path, it)
        assert parts(tmp_path) == [live.name]  # its writer may still publish
        fresh = iterator()
        load_npz(path, fresh)
        assert take(fresh, 3) == take(it, 3)
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)


def test_a_successful_load_removes_what_killed_saves_left(tmp_path):
    path = saved(tmp_path, iterator())
    kill_mid_save(path)
    assert len(parts(tmp_path)) == 1
    load_npz(path, iterator())
    assert parts(tmp_path) == []


def test_a_header_claiming_a_huge_array_is_refused_without_allocating_it(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i8", "fortran_order": False, "shape": (2**40,)})
    member = header.getvalue() + bytes(8)  # the header starts with the magic
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("weights.npy", member)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"huge.npz: member 'weights.npy' has a header for "
                                             r"shape \(1099511627776,\).*holds 8 bytes"):
            load_npz(path, Counter())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
