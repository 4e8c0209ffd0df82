"""Language-model inputs: packing against Grain, mixture overhead, state size, elastic resume.

Rows (interleaved rounds, medians):

* packing throughput in tokens/s: documents of long-tailed lengths (log-normal,
  median 300, at most 8192 tokens, cut into pieces of at most ``length`` first,
  as Grain refuses longer ones), ``length=2048``, first-fit with 16 bins:
  ``pack(method="first_fit")`` (its plan, then every sequence) against Grain's
  ``FirstFitPackIterDataset`` on the same documents (goal: at least 2x);
* the mixture's overhead: the examples of a 3-source mixture of in-memory
  arrays against the same number read from its largest source alone, in a
  shuffled order as the mixture reads each source, batches of 256 (goal: at
  most 5%);
* the state after 10**9 examples over 16 sources with packing: the mixture's
  state plus the iterator's, as JSON bytes;
* the first batch on 3 ranks resumed from a 2-rank checkpoint, beside a fresh
  3-rank start (which documents each sequence holds).

Run: python benchmarks/tokens.py [--docs 200000] [--rounds 3] [--overhead-rounds 11]
(Grain's row needs ``pip install grain``; without it the row says so.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import median_of  # noqa: E402

from dataset_kit.datasets import mix, pack  # noqa: E402
from dataset_kit.distributed import ShardedIterator  # noqa: E402
from dataset_kit.iterators import SerialIterator  # noqa: E402

LENGTH, BINS = 2048, 16


def documents(n: int, seed: int = 0) -> list[dict]:
    """Token documents of long-tailed lengths, cut into pieces of at most LENGTH."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(np.log(300), 1.0, n).astype(np.int64) + 1, 8192)
    docs = []
    for n_tokens in lengths.tolist():
        tokens = rng.integers(1, 50000, n_tokens, dtype=np.int32)
        docs += [{"tokens": tokens[s:s + LENGTH]} for s in range(0, n_tokens, LENGTH)]
    return docs


def packing(docs: list[dict], rounds: int) -> None:
    tokens = sum(len(d["tokens"]) for d in docs)

    def ours() -> None:
        packed = pack(docs, LENGTH, method="first_fit", num_bins=BINS)
        for start in range(0, len(packed), 256):
            packed[start:start + 256]

    candidates = {"dataset_kit": ours}
    try:
        import grain
    except ImportError:
        grain = None
    if grain is not None:
        def grains() -> None:
            source = grain.MapDataset.source(docs).to_iter_dataset()
            for _ in grain.experimental.FirstFitPackIterDataset(
                    source, length_struct={"tokens": LENGTH}, num_packing_bins=BINS,
                    shuffle_bins=False):
                pass
        candidates["grain"] = grains
    seconds = median_of(rounds, **candidates)
    for name, s in seconds.items():
        print(f"packing  {name:12s} {tokens / s / 1e6:8.2f} M tokens/s  ({len(docs)} documents, "
              f"{tokens} tokens, median of {rounds})")
    if "grain" in seconds:
        print(f"packing  dataset_kit / grain: {seconds['grain'] / seconds['dataset_kit']:.1f}x")
    else:
        print("packing  grain: not installed (pip install grain)")


def overhead(rounds: int) -> None:
    rng = np.random.default_rng(1)
    sources = [rng.integers(0, 50000, (n, 64), dtype=np.int32) for n in (300_000, 100_000,
                                                                        50_000)]
    mixture = mix(sources, [0.6, 0.25, 0.15], seed=0, stop="first_exhausted")
    n = len(mixture) - len(mixture) % 256

    def read(dataset, shuffle: bool) -> None:
        it = SerialIterator(dataset, 256, repeat=True, shuffle=shuffle)
        for _, _ in zip(range(n // 256), it):
            pass

    # The baseline: the largest source alone, read as the mixture reads it
    # (in a fresh permutation per epoch), by the same iterator and batch size;
    # the mixture itself is read in order. Interleaved rounds, medians.
    baseline = (f"baseline: its largest source alone ({len(sources[0])} rows of 64 int32), "
                f"shuffled, same SerialIterator, batch 256")
    seconds = median_of(rounds, largest=lambda: read(sources[0], True),
                        mixture=lambda: read(mixture, False))
    print(f"mixture  arrays: overhead {seconds['mixture'] / seconds['largest'] - 1:+.1%}, "
          f"median of {rounds} interleaved rounds ({n} examples of 3 array sources, weights "
          f"0.6/0.25/0.15: mixture {seconds['mixture']:.3f} s; {baseline} "
          f"{seconds['largest']:.3f} s)")
    # Token documents as dicts, each built when read (a list of arrays here):
    # what a tokenized corpus usually is.
    documents = [[{"tokens": row} for row in source] for source in sources]
    mixture = mix(documents, [0.6, 0.25, 0.15], seed=0, stop="first_exhausted")
    seconds = median_of(rounds, largest=lambda: read(documents[0], True),
                        mixture=lambda: read(mixture, False))
    print(f"mixture  documents: overhead {seconds['mixture'] / seconds['largest'] - 1:+.1%}, "
          f"median of {rounds} interleaved rounds ({n} examples of 3 lists of dicts: mixture "
          f"{seconds['mixture']:.3f} s; baseline: its largest source alone, shuffled, same "
          f"iterator, {seconds['largest']:.3f} s)")


def state_size() -> None:
    sources = [[{"tokens": np.arange(100 + s, dtype=np.int32)}] * 1000 for s in range(16)]
    mixture = mix(sources, [1] * 16, seed=0, stop="never")
    packed = pack(mix(sources, [1] * 16, seed=0, stop="all_exhausted"), LENGTH)
    it = SerialIterator(packed, 8, shuffle=False)
    next(it)
    state = {"mixture": mixture.state_at(10**9), "iterator": it.state_dict()}
    print(f"state    after 10**9 examples over 16 sources with packing: "
          f"{len(json.dumps(state))} bytes of JSON (mixture {len(json.dumps(state['mixture']))}, "
          f"iterator {len(json.dumps(state['iterator']))})")


def elastic_resume() -> None:
    from tests.distributed.thread_ranks import run_ranks, unwrap

    docs = documents(2000, seed=3)
    sources = [docs[:1200], docs[1200:]]
    packed = pack(mix(sources, [2, 1], seed=0, stop="all_exhausted"), LENGTH)

    # A sequence is named by its index: its first token and document count find it.
    names = {(int(e["tokens"][0]), int(e["tokens_segment_ids"].max())): j
             for j, e in enumerate(packed[:])}

    def first_batch(state: dict | None, ranks: int) -> list:
        def body(comm):
            it = ShardedIterator(packed, 2, comm, shuffle=False, seed=0)
            if state is not None:
                it.load_state_dict(state)
            return [names[(int(e["tokens"][0]), int(e["tokens_segment_ids"].max()))]
                    for e in next(it)]
        return unwrap(run_ranks(ranks, body))

    def after_two_ranks(steps: int) -> dict:
        def body(comm):
            it = ShardedIterator(packed, 2, comm, shuffle=False, seed=0)
            for _ in range(steps):
                next(it)
            return it.state_dict()
        return unwrap(run_ranks(2, body))[0]

    state = after_two_ranks(5)
    print(f"resume   {len(packed)} packed sequences; 2 ranks took 5 batches of 2 (20 sequences),"
          f" then:")
    print(f"         3 ranks resumed, first batch per rank: {first_batch(state, 3)}")
    print(f"         3 ranks fresh,   first batch per rank: {first_batch(None, 3)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overhead-rounds", type=int, default=11,
                        help="rounds of the mixture rows (a few ms each, and noisy)")
    args = parser.parse_args()
    start = time.perf_counter()
    packing(documents(args.docs), args.rounds)
    overhead(args.overhead_rounds)
    state_size()
    elastic_resume()
    print(f"(all rows in {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
