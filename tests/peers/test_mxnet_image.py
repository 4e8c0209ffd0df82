"""dataset_kit.image and ImageIter against MXNet 1.9.1's own mx.image, output for output.

Exact where both sides compute the same thing: PNG decoding, nearest resizing,
crops and their boxes, borders, CreateAugmenter's list, ImageIter's batches.
Elsewhere a tolerance, stated where it is used: JPEG decoding (libjpeg builds
differ in IDCT rounding) and resizing with interpolation 1-4 (MXNet's bundled
OpenCV build against the installed one; Pillow's filters without OpenCV).
"""

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from dataset_kit import image as dk  # noqa: E402
from dataset_kit import recordio  # noqa: E402
from dataset_kit.image import _resize  # noqa: E402


def _picture(h=37, w=53, seed=0):
    """A smooth picture with some noise, closer to a photo than uniform noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    planes = [128 + 100 * np.sin(x / 7 + c) * np.cos(y / 5 - c) for c in range(3)]
    return np.clip(np.stack(planes, -1) + rng.normal(0, 8, (h, w, 3)), 0, 255).astype(np.uint8)


def _encode(array, fmt):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


@pytest.mark.parametrize("to_rgb", [True, False])
def test_png_decodes_exactly_as_mxnet(to_rgb):
    data = _encode(_picture(), "PNG")
    assert np.array_equal(dk.imdecode(data, to_rgb=to_rgb).asnumpy(),
                          mx.image.imdecode(data, to_rgb=to_rgb).asnumpy())


def test_png_grey_within_one_and_jpeg_within_two_levels():
    png = _encode(_picture(), "PNG")
    # OpenCV's fixed-point RGB-to-grey and ours (float BT.601) round differently.
    grey = dk.imdecode(png, flag=0).asnumpy().astype(int) - mx.image.imdecode(png, flag=0).asnumpy()
    assert np.abs(grey).max() <= 1
    jpeg = _encode(_picture(), "JPEG")
    # libjpeg-turbo (simplejpeg, Pillow) against MXNet's libjpeg: IDCT and upsampling rounding.
    diff = dk.imdecode(jpeg).asnumpy().astype(int) - mx.image.imdecode(jpeg).asnumpy()
    assert np.abs(diff).max() <= 2 and np.abs(diff).mean() < 0.5


@pytest.mark.parametrize("size", [(20, 15), (80, 60), (53, 20)])
def test_nearest_resize_is_exact(size):
    src = _picture()
    theirs = mx.image.imresize(mx.nd.array(src, dtype=np.uint8), *size, interp=0).asnumpy()
    assert np.array_equal(dk.imresize(src, *size, interp=0), theirs)


@pytest.mark.parametrize("interp", [1, 2, 3, 4])
@pytest.mark.parametrize("size", [(20, 15), (80, 60)])
def test_other_interpolations_within_a_stated_tolerance(interp, size):
    src = _picture()
    theirs = mx.image.imresize(mx.nd.array(src, dtype=np.uint8), *size,
                               interp=interp).asnumpy().astype(int)
    diff = np.abs(dk.imresize(src, *size, interp=interp).astype(int) - theirs)
    if _resize.opencv() is not None:
        # The same algorithm; OpenCV builds differ only in fixed-point rounding.
        assert diff.max() <= 1
    else:
        # Pillow's filters widen when shrinking, OpenCV's do not (measured on this picture).
        assert diff.mean() < 6 and diff.max() <= 30


def test_resize_short_and_crops_give_mxnets_pixels_and_boxes():
    src = _picture()
    nd = mx.nd.array(src, dtype=np.uint8)
    assert np.array_equal(dk.resize_short(src, 20, 0), mx.image.resize_short(nd, 20, 0)
                          .asnumpy())
    assert np.array_equal(dk.fixed_crop(src, 3, 4, 20, 10, (40, 20), 0),
                          mx.image.fixed_crop(nd, 3, 4, 20, 10, (40, 20), 0).asnumpy())
    for size in [(20, 10), (60, 30), (53, 37)]:
        ours, box = dk.center_crop(src, size, 0)
        theirs, their_box = mx.image.center_crop(nd, size, 0)
        assert box == their_box and np.array_equal(ours, theirs.asnumpy())
    for size in [(20, 10), (100, 50)]:
        assert dk.scale_down((53, 37), size) == mx.image.scale_down((53, 37), size)


def test_random_crop_box_gives_mxnets_crop_of_that_box():
    src = _picture()
    ours, (x0, y0, w, h) = dk.random_crop(src, (20, 10), 0)
    assert np.array_equal(ours, mx.image.fixed_crop(mx.nd.array(src, dtype=np.uint8), x0, y0,
                                                    w, h, (20, 10), 0).asnumpy())


def test_color_normalize_and_borders():
    src = _picture().astype(np.float32)
    mean, std = np.array([120.0, 110.0, 100.0]), np.array([50.0, 60.0, 70.0])
    theirs = mx.image.color_normalize(mx.nd.array(src), mx.nd.array(mean), mx.nd.array(std))
    assert np.allclose(dk.color_normalize(src, mean, std), theirs.asnumpy(), atol=1e-4)
    for kind in range(5):
        theirs = mx.image.copyMakeBorder(mx.nd.array(src), 2, 3, 4, 5, type=kind,
                                         values=[1.0, 2.0, 3.0]).asnumpy()
        assert np.array_equal(dk.copyMakeBorder(src, 2, 3, 4, 5, type=kind,
                                                values=[1.0, 2.0, 3.0]), theirs)


@pytest.mark.parametrize("kwargs", [
    {},
    {"resize": 256, "rand_crop": True, "rand_mirror": True, "mean": True, "std": True},
    {"resize": 64, "rand_crop": True, "rand_resize": True, "brightness": 0.1, "contrast": 0.2,
     "saturation": 0.3, "hue": 0.4, "pca_noise": 0.1, "rand_gray": 0.2, "inter_method": 10,
     "mean": np.array([1.0, 2.0, 3.0]), "std": np.array([4.0, 5.0, 6.0])},
    {"rand_crop": True, "contrast": 0.2, "hue": 0.1, "std": True}])
def test_create_augmenter_builds_mxnets_list(kwargs):
    def dumped(augs):
        return [a.dumps() if isinstance(a.dumps(), list) else json.loads(a.dumps())
                for a in augs]
    assert dumped(dk.CreateAugmenter((3, 32, 48), **kwargs)) == \
        dumped(mx.image.CreateAugmenter((3, 32, 48), **kwargs))


@settings(max_examples=200, deadline=None)
@given(st.tuples(st.integers(1, 2000), st.integers(1, 2000)),
       st.tuples(st.integers(0, 3000), st.integers(0, 3000)))
def test_scale_down_gives_mxnets_size_for_any_sizes(src_size, size):
    assert dk.scale_down(src_size, size) == mx.image.scale_down(src_size, size)


@pytest.fixture
def image_files(tmp_path):
    """7 PNG pictures, an .lst (two labels each), a .rec with .idx of the same."""
    lines = []
    with recordio.IndexedRecordWriter(tmp_path / "a.idx", tmp_path / "a.rec") as writer:
        for k in range(7):
            data = _encode(_picture(20 + k, 30 - k, seed=k), "PNG")
            (tmp_path / f"{k}.png").write_bytes(data)
            lines.append(f"{k}\t{k}\t{k * 2}\t{k}.png")
            header = recordio.IRHeader(2, np.array([k, k * 2], np.float32), k, 0)
            writer.write_idx(k, recordio.pack(header, data))
    (tmp_path / "a.lst").write_text("\n".join(lines) + "\n")
    return tmp_path


@pytest.mark.parametrize("source", ["rec", "lst", "imglist"])
@pytest.mark.parametrize("last_batch_handle", ["pad", "discard", "roll_over"])
def test_image_iter_batches_match_mxnets(image_files, source, last_batch_handle):
    root = str(image_files)
    inputs = {"rec": {"path_imgrec": f"{root}/a.rec"},
              "lst": {"path_imglist": f"{root}/a.lst", "path_root": root},
              "imglist": {"imglist": [[k, k * 2, f"{k}.png"] for k in range(7)],
                          "path_root": root}}[source]
    kwargs = dict(label_width=2, last_batch_handle=last_batch_handle, resize=18,
                  inter_method=0, **inputs)
    ours, theirs = dk.ImageIter(3, (3, 16, 16), **kwargs), mx.image.ImageIter(3, (3, 16, 16),
                                                                              **kwargs)
    assert [tuple(d.shape) for d in ours.provide_data] == [d[1] for d in theirs.provide_data]
    assert [tuple(d.shape) for d in ours.provide_label] == [d[1] for d in theirs.provide_label]
    for _ in range(2):  # two epochs: roll_over carries the leftover into the second
        mine, their = list(ours), list(theirs)
        assert len(mine) == len(their)
        for a, b in zip(mine, their):
            assert a.pad == b.pad
            assert np.array_equal(a.data[0].asnumpy(), b.data[0].asnumpy())
            assert np.array_equal(a.label[0].asnumpy(), b.label[0].asnumpy())
        ours.reset()
        theirs.reset()


@pytest.mark.parametrize("zoom_in, zoom_out", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape", [(3, 30, 60), (2, 3, 17, 11)])
def test_imrotate_equals_mxnets(shape, zoom_in, zoom_out):
    src = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    angles = [6, -33.3, 90, 0.5] if len(shape) == 3 else [mx.nd.array([12, -70])]
    for angle in angles:
        theirs = mx.image.imrotate(mx.nd.array(src), angle, zoom_in=zoom_in, zoom_out=zoom_out)
        ours = dk.imrotate(mx.nd.array(src), angle, zoom_in=zoom_in, zoom_out=zoom_out)
        assert isinstance(ours, mx.nd.NDArray)
        np.testing.assert_allclose(ours.asnumpy(), theirs.asnumpy(), atol=1e-5)
