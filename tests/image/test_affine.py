"""Affine warps, resizing and padding with OpenCV's interpolation codes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("PIL", reason="the geometry uses Pillow (the image extra)")

from dataset_kit.image import affine  # noqa: E402

IMAGE = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)


@pytest.mark.parametrize("code", [0, 1, 2, 3, 4])
def test_the_identity_warp_keeps_the_image(code):
    if code > 0:  # a filter that is not nearest may still blend at most by rounding
        out = affine.warp_affine(IMAGE, np.eye(2, 3), (11, 9), code)
        assert np.abs(out.astype(int) - IMAGE).max() <= 1
    else:
        np.testing.assert_array_equal(affine.warp_affine(IMAGE, np.eye(2, 3), (11, 9), 0), IMAGE)


def test_mxnets_matrix_without_change_is_the_identity():
    matrix = affine.mxnet_affine_matrix(0, 0, 1, 1, (11, 9), (11, 9))
    np.testing.assert_allclose(matrix, np.eye(2, 3), atol=1e-6)


def test_pixels_from_outside_are_the_fill_value():
    shifted = np.array([[1, 0, 5], [0, 1, 0]], np.float32)  # content moves 5 px right
    out = affine.warp_affine(IMAGE, shifted, (11, 9), 0, fill=7)
    assert (out[:, :5] == 7).all()
    np.testing.assert_array_equal(out[:, 5:], IMAGE[:, :6])


@given(st.sampled_from([9, 10]), st.integers(1, 50), st.integers(1, 50))
@settings(max_examples=30, deadline=None)
def test_auto_and_random_interpolation_resolve_to_a_real_method(code, width, height):
    method = affine.resolve_interpolation(code, (20, 20), (width, height),
                                          np.random.default_rng(0))
    assert method in (0, 1, 2, 3, 4)
    if code == 9 and width > 20 and height > 20:
        assert method == 2


def test_unknown_interpolation_is_refused():
    with pytest.raises(ValueError, match="interpolation"):
        affine.resolve_interpolation(5, (1, 1), (1, 1))


def test_resize_shorter_uses_mxnets_integer_arithmetic_and_pad_adds_borders():
    assert affine.resize_shorter_mxnet(IMAGE, 4) == (4 * 11 // 9, 4)
    assert affine.resize(IMAGE, 5, 4, 3).shape == (4, 5, 3)
    padded = affine.pad(IMAGE, 2, fill=9)
    assert padded.shape == (13, 15, 3) and (padded[:2] == 9).all()
