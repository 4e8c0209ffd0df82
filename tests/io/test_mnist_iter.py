"""MNISTIter: MXNet's parameters, outputs and once-only shuffle."""

import gzip
import warnings

import numpy as np
import pytest

from dataset_kit.io import MNISTIter, MXNetError


def write_idx(path, array, compress=False):
    header = (0x800 + array.ndim).to_bytes(4, "big") + b"".join(
        d.to_bytes(4, "big") for d in array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return str(path)


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def mnist(tmp_path, request):
    images = np.arange(10 * 4 * 4).reshape(10, 4, 4) % 256
    labels = np.arange(10)
    return (write_idx(tmp_path / "img", images, request.param),
            write_idx(tmp_path / "lbl", labels, request.param), images)


def test_batches_are_mxnets_shapes_scale_and_the_tail_is_dropped(mnist):
    image, label, images = mnist
    it = MNISTIter(image=image, label=label, batch_size=3, shuffle=False, silent=True,
                   data_shape=(16,))
    batches = list(it)
    assert len(batches) == 3  # 10 // 3: the short tail is never served
    first = batches[0]
    assert first.data[0].shape == (3, 1, 4, 4) and first.data[0].dtype == np.float32
    np.testing.assert_array_equal(first.data[0][:, 0], images[:3] / np.float32(256))
    assert first.label[0].tolist() == [0.0, 1.0, 2.0] and first.pad == 0
    flat = MNISTIter(image=image, label=label, batch_size=3, shuffle=False, flat=True,
                     silent=True)
    assert flat.next().data[0].shape == (3, 16)
    assert isinstance(flat.getlabel(), np.ndarray) and flat.getlabel().shape == (3,)


def test_shuffle_is_made_once_and_kept_across_resets(mnist):
    image, label, _ = mnist
    it = MNISTIter(image=image, label=label, batch_size=2, shuffle=True, seed=10, silent=True)
    first = [b.label[0].tolist() for b in it]
    it.reset()
    assert [b.label[0].tolist() for b in it] == first
    assert sorted(sum(first, [])) != sum(first, [])  # it is shuffled


def test_parts_split_the_data_contiguously(mnist):
    image, label, _ = mnist
    it = MNISTIter(image=image, label=label, batch_size=1, shuffle=False, num_parts=2,
                   part_index=1, silent=True)
    assert [b.label[0][0] for b in it] == [5, 6, 7, 8, 9]


def test_a_file_that_is_not_mnist_is_mxnets_error(tmp_path, mnist):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x00\x00\x08\x01" + b"\x00" * 8)
    with pytest.raises(MXNetError, match="invalid mnist format.*bad"):
        MNISTIter(image=str(bad), label=mnist[1])


def test_data_name_and_label_name_name_the_inputs_as_in_mxnet(mnist):
    image, label, _ = mnist
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named, not ignored with a warning
        it = MNISTIter(image=image, label=label, batch_size=3, silent=True, data_name="x",
                       label_name="y")
    assert [d.name for d in it.provide_data + it.provide_label] == ["x", "y"]
