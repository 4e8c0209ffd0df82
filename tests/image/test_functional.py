"""MXNet's mx.image functions: decoding, resizing, crops and their boxes, normalisation."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from dataset_kit import example_rng
from dataset_kit.image import (
    _resize,
    center_crop,
    color_normalize,
    copyMakeBorder,
    fixed_crop,
    imdecode,
    imread,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
    scale_down,
)
from dataset_kit.io import MXNetError


def _image(h=30, w=40, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _encode(array, fmt="PNG"):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def test_png_decodes_exactly_as_rgb_bgr_and_grey():
    image = _image()
    data = _encode(image)
    assert np.array_equal(imdecode(data), image)
    assert np.array_equal(imdecode(bytearray(data), to_rgb=False), image[:, :, ::-1])
    assert np.array_equal(imdecode(np.frombuffer(data, np.uint8)), image)
    grey = imdecode(data, flag=0)
    assert grey.shape == (30, 40, 1) and grey.dtype == np.uint8
    expected = image.astype(np.float64) @ [0.299, 0.587, 0.114]
    assert np.abs(grey[:, :, 0] - expected).max() <= 1


def test_grey_png_decodes_to_three_equal_channels():
    grey = _image()[:, :, 0]
    out = imdecode(_encode(grey))
    assert out.shape == (30, 40, 3) and all(np.array_equal(out[:, :, c], grey) for c in range(3))


def test_imread_reads_the_file_as_imdecode_decodes_its_bytes(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(_encode(_image()))
    assert np.array_equal(imread(path), imdecode(path.read_bytes()))


@pytest.mark.parametrize("buf", [b"", b"clearly not image content", _encode(_image())[:60]])
def test_empty_or_corrupt_buffers_raise_mxnet_error(buf):
    with pytest.raises(MXNetError, match="cannot decode image"):
        imdecode(buf)


def test_imdecode_refuses_a_string_as_mxnet_does():
    with pytest.raises(ValueError, match="buf must be of type bytes"):
        imdecode("a.jpg")


def test_imread_of_a_missing_file_names_it(tmp_path):
    with pytest.raises(MXNetError, match="nope.jpg"):
        imread(tmp_path / "nope.jpg")


def test_scale_down_examples_from_mxnet():
    assert scale_down((640, 480), (720, 120)) == (640, 106)
    assert scale_down((360, 1000), (480, 500)) == (360, 375)
    assert scale_down((300, 400), (0, 0)) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50), st.integers(1, 80), st.integers(1, 80))
def test_nearest_follows_opencvs_index_rule(h, w, new_h, new_w):
    image = np.arange(h * w, dtype=np.int64).reshape(h, w)[:, :, None]
    out = imresize(image.astype(np.float32), new_w, new_h, interp=0)[:, :, 0].astype(np.int64)
    rows = np.minimum(np.floor(np.arange(new_h) * (1.0 / (new_h / h))), h - 1).astype(int)
    cols = np.minimum(np.floor(np.arange(new_w) * (1.0 / (new_w / w))), w - 1).astype(int)
    assert np.array_equal(out, image[rows][:, cols, 0])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("interp", [1, 2, 3, 4, 9])
def test_imresize_keeps_dtype_and_gives_the_size(dtype, interp):
    out = imresize(_image().astype(dtype), 17, 23, interp)
    assert out.shape == (23, 17, 3) and out.dtype == dtype


def test_imresize_without_opencv_is_close_to_it_on_enlarging(monkeypatch):
    cv2 = pytest.importorskip("cv2", reason="OpenCV (the opencv extra) is not installed")
    smooth = np.clip(np.add.outer(np.arange(30) * 4, np.arange(40) * 3), 0, 255)
    image = np.repeat(smooth[:, :, None], 3, 2).astype(np.uint8)
    theirs = cv2.resize(image, (80, 60), interpolation=cv2.INTER_LINEAR)
    monkeypatch.setattr(_resize, "opencv", lambda: None)
    ours = imresize(image, 80, 60, 1)
    assert np.abs(ours.astype(int) - theirs).max() <= 3


def test_imresize_writes_into_out():
    out = np.zeros((5, 7, 3), np.uint8)
    assert imresize(_image(), 7, 5, 0, out=out) is out and out.any()


def test_resize_short_uses_mxnets_integer_arithmetic():
    assert resize_short(_image(30, 40), 20).shape == (20, 26, 3)
    assert resize_short(_image(41, 30), 20).shape == (27, 20, 3)


def test_fixed_and_centre_crops_give_mxnets_boxes():
    image = _image(30, 40)
    assert np.array_equal(fixed_crop(image, 3, 4, 10, 5), image[4:9, 3:13])
    assert fixed_crop(image, 3, 4, 10, 5, size=(20, 10)).shape == (10, 20, 3)
    out, box = center_crop(image, (21, 11))
    assert box == (9, 9, 21, 11) and np.array_equal(out, image[9:20, 9:30])
    out, box = center_crop(image, (80, 20))  # too large: scaled down, resized back up
    assert box == (0, 10, 40, 10) and out.shape == (20, 80, 3)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 50), st.integers(1, 50))
def test_random_crop_box_lies_inside_and_matches_the_pixels(h, w, cw, ch):
    image = _image(h, w)
    if 0 in scale_down((w, h), (cw, ch)):  # nothing left to crop: MXNet fails too
        with pytest.raises(ValueError, match="empty image"):
            random_crop(image, (cw, ch), interp=0)
        return
    out, (x0, y0, bw, bh) = random_crop(image, (cw, ch), interp=0)
    assert (bw, bh) == scale_down((w, h), (cw, ch))
    assert 0 <= x0 <= w - bw and 0 <= y0 <= h - bh and out.shape == (ch, cw, 3)
    if (bw, bh) == (cw, ch):
        assert np.array_equal(out, image[y0:y0 + bh, x0:x0 + bw])


def test_random_size_crop_keeps_area_and_ratio_in_range():
    image = _image(200, 300)
    for _ in range(50):
        out, (x0, y0, w, h) = random_size_crop(image, (50, 40), 0.3, (0.75, 1.33))
        assert out.shape == (40, 50, 3)
        if (x0, y0, w, h) != center_crop(image, (50, 40))[1]:
            assert 0.3 * 60000 * 0.97 <= w * h <= 60000 and 0.7 <= w / h <= 1.4
    with pytest.raises(TypeError, match="unexpected"):
        random_size_crop(image, (5, 5), 0.5, (1, 1), bogus=1)


def test_color_normalize_is_not_in_place():
    src = _image().astype(np.float32)
    before = src.copy()
    out = color_normalize(src, np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 4.0]))
    assert np.allclose(out, (before - [1, 2, 3]) / [2, 2, 4]) and np.array_equal(src, before)


@pytest.mark.parametrize("kind,mode", [(1, "edge"), (2, "symmetric"), (3, "wrap"),
                                       (4, "reflect")])
def test_copy_make_border_modes(kind, mode):
    image = _image(6, 7)
    out = copyMakeBorder(image, 1, 2, 3, 4, type=kind)
    assert np.array_equal(out, np.pad(image, [(1, 2), (3, 4), (0, 0)], mode=mode))


def test_copy_make_border_constant_per_channel():
    out = copyMakeBorder(_image(6, 7), 1, 1, 2, 2, type=0, values=[5, 6, 7])
    assert out.shape == (8, 11, 3) and out[0, 0].tolist() == [5, 6, 7]


def test_random_draws_are_the_examples_inside_an_iterator():
    from dataset_kit.datasets import TransformDataset
    from dataset_kit.iterators import SerialIterator

    images = TransformDataset(list(range(6)), lambda i: random_crop(_image(20, 20), (5, 5))[1])
    boxes = [next(SerialIterator(images, 6, shuffle=False, seed=3)) for _ in range(2)]
    assert boxes[0] == boxes[1] and len(set(boxes[0])) > 1
    assert example_rng() is not None


@settings(max_examples=60, deadline=None)
@given(height=st.integers(1, 9), width=st.integers(1, 9), channels=st.sampled_from([1, 3, 4]),
       dtype=st.sampled_from([np.uint8, np.float32, np.float64]), transposed=st.booleans(),
       which=st.sampled_from(["both", "mean", "std"]), seed=st.integers(0, 2**16))
def test_color_normalize_equals_numpys_broadcast_bit_for_bit(height, width, channels, dtype,
                                                             transposed, which, seed):
    # Row-wise broadcasting (the fast path) must give exactly what (x - mean) / std gives.
    rng = np.random.default_rng(seed)
    image = (rng.random((height, width, channels)) * 255).astype(dtype)
    if transposed:  # a non-contiguous view takes numpy's own broadcast
        image = np.ascontiguousarray(image.transpose(1, 0, 2)).transpose(1, 0, 2)
    mean = (rng.random(channels) * 255).astype(np.float32) if which != "std" else None
    std = (rng.random(channels) * 60 + 1).astype(np.float32) if which != "mean" else None
    want = image
    if mean is not None:
        want = want - mean
    if std is not None:
        want = want / std
    got = color_normalize(image, mean, std)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()
