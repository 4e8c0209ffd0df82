"""ImageRecordIter: every MXNet 1.9 argument, mean_img, seed_aug, MXNet's errors, resume."""

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("PIL", reason="image records decode with Pillow (the image extra)")

from dataset_kit.io import ImageRecordIter, MXNetError  # noqa: E402
from dataset_kit.io._mean_image import load_mean_image  # noqa: E402
from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack_img  # noqa: E402

N = 7


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rec")
    rng = np.random.default_rng(0)
    with IndexedRecordWriter(folder / "t.idx", folder / "t.rec") as writer:
        for i in range(N):
            image = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
            writer.write_idx(i, pack_img(IRHeader(0, float(i), i, 0), image, img_fmt=".png"))
    return str(folder / "t.rec")


AUGMENT = dict(rand_crop=True, rand_mirror=True, max_random_scale=1.3, min_random_scale=0.9,
               max_random_illumination=3, max_random_contrast=0.2, max_rotate_angle=10,
               max_shear_ratio=0.2, random_l=50, random_s=40, random_h=10, brightness=0.2,
               contrast=0.2, saturation=0.2, pca_noise=0.1, max_aspect_ratio=0.1, pad=1,
               fill_value=0, inter_method=10)


def batches(it, epochs=1):
    out = []
    for _ in range(epochs):
        out.append([(b.data[0].copy(), b.label[0].tolist(), b.pad) for b in it])
        it.reset()
    return out


def same(a, b):
    return all(len(x) == len(y) and all(np.array_equal(p[0], q[0]) and p[1:] == q[1:]
                                        for p, q in zip(x, y)) for x, y in zip(a, b))


def test_every_mxnet_argument_is_accepted(rec, tmp_path):
    mxnet_args = dict(
        path_imglist="", path_imgidx=None, aug_seq="aug_default", label_width=1,
        preprocess_threads=0, verbose=False, num_parts=1, part_index=0, device_id=0,
        shuffle_chunk_size=0, shuffle_chunk_seed=0, seed_aug=1, shuffle=True, seed=2,
        round_batch=True, prefetch_buffer=1, ctx="cpu", dtype="float32", mirror=False,
        rand_mirror=True, mean_img=str(tmp_path / "m.bin"), mean_r=1.0, mean_g=2.0, mean_b=3.0,
        mean_a=0.0, std_r=2.0, std_g=2.0, std_b=2.0, std_a=1.0, scale=0.5,
        max_random_contrast=0.1, max_random_illumination=1.0, resize=-1, rand_crop=True,
        random_resized_crop=False, max_rotate_angle=5, max_aspect_ratio=0.1,
        min_aspect_ratio=None, max_shear_ratio=0.1, max_crop_size=-1, min_crop_size=-1,
        max_random_scale=1.1, min_random_scale=0.9, max_random_area=1.0, min_random_area=1.0,
        max_img_size=1e10, min_img_size=0.0, brightness=0.1, contrast=0.1, saturation=0.1,
        pca_noise=0.1, random_h=5, random_s=5, random_l=5, rotate=-1, fill_value=255,
        inter_method=1, pad=0, rotate_list="")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none is "unknown"
        it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=3, **mxnet_args)
    batch = it.next()
    assert batch.data[0].shape == (3, 3, 8, 8) and batch.data[0].dtype == np.float32
    assert isinstance(it.getdata(), np.ndarray) and it.getlabel().shape == (3,)


def test_an_unknown_argument_is_ignored_with_a_warning_as_mxnet_ignores_it(rec):
    with pytest.warns(UserWarning, match="and_mirror"):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2, and_mirror=True,
                        preprocess_threads=0)


@pytest.mark.parametrize("shape, message", [((5, 8, 8), r"Invalid output shape \(5,8,8\)"),
                                            ((3, 8), "data_shape"), ((3, 0, 8), "data_shape")])
def test_a_bad_data_shape_is_mxnets_error(rec, shape, message):
    with pytest.raises(MXNetError, match=message):
        ImageRecordIter(path_imgrec=rec, data_shape=shape, batch_size=2)


@pytest.mark.parametrize("args", [dict(inter_method=7), dict(inter_method=0, max_rotate_angle=5),
                                  dict(random_resized_crop=True, rand_crop=True),
                                  dict(aug_seq="det_aug_default"), dict(dtype="float16")])
def test_arguments_mxnet_refuses_are_its_error(rec, args):
    with pytest.raises(MXNetError):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2, **args)


def test_a_missing_mean_image_is_computed_saved_and_then_loaded(rec, tmp_path):
    path = tmp_path / "mean.bin"
    plain = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=N,
                            preprocess_threads=0)
    raw = next(plain).data[0]
    first = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=N,
                            mean_img=str(path), preprocess_threads=0)
    np.testing.assert_allclose(load_mean_image(path), raw.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(next(first).data[0], raw - raw.mean(axis=0), atol=1e-4)
    path.write_bytes(path.read_bytes())  # a present file is loaded, not recomputed
    mtime = path.stat().st_mtime_ns
    ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=N, mean_img=str(path),
                    preprocess_threads=0)
    assert path.stat().st_mtime_ns == mtime


def test_a_mean_image_of_another_shape_is_refused(rec, tmp_path):
    path = str(tmp_path / "mean.bin")
    ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2, mean_img=path,
                    preprocess_threads=0)
    with pytest.raises(MXNetError, match="mean image"):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 6, 6), batch_size=2, mean_img=path)


def test_seed_aug_fixes_the_augmentation_and_another_seed_aug_changes_it(rec):
    def make(seed_aug):
        return ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=3,
                               seed_aug=seed_aug, preprocess_threads=0, **AUGMENT)

    assert same(batches(make(3), 2), batches(make(3), 2))
    assert not same(batches(make(3)), batches(make(4)))


def test_augmented_batches_resume_exactly_and_match_across_worker_counts(rec):
    def make(workers):
        return ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=3,
                               shuffle=True, preprocess_threads=workers, **AUGMENT)

    expected = batches(make(0), 2)
    with_workers = make(2)
    try:
        assert same(batches(with_workers, 2), expected)
    finally:
        with_workers.close()
    it = make(0)
    next(it)
    state = json.loads(json.dumps(it.state_dict()))
    resumed = make(0)
    resumed.load_state_dict(state)
    rest = [(b.data[0], b.label[0].tolist(), b.pad) for b in resumed]
    assert same([rest], [expected[0][1:]])


def test_round_batch_wraps_like_mxnets_batch_loader(rec):
    it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=3,
                         preprocess_threads=0)
    epochs = [[(b.label[0].tolist(), b.pad) for b in it] for _ in range(2) if not it.reset()]
    assert epochs[0][-1] == ([6.0, 0.0, 1.0], 2)
    assert epochs[1][0] == ([2.0, 3.0, 4.0], 0)  # the next epoch starts after the wrapped ones


def test_labels_from_an_image_list(rec, tmp_path):
    lst = tmp_path / "t.lst"
    lst.write_text("".join(f"{i}\t{i * 10}\t{-i}\timg{i}.png\n" for i in range(N)))
    it = ImageRecordIter(path_imgrec=rec, path_imglist=str(lst), label_width=2,
                         data_shape=(3, 8, 8), batch_size=2, preprocess_threads=0)
    assert next(it).label[0].tolist() == [[0.0, 0.0], [10.0, -1.0]]


def test_resize_crop_and_normalise_give_opencvs_pixels_as_mxnet_does(rec):
    # MXNet's C++ augmenter resizes with OpenCV; with the opencv extra so does ours,
    # and the normalisation is MXNet's (pixel - mean) / std on those pixels, in float32.
    cv2 = pytest.importorskip("cv2", reason="OpenCV's pixels need the opencv extra")
    from dataset_kit.recordio import IndexedRecordReader, unpack_img

    mean, std = (123.7, 116.3, 103.5), (58.4, 57.1, 57.4)
    it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 6, 6), batch_size=N, resize=9,
                         mean_r=mean[0], mean_g=mean[1], mean_b=mean[2], std_r=std[0],
                         std_g=std[1], std_b=std[2], preprocess_threads=0)
    got = next(it).data[0]
    reader = IndexedRecordReader(rec[:-4] + ".idx", rec)
    for k in range(N):
        _, image = unpack_img(reader.read_idx(k), 1)
        small = cv2.resize(image, (9, 10), interpolation=cv2.INTER_LINEAR)  # short side 9
        y, x = (10 - 6) // 2, (9 - 6) // 2
        chw = small[y:y + 6, x:x + 6].transpose(2, 0, 1).astype(np.float32)
        want = (chw - np.float32(mean).reshape(3, 1, 1)) * (
            1.0 / np.float32(std).reshape(3, 1, 1))
        np.testing.assert_allclose(got[k], want, rtol=0, atol=1e-5)


def test_an_empty_path_imgidx_means_no_index_as_in_mxnet(rec, tmp_path):
    alone = tmp_path / "alone.rec"  # no .idx beside it: the records are scanned
    alone.write_bytes(open(rec, "rb").read())
    for path in (rec, str(alone)):
        it = ImageRecordIter(path_imgrec=path, path_imgidx="", data_shape=(3, 8, 8),
                             batch_size=N, preprocess_threads=0)
        assert sorted(next(it).label[0].tolist()) == list(range(N))


def test_data_name_and_label_name_name_the_inputs_as_in_mxnet(rec):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named, not ignored with a warning
        it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2,
                             preprocess_threads=0, data_name="x", label_name="y")
    assert [d.name for d in it.provide_data + it.provide_label] == ["x", "y"]


def test_preprocess_threads_auto_gives_the_batches_of_0_and_3_workers(rec):
    import dataset_kit

    def batches(threads):
        it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=1, shuffle=True,
                             seed=4, preprocess_threads=threads, **AUGMENT)
        try:
            out = []
            for _ in range(6):  # 42 batches over 6 epochs
                out += [(b.data[0].tolist(), b.label[0].tolist()) for b in it]
                it.reset()
            return out
        finally:
            it.close()

    expected = batches(0)
    assert batches(3) == expected
    with dataset_kit.profile() as p:
        assert batches("auto") == expected
    # The engine's controller decided after 4 and 8 batches, then every 16.
    assert [d["batch"] for d in p.to_json()["decisions"]] == [4, 12, 28]
    with pytest.raises(ValueError, match="memory_limit is for preprocess_threads='auto'"):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=1,
                        preprocess_threads=2, memory_limit=1 << 30)
