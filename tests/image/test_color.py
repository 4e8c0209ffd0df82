"""Colour adjustments: brightness, contrast, saturation, OpenCV's 8-bit HLS, PCA lighting."""

import colorsys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dataset_kit.image import color

images = arrays(np.uint8, st.tuples(st.integers(1, 6), st.integers(1, 6), st.just(3)))


@given(images)
@settings(max_examples=50, deadline=None)
def test_hls_matches_colorsys_in_opencvs_8_bit_ranges_and_round_trips(image):
    hls = color.rgb_to_hls(image)
    r, g, b = image[0, 0] / 255
    h, light, s = colorsys.rgb_to_hls(r, g, b)
    assert abs(int(hls[0, 0, 1]) - light * 255) <= 1 and abs(int(hls[0, 0, 2]) - s * 255) <= 1
    hue_error = abs(int(hls[0, 0, 0]) - h * 180)
    assert min(hue_error, 180 - hue_error) <= 1 or s == 0
    # An 8-bit hue step is 2 degrees: up to 255 * 1 / 60 (4.25) per channel at full chroma,
    # plus the rounding of L and S.
    assert np.abs(color.hls_to_rgb(hls).astype(int) - image).max() <= 6


@given(images)
@settings(max_examples=30, deadline=None)
def test_neutral_amounts_change_nothing(image):
    np.testing.assert_array_equal(color.adjust_brightness(image, 1.0), image)
    np.testing.assert_array_equal(color.adjust_contrast(image, 1.0), image)
    np.testing.assert_array_equal(color.adjust_saturation(image, 1.0), image)
    np.testing.assert_array_equal(color.pca_lighting(image, [0, 0, 0]), image)


def test_zero_saturation_gives_grey_and_values_saturate():
    image = np.array([[[255, 0, 0]]], np.uint8)
    grey = color.adjust_saturation(image, 0.0)
    assert grey[0, 0].tolist() == [76, 76, 76]  # 0.299 * 255
    assert color.adjust_brightness(image, 2.0)[0, 0].tolist() == [255, 0, 0]
    assert color.shift_hls(image, 0, 255, 0)[0, 0].tolist() == [255, 255, 255]
