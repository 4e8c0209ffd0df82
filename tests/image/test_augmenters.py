"""MXNet's augmenters and CreateAugmenter: their maths, dumps(), and draws from example_rng()."""

import json
import pickle

import numpy as np
import pytest

from dataset_kit.datasets import TransformDataset
from dataset_kit.image import (
    Augmenter,
    BrightnessJitterAug,
    CastAug,
    CenterCropAug,
    ColorNormalizeAug,
    ContrastJitterAug,
    CreateAugmenter,
    ForceResizeAug,
    HorizontalFlipAug,
    HueJitterAug,
    LightingAug,
    RandomCropAug,
    RandomGrayAug,
    RandomOrderAug,
    RandomSizedCropAug,
    ResizeAug,
    SaturationJitterAug,
    SequentialAug,
)
from dataset_kit.iterators import MultiprocessIterator, SerialIterator


def _image(h=40, w=50, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3)).astype(np.float32)


def test_base_class_keeps_arguments_for_dumps_and_must_be_overridden():
    aug = Augmenter(a=np.array([1, 2]), b=3)
    assert json.loads(aug.dumps()) == ["augmenter", {"a": [1, 2], "b": 3}]
    with pytest.raises(NotImplementedError):
        aug(_image())


def test_geometry_augmenters_give_the_sizes():
    image = _image()
    assert ResizeAug(20)(image).shape == (20, 25, 3)
    assert ForceResizeAug((30, 10))(image).shape == (10, 30, 3)
    assert RandomCropAug((20, 10))(image).shape == (10, 20, 3)
    assert np.array_equal(CenterCropAug((20, 10))(image), image[15:25, 15:35])
    assert RandomSizedCropAug((16, 16), 0.1, (0.75, 1.33))(image).shape == (16, 16, 3)
    with pytest.raises(TypeError, match="unexpected"):
        RandomSizedCropAug((16, 16), 0.1, (0.75, 1.33), bogus=1)


def test_colour_augmenters_compute_as_mxnet_in_float_without_clipping():
    image = _image()
    grey = image @ np.float32([0.299, 0.587, 0.114])
    for _alpha_of, aug, expected in [
            (lambda out: out[0, 0, 0] / image[0, 0, 0], BrightnessJitterAug(0.5),
             lambda a: image * a),
            (None, ContrastJitterAug(0.5), lambda a: image * a + (1 - a) * grey.mean()),
            (None, SaturationJitterAug(0.5), lambda a: image * a + (1 - a) * grey[..., None])]:
        out = aug(image)
        # Recover alpha from one pixel's difference, then check every pixel.
        base = expected(1.0)
        a = 1 + (out[0, 0, 0] - base[0, 0, 0]) / (expected(2.0)[0, 0, 0] - base[0, 0, 0])
        assert 0.5 - 1e-4 <= a <= 1.5 + 1e-4
        np.testing.assert_allclose(out, expected(a), rtol=1e-4, atol=1e-2)


def test_hue_zero_and_gray_and_flip_and_cast():
    image = _image()
    # MXNet's YIQ matrices are rounded to 3 decimals: no rotation is the identity to within 1.
    np.testing.assert_allclose(HueJitterAug(1e-12)(image), image, atol=1.0)
    grey = RandomGrayAug(1.0)(image)
    assert np.allclose(grey[..., 0], image @ np.float32([0.21, 0.72, 0.07]), atol=1e-3)
    assert RandomGrayAug(0.0)(image) is image
    assert np.array_equal(HorizontalFlipAug(1.0)(image), image[:, ::-1])
    assert HorizontalFlipAug(0.0)(image) is image
    assert CastAug("float64")(image.astype(np.uint8)).dtype == np.float64


def test_lighting_adds_one_offset_per_channel():
    image = _image()
    eigval, eigvec = np.array([55.46, 4.794, 1.148]), np.eye(3)
    offset = LightingAug(0.1, eigval, eigvec)(image) - image
    assert np.allclose(offset, offset[0, 0], atol=1e-3) and np.abs(offset[0, 0]).max() > 0


def test_colour_normalize_accepts_numpy_statistics():
    out = ColorNormalizeAug(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))(_image())
    np.testing.assert_allclose(out, (_image() - [1, 2, 3]) / 2, rtol=1e-6)


def test_random_order_applies_all_in_some_order_and_keeps_its_list():
    augs = [BrightnessJitterAug(0.1), ContrastJitterAug(0.1)]
    chain = RandomOrderAug(augs)
    chain(_image())
    assert chain.ts == augs
    assert chain.dumps() == ["randomorderaug", [a.dumps() for a in augs]]


def test_create_augmenter_list_and_order_as_mxnet():
    augs = CreateAugmenter((3, 224, 224), resize=256, rand_crop=True, rand_resize=True,
                           rand_mirror=True, mean=True, std=True, brightness=0.1,
                           contrast=0.2, saturation=0.3, hue=0.1, pca_noise=0.1, rand_gray=0.2,
                           inter_method=1)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "RandomSizedCropAug", "HorizontalFlipAug", "CastAug",
                     "ColorJitterAug", "HueJitterAug", "LightingAug", "RandomGrayAug",
                     "ColorNormalizeAug"]
    assert json.loads(augs[0].dumps()) == ["resizeaug", {"size": 256, "interp": 1}]
    assert json.loads(augs[1].dumps()) == ["randomsizedcropaug", {
        "size": [224, 224], "area": 0.08, "ratio": [0.75, 4.0 / 3.0], "interp": 1}]
    assert json.loads(augs[3].dumps()) == ["castaug", {"type": "float32"}]
    assert [type(a).__name__ for a in augs[4].ts] == [
        "BrightnessJitterAug", "ContrastJitterAug", "SaturationJitterAug"]
    mean, std = json.loads(augs[-1].dumps())[1].values()
    assert np.allclose(mean, [123.68, 116.28, 103.53]) and np.allclose(std, [58.395, 57.12,
                                                                            57.375])
    assert [type(a).__name__ for a in CreateAugmenter((3, 8, 8))] == ["CenterCropAug",
                                                                      "CastAug"]


@pytest.mark.parametrize("kwargs,match", [({"rand_resize": True}, "rand_crop"),
                                          ({"mean": [1, 2, 3]}, "mean"),
                                          ({"std": np.ones(2)}, "std")])
def test_create_augmenter_refuses_what_mxnet_asserts(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CreateAugmenter((3, 8, 8), **kwargs)


def _augmented(i):
    chain = SequentialAug(CreateAugmenter((3, 12, 12), resize=16, rand_crop=True,
                                          rand_mirror=True, brightness=0.3, hue=0.1,
                                          pca_noise=0.1))
    return chain(_image(20, 24, seed=i))


def test_augmentation_is_the_same_for_any_number_of_workers():
    dataset = TransformDataset(list(range(8)), _augmented)
    serial = next(SerialIterator(dataset, 8, shuffle=False, seed=5))
    it = MultiprocessIterator(dataset, 8, shuffle=False, seed=5, n_processes=2)
    try:
        parallel = next(it)
    finally:
        it.finalize()
    assert all(np.array_equal(a, b) for a, b in zip(serial, parallel))
    other_seed = next(SerialIterator(dataset, 8, shuffle=False, seed=6))
    assert not all(np.array_equal(a, b) for a, b in zip(serial, other_seed))


def test_augmenters_pickle():
    augs = CreateAugmenter((3, 8, 8), resize=10, rand_crop=True, mean=True, brightness=0.1)
    clone = pickle.loads(pickle.dumps(augs))
    assert [a.dumps() for a in clone] == [a.dumps() for a in augs]
