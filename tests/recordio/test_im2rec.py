"""dataset-kit im2rec, record datasets and ImageRecordIter."""

import json
import random

import numpy as np
import pytest
from PIL import Image

from dataset_kit.cli import main
from dataset_kit.datasets import ImageRecordDataset, RecordFileDataset
from dataset_kit.io import ImageRecordIter
from dataset_kit.recordio import im2rec, unpack


@pytest.fixture
def tree(tmp_path):
    rng = np.random.default_rng(0)
    for folder, count in (("cats", 4), ("dogs", 3)):
        (tmp_path / "imgs" / folder).mkdir(parents=True)
        for k in range(count):
            pixels = rng.integers(0, 255, (30 + k, 40, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "imgs" / folder / f"{k}.jpg")
    (tmp_path / "imgs" / "dogs" / "broken.jpg").write_text("not an image")
    return tmp_path


def test_lists_follow_mxnets_rules(tree):
    root = str(tree / "imgs")
    (path,) = im2rec.make_lists(str(tree / "all"), root, recursive=True, shuffle=False)
    lines = open(path).read().splitlines()
    assert lines[0] == "0\t0.000000\tcats/0.jpg" and lines[-1] == "7\t1.000000\tdogs/broken.jpg"
    items = im2rec.list_images(root, True, im2rec.DEFAULT_EXTS)
    random.Random(100).shuffle(items)
    shuffled = im2rec.make_lists(str(tree / "s"), root, recursive=True)
    assert [int(x.split("\t")[0]) for x in open(shuffled[0])] == [i for i, *_ in items]
    split = im2rec.make_lists(str(tree / "p"), root, recursive=True, train_ratio=0.5,
                              test_ratio=0.25, chunks=2)
    assert [p.rsplit("/", 1)[1] for p in split] == [
        "p_0_test.lst", "p_0_val.lst", "p_0_train.lst", "p_1_test.lst", "p_1_val.lst",
        "p_1_train.lst"]
    with pytest.raises(ValueError, match="test_ratio must lie in \\[0, 1\\], got 1.5"):
        im2rec.make_lists(str(tree / "x"), root, test_ratio=1.5)


def test_a_test_ratio_with_the_default_train_ratio_lists_everything_as_mxnet_does(tree):
    # MXNet's im2rec.py --list --test-ratio=0.2: the train ratio stays 1, so one .lst
    # holds every image (the tutorial's later cells read it).
    root = str(tree / "imgs")
    assert main(["im2rec", "--list", "--recursive", "--test-ratio=0.2", str(tree / "t"),
                 root]) == 0
    assert sorted(p.name for p in tree.glob("t*.lst")) == ["t.lst"]
    assert (tree / "t.lst").read_text() == open(im2rec.make_lists(
        str(tree / "all"), root, recursive=True)[0]).read()
    # Ratios adding up to more than 1: the test list first, the train list gets the rest.
    lists = im2rec.make_lists(str(tree / "x"), root, recursive=True, train_ratio=0.8,
                              test_ratio=0.5)
    assert [p.rsplit("/", 1)[1] for p in lists] == ["x_test.lst", "x_train.lst"]
    assert [len(open(p).readlines()) for p in lists] == [4, 4]


def test_packing_reads_back_with_the_right_labels_and_skips_unreadable_images(tree, capsys):
    root = str(tree / "imgs")
    assert main(["im2rec", "--list", "--recursive", "--no-shuffle", str(tree / "all"), root]) == 0
    assert main(["im2rec", "--num-thread", "2", "--resize", "24", "--no-progress",
                 str(tree / "all"), root]) == 0
    out, err = capsys.readouterr()
    assert "7 records" in out and "1 unreadable images skipped" in out
    assert "broken.jpg" in err
    dataset = ImageRecordDataset(str(tree / "all.rec"))
    assert [label for _, label in (dataset[k] for k in range(len(dataset)))] == \
        [0.0] * 4 + [1.0] * 3
    assert min(dataset[0][0].shape[:2]) == 24 and dataset[0][0].shape[2] == 3
    header, _ = unpack(RecordFileDataset(str(tree / "all.rec"))[5])
    assert header.id == 5


def test_multi_labels_pass_through_and_grayscale(tree):
    root = tree / "imgs"
    lst = tree / "multi.lst"
    lst.write_text("0\t1.000000\t2.500000\tcats/0.jpg\n1\t0.000000\t3.000000\tcats/1.jpg\n")
    result = im2rec.pack_list(str(lst), str(root), pass_through=True, progress=False)
    assert result["records"] == 2 and result["skipped"] == []
    image, label = ImageRecordDataset(str(tree / "multi.rec"))[1]
    assert label.tolist() == [0.0, 3.0]
    header, payload = unpack(RecordFileDataset(str(tree / "multi.rec"))[0])
    assert bytes(payload) == (root / "cats" / "0.jpg").read_bytes()
    im2rec.pack_list(str(lst), str(root), color=0, encoding=".png", progress=False)
    gray, _ = ImageRecordDataset(str(tree / "multi.rec"), flag=0)[0]
    assert gray.ndim == 2
    (tree / "bad.lst").write_text("0\tcats/0.jpg\n")
    with pytest.raises(ValueError, match="bad.lst, line 1"):
        im2rec.pack_list(str(tree / "bad.lst"), str(root))


@pytest.fixture
def records(tree):
    root = str(tree / "imgs")
    im2rec.make_lists(str(tree / "r"), root, recursive=True, exts=[".jpg"], shuffle=False)
    (tree / "r.lst").write_text("".join(line for line in open(tree / "r.lst")
                                        if "broken" not in line))
    im2rec.pack_list(str(tree / "r.lst"), root, progress=False)
    return str(tree / "r.rec")


def batches(it, count):
    out = []
    for _ in range(count):
        try:
            b = next(it)
        except StopIteration:
            it.reset()
            b = next(it)
        out.append((b.data[0].round(4).tolist(), b.label[0].tolist(), b.pad))
    return out


def test_image_record_iter_gives_the_same_augmented_batches_for_any_workers_and_resumes(records):
    kwargs = dict(data_shape=(3, 24, 24), batch_size=3, resize=28, rand_crop=True,
                  rand_mirror=True, shuffle=True, seed=4, mean_r=120, mean_g=110, mean_b=100,
                  std_r=60, std_g=60, std_b=60)
    serial = ImageRecordIter(records, preprocess_threads=0, **kwargs)
    expected = batches(serial, 7)
    with_workers = ImageRecordIter(records, preprocess_threads=2, **kwargs)
    assert batches(with_workers, 3) == expected[:3]
    state = json.loads(json.dumps(with_workers.state_dict()))
    with_workers.close()
    resumed = ImageRecordIter(records, preprocess_threads=2, **kwargs)
    resumed.load_state_dict(state)
    assert batches(resumed, 4) == expected[3:]
    resumed.close()
    serial.reset()
    batch = next(serial)
    assert serial.provide_data[0].shape == (3, 3, 24, 24)
    assert batch.data[0].shape == (3, 3, 24, 24) and batch.data[0].dtype == np.float32
    assert batch.label[0].dtype == np.float32


def test_image_record_iter_without_augmentation_is_a_centre_crop_normalised(records):
    it = ImageRecordIter(records, data_shape=(3, 20, 20), batch_size=7, preprocess_threads=0,
                         mean_r=10, std_r=2)
    batch = next(it)
    image, label = ImageRecordDataset(records)[0]
    top, left = (image.shape[0] - 20) // 2, (image.shape[1] - 20) // 2
    crop = image[top:top + 20, left:left + 20].astype(np.float32)
    np.testing.assert_allclose(batch.data[0][0, 0], (crop[:, :, 0] - 10) / 2)
    np.testing.assert_allclose(batch.data[0][0, 1], crop[:, :, 1])
    assert batch.label[0].tolist() == [0.0] * 4 + [1.0] * 3
    with pytest.raises(ValueError, match="data_shape"):
        ImageRecordIter(records, data_shape=(2, 20, 20), batch_size=2)


@pytest.fixture
def forty(tmp_path):
    """40 images in 4 folders; images 5, 22 and 37 (in list order) are unreadable."""
    rng = np.random.default_rng(1)
    broken = {5, 22, 37}
    for n in range(40):
        folder = tmp_path / "imgs" / f"c{n // 10}"
        folder.mkdir(parents=True, exist_ok=True)
        if n in broken:
            (folder / f"{n:02d}.jpg").write_text("not an image")
        else:
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
                folder / f"{n:02d}.jpg")
    return tmp_path, broken


@pytest.mark.parametrize("how", ["stderr is a pipe", "--no-progress"])
def test_keys_and_skipped_files_do_not_depend_on_the_progress_bar(forty, how):
    import subprocess
    import sys

    tmp_path, broken = forty
    root = str(tmp_path / "imgs")
    (lst,) = im2rec.make_lists(str(tmp_path / "all"), root, recursive=True, shuffle=True)
    items = list(im2rec.read_list(lst))
    command = [sys.executable, "-m", "dataset_kit.cli", "im2rec", str(tmp_path / "all"), root]
    if how == "--no-progress":
        command.append("--no-progress")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    keys = [int(line.split("\t")[0]) for line in open(tmp_path / "all.idx")]
    broken_paths = {f"c{n // 10}/{n:02d}.jpg" for n in broken}
    want = [index for index, path, *_ in items if path not in broken_paths]
    assert keys == want and len(set(keys)) == 37
    reported = [line for line in done.stderr.splitlines() if "skipped unreadable" in line]
    assert sorted(p for p in broken_paths if any(p in line for line in reported)) == \
        sorted(broken_paths) and len(reported) == 3
    dataset = RecordFileDataset(str(tmp_path / "all.rec"))
    by_index = {index: path for index, path, *_ in items}
    for k in range(len(dataset)):
        header, payload = unpack(dataset[k])
        assert header.id == keys[k]
        name = by_index[header.id]
        assert header.label == float(name[1])  # folder c<label>
