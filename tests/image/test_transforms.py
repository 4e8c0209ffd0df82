"""Image transforms: shapes, values, and randomness from example_rng()."""

import numpy as np
import pytest

from dataset_kit.datasets import TransformDataset
from dataset_kit.image import transforms as T
from dataset_kit.iterators import MultiprocessIterator, SerialIterator

IMAGE = np.arange(30 * 40 * 3, dtype=np.uint8).reshape(30, 40, 3)


def test_deterministic_transforms():
    assert T.resize_short(15)(IMAGE).shape == (15, 20, 3)
    assert np.array_equal(T.center_crop((10, 6))(IMAGE), IMAGE[12:18, 15:25])
    assert T.center_crop(50)(IMAGE).shape == (50, 50, 3)  # a smaller image is upscaled first
    assert T.to_chw()(IMAGE).shape == (3, 30, 40)
    normalized = T.normalize([1, 2, 3], [2, 2, 2])(IMAGE)
    assert normalized.dtype == np.float32 and normalized[0, 0].tolist() == [-0.5, -0.5, -0.5]
    pipeline = T.compose(T.resize_short(20), T.center_crop(16), T.to_chw())
    assert pipeline(IMAGE).shape == (3, 16, 16)


@pytest.mark.parametrize("make, message", [
    (lambda: T.resize_short(0), "size must be positive"),
    (lambda: T.center_crop((0, 3)), "size must be positive"),
    (lambda: T.random_flip(1.5), "p must be in"),
    (lambda: T.normalize([1, 2], [1, 0]), "std no zero"),
    (lambda: T.random_resized_crop(8, scale=(0.5, 2.0)), "scale"),
    (lambda: T.compose(T.to_chw(), 3), "transform 1 is not callable"),
])
def test_bad_arguments_are_named(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


class Images:
    def __len__(self):
        return 12

    def __getitem__(self, i):
        return np.roll(IMAGE, i, axis=1)


def test_random_transforms_are_a_function_of_seed_epoch_and_index():
    augment = T.compose(T.random_resized_crop((12, 10)), T.random_crop(8), T.random_flip())
    dataset = TransformDataset(Images(), augment)
    serial = next(SerialIterator(dataset, 12, seed=3))
    with MultiprocessIterator(dataset, 5, seed=3, n_processes=2) as it:
        parallel = [x for _ in range(3) for x in next(it)][:12]
    assert all(np.array_equal(a, b) for a, b in zip(serial, parallel))
    assert all(x.shape == (8, 8, 3) for x in serial)
    other_seed = next(SerialIterator(dataset, 12, seed=4))
    assert not all(np.array_equal(a, b) for a, b in zip(serial, other_seed))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dataset_kit.image import _resize  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20), st.booleans(), st.integers(0, 2**32 - 1))
def test_normalize_gives_the_values_of_the_plain_formula_for_any_view(h, w, flip, seed):
    image = np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)
    image = image[:, ::-1] if flip else image
    mean, std = np.float32([123.7, 116.3, 103.5]), np.float32([58.4, 57.1, 57.4])
    out = T.normalize(mean, std)(image)
    assert out.shape == (h, w, 3) and out.dtype == np.float32
    assert np.array_equal(out, (image.astype(np.float32) - mean) / std)
    assert T.to_chw()(out).flags.c_contiguous  # the planes are laid out CHW already


def _whole_image_crop(antialias):
    # scale 1 and the image's own aspect: the crop is the whole image.
    return T.random_resized_crop((24, 18), scale=(1.0, 1.0), ratio=(40 / 30, 40 / 30),
                                 antialias=antialias)


def test_resized_crop_without_antialias_samples_like_opencv_linear():
    cv2 = pytest.importorskip("cv2")
    image = np.random.default_rng(0).integers(0, 256, (30, 40, 3), np.uint8)
    expected = cv2.resize(image, (24, 18), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(_whole_image_crop(False)(image), expected)
    assert not np.array_equal(_whole_image_crop(True)(image), expected)  # Pillow's filter


def test_resized_crop_without_antialias_and_without_opencv_is_within_a_grey_level(monkeypatch):
    cv2 = pytest.importorskip("cv2")
    image = np.random.default_rng(0).integers(0, 256, (30, 40, 3), np.uint8)
    expected = cv2.resize(image, (24, 18), interpolation=cv2.INTER_LINEAR).astype(int)
    monkeypatch.setattr(_resize, "opencv", lambda: None)
    got = _whole_image_crop(False)(image)
    assert got.shape == (18, 24, 3) and np.abs(got.astype(int) - expected).max() <= 1


def test_resized_crop_refuses_an_antialias_that_is_not_a_bool():
    with pytest.raises(TypeError, match="antialias"):
        T.random_resized_crop(8, antialias="no")
