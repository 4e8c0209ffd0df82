"""The ``dataset-kit`` command: look at and fill the dataset cache, profile a script."""

from __future__ import annotations

import argparse
import os
import sys

from dataset_kit import download
from dataset_kit.shards import _cli as shards_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dataset-kit", description="Manage the dataset cache.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("root", help="print the dataset root directory",
                        description="Print the dataset root directory.")
    fetch = commands.add_parser("download", help="download a URL into the cache",
                                description="Download URL into the cache and print its path.")
    fetch.add_argument("url", help="http(s) or file:// URL, or a local path")
    fetch.add_argument("--sha256", help="expected sha256 hex digest of the file")
    fetch.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    im2rec = commands.add_parser(
        "im2rec", help="make .lst lists of images, or pack them into .rec/.idx record files",
        description="With --list, write PREFIX*.lst from the images under ROOT; without, pack "
                    "every PREFIX*.lst into .rec and .idx (MXNet's im2rec.py).")
    im2rec.add_argument("prefix", help="prefix of the .lst files (or a folder of them)")
    im2rec.add_argument("root", help="folder the image paths are relative to")
    im2rec.add_argument("--list", action="store_true", help="write .lst files instead of packing")
    im2rec.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"])
    im2rec.add_argument("--chunks", type=int, default=1)
    im2rec.add_argument("--train-ratio", type=float, default=1.0)
    im2rec.add_argument("--test-ratio", type=float, default=0.0)
    im2rec.add_argument("--recursive", action="store_true", help="one label per sub-folder")
    im2rec.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    im2rec.add_argument("--shuffle", dest="shuffle", action="store_true", default=True)
    im2rec.add_argument("--num-thread", type=int, default=1, help="worker processes")
    im2rec.add_argument("--resize", type=int, default=0, help="shorter side, pixels")
    im2rec.add_argument("--center-crop", action="store_true")
    im2rec.add_argument("--quality", type=int, default=95)
    im2rec.add_argument("--encoding", choices=[".jpg", ".png"], default=".jpg")
    im2rec.add_argument("--pass-through", action="store_true", help="store the original bytes")
    im2rec.add_argument("--color", type=int, choices=[-1, 0, 1], default=1)
    im2rec.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    shards_cli.add_parser(commands)
    prof = commands.add_parser(
        "profile", help="run a Python script and profile its data loading",
        description="Run SCRIPT with ARGS as __main__, recording every batch of every "
                    "dataset_kit iterator; print the report and write OUTPUT.json, "
                    "OUTPUT.trace.json (Perfetto) and OUTPUT.png (a text chart without "
                    "matplotlib), even when the script fails. Exits with the script's status.")
    prof.add_argument("script", help="the Python script to run")
    prof.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    prof.add_argument("--output", default="dataset_kit_profile",
                      help="path prefix of the files written (default: %(default)s)")
    return parser


def _profile(args: argparse.Namespace) -> int:
    import runpy
    import traceback

    from dataset_kit.engine.profiling import profile

    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        print(f"dataset-kit profile: error: no such script {script}", file=sys.stderr)
        return 2
    status = 0
    argv, path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *args.args]
    sys.path.insert(0, os.path.dirname(script))  # as `python script.py` would
    with profile() as p:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BaseException:  # the script's own error: shown as Python would, status 1
            traceback.print_exc()
            status = 1
        finally:
            sys.argv = argv
            if path0 is not None and sys.path and sys.path[0] == os.path.dirname(script):
                del sys.path[0]
    prefix = args.output
    p.save_json(prefix + ".json")
    p.save_trace(prefix + ".trace.json")
    picture = p.plot(prefix + ".png")
    print(p.report(), file=sys.stderr)
    if picture.endswith(".png"):
        print(f"dataset-kit profile: wrote {prefix}.json, {prefix}.trace.json, {picture}",
              file=sys.stderr)
    else:
        print(picture, file=sys.stderr)
        print(f"dataset-kit profile: wrote {prefix}.json, {prefix}.trace.json "
              f"(install matplotlib, the plot extra, for {prefix}.png)", file=sys.stderr)
    return status


def _im2rec(args: argparse.Namespace) -> int:
    from dataset_kit.recordio import im2rec

    if args.list:
        for path in im2rec.make_lists(args.prefix, args.root, args.recursive, args.exts,
                                      args.train_ratio, args.test_ratio, args.shuffle,
                                      args.chunks):
            print(path)
        return 0
    lists = im2rec.list_files_for(args.prefix)
    if not lists:
        raise FileNotFoundError(f"no .lst files for prefix {args.prefix}")
    skipped = 0
    for lst in lists:
        result = im2rec.pack_list(
            lst, args.root, num_thread=args.num_thread, resize=args.resize,
            center_crop=args.center_crop, quality=args.quality, encoding=args.encoding,
            pass_through=args.pass_through, color=args.color,
            progress=False if args.no_progress else None)
        for _path, reason in result["skipped"]:
            print(f"dataset-kit im2rec: skipped unreadable image {reason}", file=sys.stderr)
        skipped += len(result["skipped"])
        print(f"{result['rec']}: {result['records']} records")
    print(f"{skipped} unreadable images skipped" if skipped else "no image skipped")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Args:
        argv: the arguments (``sys.argv[1:]`` when None).

    Returns:
        0 on success, 1 when the operation failed, 2 for a usage error.
    """
    args = _parser().parse_args(argv)
    if args.command == "profile":
        return _profile(args)  # the script's own errors and status, not ours
    try:
        if args.command == "root":
            print(download.get_dataset_root())
        elif args.command == "im2rec":
            return _im2rec(args)
        elif args.command == "shards":
            return shards_cli.run(args)
        else:
            print(download.cached_download(
                args.url, sha256=args.sha256, progress=False if args.no_progress else None))
    except (OSError, ValueError) as error:
        print(f"dataset-kit: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
