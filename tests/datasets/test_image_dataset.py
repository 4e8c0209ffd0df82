"""Zipped image datasets: a decode error names the example index, the member and the zip."""

import re
import zipfile

import numpy as np
import pytest
from PIL import Image

from dataset_kit.datasets import (
    LabeledZippedImageDataset,
    MultiZippedImageDataset,
    ZippedImageDataset,
)
from dataset_kit.image import CorruptImageError


@pytest.fixture
def archives(tmp_path):
    """one.zip: good.png, cut.png; two.zip: good.png, text.png; labels for one.zip."""
    Image.fromarray(np.full((4, 5, 3), 7, np.uint8)).save(tmp_path / "good.png")
    good = (tmp_path / "good.png").read_bytes()
    members = {"one.zip": {"good.png": good, "cut.png": good[:len(good) // 2]},
               "two.zip": {"good.png": good, "text.png": b"no image"}}
    for archive, files in members.items():
        with zipfile.ZipFile(tmp_path / archive, "w") as zf:
            for name, body in files.items():
                zf.writestr(name, body)
    (tmp_path / "labels.txt").write_text("good.png 1\ngood.png 2\ncut.png 3\n")
    return tmp_path


def _refusal(dataset, index) -> str:
    with pytest.raises(CorruptImageError) as error:
        dataset[index]
    return str(error.value)


def test_zipped_image_dataset_names_index_member_and_zip(archives):
    message = _refusal(ZippedImageDataset(str(archives / "one.zip")), 1)
    assert re.search(r"cut\.png in .*one\.zip \(example 1\)", message)


def test_multi_zipped_image_dataset_names_its_own_index(archives):
    both = MultiZippedImageDataset([str(archives / "one.zip"), str(archives / "two.zip")])
    assert re.search(r"cut\.png in .*one\.zip \(example 1\)", _refusal(both, 1))
    # The fourth example is the second member of the second archive.
    assert re.search(r"text\.png in .*two\.zip \(example 3\)", _refusal(both, 3))


def test_labeled_zipped_image_dataset_names_the_index_not_only_the_member(archives):
    labeled = LabeledZippedImageDataset(str(archives / "one.zip"), str(archives / "labels.txt"))
    assert labeled[1][1] == 2
    assert re.search(r"cut\.png in .*one\.zip \(example 2\)", _refusal(labeled, 2))


def test_a_member_asked_by_name_is_named_without_an_index(archives):
    with pytest.raises(CorruptImageError, match=r"cut\.png in .*one\.zip: "):
        ZippedImageDataset(str(archives / "one.zip")).get_example("cut.png")
