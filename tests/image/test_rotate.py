"""imrotate and random_rotate: MXNet's rotation of CHW / NCHW float32 images."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import image
from dataset_kit.io import MXArray
from dataset_kit.iterators import SerialIterator


def _gradient():
    """MXNet's test picture: a 30 x 60 linear ramp, as CHW."""
    ramp = np.linspace(0, 0.5, 30)[:, None] + np.linspace(0, 0.5, 60)[None, :]
    return ramp[None].astype(np.float32)


def test_a_rotation_matches_scipys_bilinear_rotation_away_from_the_edges():
    ndimage = pytest.importorskip("scipy.ndimage", reason="scipy is in the test extra")
    src = _gradient()
    theirs = ndimage.rotate(src[0], 6, axes=(1, 0), reshape=False, order=1, mode="constant",
                            prefilter=False)
    ours = image.imrotate(src, 6)
    assert isinstance(ours, MXArray) and ours.dtype == np.float32 and ours.shape == src.shape
    np.testing.assert_allclose(ours[0, 10:20, 20:40], theirs[10:20, 20:40], atol=1e-5)
    batch = image.imrotate(np.stack([src] * 3), 6)  # a scalar angle for a whole batch
    for rotated in batch:
        np.testing.assert_allclose(rotated, ours, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), side=st.integers(2, 9), quarter=st.integers(-2, 2))
def test_quarter_turns_are_rot90_and_zero_is_identity(n, side, quarter):
    src = np.random.default_rng(side).random((n, 2, side, side)).astype(np.float32)
    np.testing.assert_allclose(image.imrotate(src, 0), src, atol=1e-6)
    expected = np.rot90(src, k=quarter, axes=(2, 3))
    np.testing.assert_allclose(image.imrotate(src, 90.0 * quarter), expected, atol=1e-5)


def test_zoom_in_shows_no_padding_and_zoom_out_shows_the_whole_image():
    src = np.ones((1, 20, 30), np.float32)
    zoomed = image.imrotate(src, 30, zoom_in=True)
    # No zero border shows; MXNet's zoom uses h and w (not h - 1, w - 1): corners touch it.
    assert zoomed[:, 1:-1, 1:-1].min() > 0.99 and zoomed.min() > 0.9
    plain, out = image.imrotate(src, 30), image.imrotate(src, 30, zoom_out=True)
    assert out.sum() < plain.sum()  # the image shrinks inside a wider zero border


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(src=np.zeros((1, 4, 4), np.float32), rotation_degrees=1, zoom_in=True,
          zoom_out=True), ValueError, "cannot be both True"),
    (dict(src=np.zeros((1, 4, 4)), rotation_degrees=1), TypeError, "float32"),
    (dict(src=np.zeros((4, 4), np.float32), rotation_degrees=1), ValueError, "3D and 4D"),
    (dict(src=np.zeros((1, 4, 4), np.float32), rotation_degrees=np.ones(2)), TypeError,
     "scalar"),
    (dict(src=np.zeros((3, 1, 4, 4), np.float32), rotation_degrees=np.ones(2)), ValueError,
     "3 images and 2 angles"),
])
def test_mxnets_refusals(kwargs, error, message):
    with pytest.raises(error, match=message):
        image.imrotate(**kwargs)


def test_random_rotate_draws_one_angle_per_image_from_the_example_generator():
    src = np.random.default_rng(0).random((4, 1, 9, 9)).astype(np.float32)
    out = image.random_rotate(src, (-30, 30))
    assert out.shape == src.shape and image.random_rotate(src[0], [-5, 5]).shape == src[0].shape
    with pytest.raises(ValueError, match="angle_limits"):
        image.random_rotate(src, (1, 2, 3))

    class Rotated:  # inside an iterator the draws are the example's: reproducible
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return image.random_rotate(src[i], (-45, 45))

    def run():
        return [b[0] for b in SerialIterator(Rotated(), 3, repeat=False, shuffle=False, seed=5)]

    assert all(np.array_equal(a, b) for a, b in zip(run(), run()))
