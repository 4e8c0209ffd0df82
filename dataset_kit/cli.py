"""The ``dataset-kit`` command: look at and fill the dataset cache."""

from __future__ import annotations

import argparse
import sys

from dataset_kit import download


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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Args:
        argv: the arguments (``sys.argv[1:]`` when None).

    Returns:
        0 on success, 1 when the operation failed, 2 for a usage error.
    """
    args = _parser().parse_args(argv)
    try:
        if args.command == "root":
            print(download.get_dataset_root())
        else:
            print(download.cached_download(
                args.url, sha256=args.sha256, progress=False if args.no_progress else None))
    except (OSError, ValueError) as error:
        print(f"dataset-kit: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
