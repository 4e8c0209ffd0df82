"""``dataset-kit shards write``: a dataset, a .lst, WebDataset tars or Parquet into shards."""

from __future__ import annotations

import argparse
import os
import sys

from tqdm import tqdm


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add the ``shards`` sub-command to the ``dataset-kit`` parser."""
    shards = commands.add_parser("shards", help="write streaming shards",
                                 description="Write shards for StreamingDataset.")
    actions = shards.add_subparsers(dest="shards_command", required=True)
    write = actions.add_parser(
        "write", help="convert a dataset, an im2rec .lst, WebDataset .tar shards or Parquet",
        description="Convert SOURCE into shards plus a manifest at OUT (a folder or a URL). "
                    "SOURCE is module:name (a dataset_kit dataset), a .lst file (with --root), "
                    "a folder of WebDataset .tar files, or Parquet: a .parquet file, a glob, "
                    "a folder of .parquet files or a URL.")
    write.add_argument("source")
    write.add_argument("out")
    write.add_argument("--root", help="folder the .lst image paths are relative to")
    write.add_argument("--shard-size", type=int, default=64 << 20, help="bytes per shard")
    write.add_argument("--compression", choices=["zstd"], default=None,
                       help="compress each sample (format shards; Parquet pages are zstd)")
    write.add_argument("--format", choices=["shards", "parquet"], default="shards",
                       help="the shard files: our layout (default) or Parquet")
    write.add_argument("--overwrite", action="store_true", help="replace a dataset at OUT")
    write.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Run ``dataset-kit shards write``; print a summary; return the exit code."""
    from dataset_kit.shards import ShardWriter, convert

    total: int | None  # unknown for WebDataset folders
    if args.source.endswith(".lst"):
        columns, total, samples = convert.from_lst(
            args.source, args.root or os.path.dirname(args.source))
    elif convert.is_parquet(args.source):
        columns, total, samples = convert.from_parquet(args.source)
    elif os.path.isdir(args.source):
        columns, total, samples = convert.from_webdataset(args.source)
    else:
        columns, total, samples = convert.from_dataset(convert.load_dataset(args.source))
    with ShardWriter(args.out, columns, shard_size=args.shard_size,
                     compression=args.compression, overwrite=args.overwrite,
                     format=args.format) as writer:
        for sample in tqdm(samples, total=total, unit="sample", file=sys.stderr,
                           disable=args.no_progress or not sys.stderr.isatty()):
            writer.write(sample)
    manifest = writer.manifest
    size = sum(s.bytes for s in manifest.shards)
    print(f"{args.out}: {manifest.samples} samples in {len(manifest.shards)} "
          f"{'Parquet ' if args.format == 'parquet' else ''}shards, "
          f"{size} bytes; columns " + ", ".join(f"{k} ({v})" for k, v in columns.items()))
    return 0
