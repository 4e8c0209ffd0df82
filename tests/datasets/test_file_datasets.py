"""File-backed datasets: content, errors, and every iterator kind and start method."""

import json
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest
from PIL import Image

from dataset_kit import concat_examples
from dataset_kit.datasets import (
    CSVArrayDataset,
    ImageDataset,
    ImageFolderDataset,
    LabeledImageDataset,
    LabeledZippedImageDataset,
    MultiZippedImageDataset,
    PickleDataset,
    TextDataset,
    ZippedImageDataset,
    open_pickle_dataset,
    open_pickle_dataset_writer,
)
from dataset_kit.image import CorruptImageError
from dataset_kit.iterators import MultiprocessIterator, MultithreadIterator, SerialIterator


def write_image(path, value, mode="RGB", size=(5, 4)):
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    pixels = np.full((size[1], size[0], channels), value, np.uint8).squeeze()
    Image.fromarray(pixels, mode).save(path)


@pytest.fixture
def folder(tmp_path):
    for name, count in (("cat", 3), ("dog", 2)):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for k in range(count):
            write_image(tmp_path / "imgs" / name / f"{k}.png", 10 * k + (name == "dog"))
    (tmp_path / "imgs" / "dog" / "notes.txt").write_text("not an image")
    return tmp_path / "imgs"


def test_image_datasets_give_chw_arrays_with_chainers_channels(tmp_path):
    write_image(tmp_path / "rgb.png", 7)
    write_image(tmp_path / "gray.png", 9, "L")
    write_image(tmp_path / "rgba.png", 3, "RGBA")
    (tmp_path / "list.txt").write_text("rgb.png\ngray.png\nrgba.png\n")
    images = ImageDataset(str(tmp_path / "list.txt"), root=str(tmp_path))
    assert [images[k].shape for k in range(3)] == [(3, 4, 5), (1, 4, 5), (4, 4, 5)]
    assert images[0].dtype == np.float32 and images[1][0, 0, 0] == 9
    (tmp_path / "pairs.txt").write_text("rgb.png 2\ngray.png 5\n")
    labeled = LabeledImageDataset(str(tmp_path / "pairs.txt"), root=str(tmp_path),
                                  dtype=np.uint8)
    image, label = labeled[1]
    assert image.dtype == np.uint8 and label == 5 and label.dtype == np.int32


def test_zipped_image_datasets(tmp_path):
    write_image(tmp_path / "a.png", 1)
    write_image(tmp_path / "b.png", 2)
    for name, members in (("one.zip", ["a.png", "b.png"]), ("two.zip", ["b.png"])):
        with zipfile.ZipFile(tmp_path / name, "w") as zf:
            zf.writestr("dir/", "")
            for member in members:
                zf.write(tmp_path / member, member)
    one = ZippedImageDataset(str(tmp_path / "one.zip"))
    assert len(one) == 2 and one[1][0, 0, 0] == 2 and one.get_example("a.png")[0, 0, 0] == 1
    both = MultiZippedImageDataset([str(tmp_path / "one.zip"), str(tmp_path / "two.zip")])
    assert [int(both[k][0, 0, 0]) for k in range(3)] == [1, 2, 2]
    (tmp_path / "labels.txt").write_text("b.png 7\na.png 8\n")
    labeled = LabeledZippedImageDataset(str(tmp_path / "one.zip"), str(tmp_path / "labels.txt"))
    assert labeled[0][0][0, 0, 0] == 2 and labeled[0][1] == 7
    clone = pickle.loads(pickle.dumps(one))
    assert clone[0][0, 0, 0] == 1


def test_image_folder_lists_classes_in_sorted_order(folder):
    dataset = ImageFolderDataset(folder)
    assert dataset.classes == ["cat", "dog"] and len(dataset) == 5
    assert [int(label) for _, label in (dataset[k] for k in range(5))] == [0, 0, 0, 1, 1]
    assert int(dataset[4][0][0, 0, 0]) == 11
    assert len(ImageFolderDataset(folder, extensions=[".jpg"])) == 0


def test_image_folder_synsets_are_gluons_name_for_the_classes(folder):
    dataset = ImageFolderDataset(folder)
    assert dataset.synsets == ["cat", "dog"] == dataset.classes
    assert [dataset.synsets[label] for _, label in dataset.items] == ["cat"] * 3 + ["dog"] * 2


def test_a_corrupt_image_names_the_file_and_the_example(tmp_path):
    write_image(tmp_path / "good.png", 1)
    data = (tmp_path / "good.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[:len(data) // 2])
    (tmp_path / "text.png").write_text("no")
    dataset = ImageDataset(["good.png", "cut.png", "text.png"], root=str(tmp_path))
    for k, name in ((1, "cut.png"), (2, "text.png")):
        with pytest.raises(CorruptImageError, match=f"{name} \\(example {k}\\)"):
            dataset[k]


def test_without_pillow_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"dataset_kit\[image\]"):
        ImageDataset(["x.png"], root=str(tmp_path))


def test_text_dataset_reads_lines_by_offset(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n\nfour")
    (tmp_path / "b.txt").write_text("1\n2\n3\n4\n")
    single = TextDataset(str(tmp_path / "a.txt"))
    assert [single[k] for k in range(4)] == ["one\n", "two\n", "\n", "four"]
    both = TextDataset([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")],
                       filter_func=lambda a, b: a.strip() != "")
    assert len(both) == 3 and both[2] == ("four", "4\n")
    (tmp_path / "c.txt").write_text("1\n")
    with pytest.raises(ValueError, match="different numbers of lines"):
        TextDataset([str(tmp_path / "a.txt"), str(tmp_path / "c.txt")])
    single.close()
    with pytest.raises(ValueError):
        single[0]


def test_pickle_dataset_writer_publishes_on_close_and_reads_back(tmp_path):
    path = tmp_path / "examples.pkl"
    with open_pickle_dataset_writer(path) as writer:
        for k in range(4):
            writer.write({"k": k, "x": np.arange(k)})
        assert not path.exists()  # nothing that looks complete before close()
    with open_pickle_dataset(path) as dataset:
        assert len(dataset) == 4 and dataset[3]["x"].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError):
        with open_pickle_dataset_writer(tmp_path / "failed.pkl") as writer:
            writer.write(1)
            raise RuntimeError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples.pkl"]
    with pytest.raises(ValueError, match="random access"):
        PickleDataset(type("NoSeek", (), {"seekable": lambda self: False})())


def make_datasets(root):
    """Every file-backed dataset over the same 6 examples (built in the test's directory)."""
    root.mkdir(exist_ok=True)
    (root / "lines.txt").write_text("".join(f"line {k}\n" for k in range(6)))
    np.savetxt(root / "rows.csv", np.arange(12.0).reshape(6, 2), delimiter=",", fmt="%g")
    with open_pickle_dataset_writer(root / "p.pkl") as writer:
        for k in range(6):
            writer.write(np.full(3, k))
    names = []
    for k in range(6):
        write_image(root / f"{k}.png", k)
        names.append(f"{k}.png")
    return {
        "text": TextDataset(str(root / "lines.txt")),
        "csv": CSVArrayDataset(root / "rows.csv", (2,)),
        "pickle": open_pickle_dataset(root / "p.pkl"),
        "images": ImageDataset(names, root=str(root)),
    }


def as_keys(batch):
    if isinstance(batch[0], str):
        return list(batch)
    return concat_examples(batch).tolist()


@pytest.mark.parametrize("kind", ["text", "csv", "pickle", "images"])
@pytest.mark.parametrize("make", ["thread", "fork", "spawn"])
def test_every_file_dataset_gives_the_serial_batches_in_every_iterator_and_resumes(
        tmp_path, kind, make):
    dataset = make_datasets(tmp_path / "data")[kind]
    serial = SerialIterator(dataset, 4, seed=3)
    expected = [as_keys(next(serial)) for _ in range(5)]
    if make == "thread":
        it = MultithreadIterator(dataset, 4, seed=3, n_threads=2)
    else:
        it = MultiprocessIterator(dataset, 4, seed=3, n_processes=2, start_method=make)
    with it:
        got = [as_keys(next(it)) for _ in range(2)]
        state = json.loads(json.dumps(it.state_dict()))
    assert got == expected[:2]
    resumed = SerialIterator(dataset, 4)
    resumed.load_state_dict(state)
    assert [as_keys(next(resumed)) for _ in range(3)] == expected[2:]


def test_draft_size_decodes_jpegs_at_a_reduced_scale_still_large_enough(tmp_path,
                                                                         jpeg_decoder):
    (tmp_path / "c").mkdir()
    Image.fromarray(np.full((375, 500, 3), 90, np.uint8)).save(tmp_path / "c" / "a.jpg")
    write_image(tmp_path / "c" / "b.png", 5, size=(500, 375))
    full = ImageFolderDataset(tmp_path, dtype=np.uint8)
    small = ImageFolderDataset(tmp_path, dtype=np.uint8, draft_size=(128, 128))
    assert full[0][0].shape == (3, 375, 500)
    assert small[0][0].shape == (3, 188, 250)  # 1/2 scale: 1/4 would be under 128
    assert abs(int(small[0][0].mean()) - 90) <= 2
    assert small[1][0].shape == (3, 375, 500)  # a PNG decodes in full


@pytest.fixture(params=["simplejpeg", "pillow"])
def jpeg_decoder(request, monkeypatch):
    """Run a JPEG test with simplejpeg and with Pillow alone."""
    if request.param == "pillow":
        monkeypatch.setitem(sys.modules, "simplejpeg", None)
    return request.param


def test_jpegs_decode_to_the_same_pixels_with_either_decoder(tmp_path, jpeg_decoder):
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 255, (37, 53, 3), dtype=np.uint8)).save(tmp_path / "c.jpg")
    Image.fromarray(rng.integers(0, 255, (37, 53), dtype=np.uint8)).save(tmp_path / "g.jpg")
    data = ImageDataset(["c.jpg", "g.jpg"], root=str(tmp_path), dtype=np.uint8)
    color, gray = data[0], data[1]
    with Image.open(tmp_path / "c.jpg") as im:
        assert np.array_equal(color, np.asarray(im).transpose(2, 0, 1))
    with Image.open(tmp_path / "g.jpg") as im:
        assert np.array_equal(gray, np.asarray(im)[np.newaxis])
    raw = (tmp_path / "c.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(CorruptImageError, match=r"cut.jpg \(example 0\)"):
        ImageDataset(["cut.jpg"], root=str(tmp_path))[0]


def test_image_datasets_and_iterators_import_the_decoders_before_workers_fork(tmp_path):
    """Made in the parent, they leave Pillow, simplejpeg and OpenCV imported there, so that
    forked workers inherit them instead of importing them again for every iterator."""
    pytest.importorskip("simplejpeg", reason="checks that simplejpeg is imported early")
    pytest.importorskip("cv2", reason="checks that OpenCV is imported early")
    import subprocess
    import textwrap

    from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack_img

    (tmp_path / "a").mkdir()
    pixels = np.zeros((8, 8, 3), np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a" / "x.jpg")
    with IndexedRecordWriter(tmp_path / "t.idx", tmp_path / "t.rec") as writer:
        writer.write_idx(0, pack_img(IRHeader(0, 0.0, 0, 0), pixels))
    child = textwrap.dedent(f"""
        import sys
        def loaded():
            return sorted(m for m in ("simplejpeg", "cv2") if m in sys.modules)
        from dataset_kit.datasets import ImageFolderDataset, LabeledImageDataset
        from dataset_kit.io import ImageRecordIter
        assert loaded() == [], loaded()
        ImageFolderDataset({str(tmp_path)!r})
        assert loaded() == ["simplejpeg"], loaded()
        it = ImageRecordIter({str(tmp_path / "t.rec")!r}, (3, 8, 8), 1, preprocess_threads=2)
        assert loaded() == ["cv2", "simplejpeg"], loaded()
        it.close()
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
