"""ImageIter: MXNet's Python image iterator over .rec, .lst + root and imglist, on the engine."""

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from dataset_kit import recordio
from dataset_kit.image import CreateAugmenter, ImageIter
from dataset_kit.io import ImageIter as IoImageIter
from dataset_kit.iterators import WorkerError

N = 7


def _png(k):
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 10, 3), 10 * k, np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture
def files(tmp_path):
    """N images (image k is all 10 * k, label k) as PNG files, an .lst, and a .rec with .idx."""
    lines = []
    with recordio.IndexedRecordWriter(tmp_path / "a.idx", tmp_path / "a.rec") as writer:
        for k in range(N):
            (tmp_path / f"{k}.png").write_bytes(_png(k))
            lines.append(f"{k}\t{k}\t{k}.png")
            writer.write_idx(k, recordio.pack(recordio.IRHeader(0, float(k), k, 0), _png(k)))
    (tmp_path / "a.lst").write_text("\n".join(lines) + "\n")
    return tmp_path


def _epoch(it):
    batches = list(it)
    return ([b.data[0][:, 0, 0, 0] / 10 for b in batches], [b.label[0] for b in batches],
            [b.pad for b in batches])


def _sources(files):
    return {"imglist": dict(imglist=[[k, f"{k}.png"] for k in range(N)], path_root=str(files)),
            "lst": dict(path_imglist=str(files / "a.lst"), path_root=str(files)),
            "rec": dict(path_imgrec=str(files / "a.rec")),
            "rec+idx": dict(path_imgrec=str(files / "a.rec"), path_imgidx=str(files / "a.idx"))}


@pytest.mark.parametrize("source", ["imglist", "lst", "rec", "rec+idx"])
def test_batches_from_every_input_pad_from_the_epochs_start(files, source):
    it = ImageIter(3, (3, 8, 8), **_sources(files)[source])
    data, labels, pads = _epoch(it)
    assert [d.tolist() for d in data] == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]
    assert [lab.tolist() for lab in labels] == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]
    assert pads == [0, 0, 2]
    assert it.provide_data[0].shape == (3, 3, 8, 8) and it.provide_label[0].shape == (3,)
    it.reset()
    assert [d.tolist() for d in _epoch(it)[0]] == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]


def test_discard_and_roll_over_as_mxnet(files):
    imglist = _sources(files)["imglist"]
    assert _epoch(ImageIter(3, (3, 8, 8), last_batch_handle="discard", **imglist))[2] == [0, 0]
    it = ImageIter(3, (3, 8, 8), last_batch_handle="roll_over", **imglist)
    assert len(list(it)) == 2
    it.reset()
    first = it.next()
    # MXNet's roll_over: the leftover image opens the next epoch; pad counts the new ones.
    assert first.data[0][:, 0, 0, 0].tolist() == [60, 0, 10] and first.pad == 2


def test_labels_dtype_and_multi_label(files):
    imglist = [[k, k + 0.5, f"{k}.png"] for k in range(N)]
    it = ImageIter(2, (3, 8, 8), label_width=2, imglist=imglist, path_root=str(files),
                   dtype="float64", label_name="lab")
    batch = it.next()
    assert batch.label[0].dtype == np.float64 and batch.label[0].tolist() == [[0, 0.5],
                                                                             [1, 1.5]]
    assert it.provide_label[0].name == "lab" and it.provide_label[0].shape == (2, 2)
    assert batch.data[0].dtype == np.float32


def test_parts_are_cut_as_mxnet_cuts_them(files):
    lst = _sources(files)["lst"]
    parts = [_epoch(ImageIter(1, (3, 8, 8), num_parts=3, part_index=p, **lst))[0]
             for p in range(3)]
    # 7 images, 3 parts of 7 // 3 = 2: the last image belongs to no part.
    assert [[int(d[0]) for d in part] for part in parts] == [[0, 1], [2, 3], [4, 5]]


def test_shuffled_epochs_cover_every_image(files):
    it = ImageIter(N, (3, 8, 8), shuffle=True, seed=1, **_sources(files)["rec+idx"])
    orders = [sorted(_epoch(it)[0][0].tolist()) for _ in range(2) if not it.reset()]
    assert orders == [list(range(N))] * 2


@pytest.mark.parametrize("kwargs,match", [
    ({}, "path_imgrec, path_imglist or an imglist"),
    ({"imglist": [[0, "0.png"]], "data_shape": (1, 8, 8)}, "3 channels"),
    ({"imglist": [[0, "0.png"]], "data_shape": (8, 8)}, "length 3"),
    ({"imglist": [[0, "0.png"]], "dtype": "uint8"}, "dtype"),
    ({"imglist": [[0, "0.png"]], "last_batch_handle": "keep"}, "last_batch_handle"),
    ({"imglist": [[0, "0.png"]], "num_parts": 2, "part_index": 2}, "part_index"),
    ({"path_imgrec": "REC", "shuffle": True}, "path_imgidx"),
    ({"path_imgrec": "REC", "num_parts": 2}, "path_imgidx")])
def test_bad_combinations_raise_value_errors_naming_the_arguments(files, kwargs, match):
    kwargs = {k: str(files / "a.rec") if v == "REC" else v for k, v in kwargs.items()}
    kwargs.setdefault("data_shape", (3, 8, 8))
    with pytest.raises(ValueError, match=match):
        ImageIter(2, **kwargs)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_missing_image_names_the_file_the_lst_line_and_the_index(files, num_workers):
    (files / "3.png").unlink()
    it = ImageIter(2, (3, 8, 8), num_workers=num_workers, **_sources(files)["lst"])
    # From a worker, the engine's WorkerError carries the message and the error as its cause.
    raised = WorkerError if num_workers else FileNotFoundError
    try:
        it.next()
        with pytest.raises(raised, match=r"3\.png.*a\.lst, line 4, index 3") as caught:
            it.next()
        assert isinstance(caught.value.__cause__ or caught.value, FileNotFoundError)
        # The batch was not consumed: asking again fails again, never a hang or a skip.
        with pytest.raises(raised, match="index 3"):
            it.next()
    finally:
        it.close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_damaged_records_give_an_image_or_an_error_naming_the_record(files, data):
    png = bytearray(_png(5))
    if data.draw(st.booleans(), label="truncate"):
        png = png[:data.draw(st.integers(0, len(png) - 1), label="length")]
    else:
        for position in data.draw(st.lists(st.integers(0, len(png) - 1), min_size=1,
                                           max_size=4), label="flips"):
            png[position] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    with recordio.IndexedRecordWriter(files / "d.idx", files / "d.rec") as writer:
        writer.write_idx(0, recordio.pack(recordio.IRHeader(0, 0.0, 0, 0), bytes(png)))
    it = ImageIter(1, (3, 8, 8), path_imgrec=str(files / "d.rec"),
                   path_imgidx=str(files / "d.idx"))
    try:
        batch = it.next()
    except ValueError as error:
        assert "d.rec, record key 0 (index 0)" in str(error)
    else:
        assert batch.data[0].shape == (1, 3, 8, 8)


def test_a_corrupt_record_names_the_file_the_record_and_the_index(files):
    with recordio.IndexedRecordWriter(files / "b.idx", files / "b.rec") as writer:
        for k in range(3):
            payload = _png(k) if k != 1 else b"\x89PNG broken"
            writer.write_idx(k, recordio.pack(recordio.IRHeader(0, float(k), k, 0), payload))
    it = ImageIter(3, (3, 8, 8), path_imgrec=str(files / "b.rec"),
                   path_imgidx=str(files / "b.idx"))
    with pytest.raises(ValueError, match=r"b\.rec, record key 1 \(index 1\)"):
        it.next()


def test_augmenter_output_of_the_wrong_shape_names_the_image(files):
    it = ImageIter(2, (3, 6, 6), aug_list=[], **_sources(files)["imglist"])
    with pytest.raises(ValueError, match=r"0\.png.*\(8, 10, 3\).*\(6, 6, 3\)"):
        it.next()


def test_workers_give_the_same_augmented_batches_and_resume_exactly(files):
    kwargs = dict(resize=9, rand_crop=True, rand_mirror=True, brightness=0.3, seed=4,
                  shuffle=True, **_sources(files)["rec+idx"])
    serial = ImageIter(3, (3, 8, 8), **kwargs)
    parallel = ImageIter(3, (3, 8, 8), num_workers=2, **kwargs)
    try:
        first = [serial.next() for _ in range(3)]
        second = [parallel.next() for _ in range(3)]
        for a, b in zip(first, second):
            assert np.array_equal(a.data[0], b.data[0]) and np.array_equal(a.label[0],
                                                                           b.label[0])
    finally:
        parallel.close()
    resumed = ImageIter(3, (3, 8, 8), **kwargs)
    serial.reset()
    state = serial.state_dict()
    expected = serial.next()
    resumed.load_state_dict(state)
    assert np.array_equal(resumed.next().data[0], expected.data[0])


def test_default_augmenters_come_from_create_augmenter(files):
    it = ImageIter(2, (3, 8, 8), resize=9, mean=True, **_sources(files)["imglist"])
    assert [a.dumps() for a in it.auglist] == [
        a.dumps() for a in CreateAugmenter((3, 8, 8), resize=9, mean=True)]
    assert IoImageIter is ImageIter


def test_num_workers_auto_gives_the_batches_of_0_and_3_workers(files):
    import dataset_kit

    def batches(workers):
        it = ImageIter(1, (3, 8, 8), shuffle=True, seed=2, rand_crop=True, rand_mirror=True,
                       num_workers=workers, **_sources(files)["lst"])
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
    with pytest.raises(ValueError, match="memory_limit is for num_workers='auto'"):
        ImageIter(1, (3, 8, 8), num_workers=2, memory_limit=1 << 30, **_sources(files)["lst"])
