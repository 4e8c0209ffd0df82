import os
import subprocess
import sys

import pytest

from dataset_kit.cli import main
from tests.http_server import Route


def test_root_prints_the_dataset_root(dataset_root, capsys):
    assert main(["root"]) == 0
    assert capsys.readouterr().out.strip() == str(dataset_root)


def test_download_prints_the_cached_path(http_server, dataset_root, capsys):
    route = Route(b"payload")
    url = http_server.add("/f.bin", route)
    assert main(["download", url, "--sha256", route.sha256, "--no-progress"]) == 0
    path = capsys.readouterr().out.strip()
    assert open(path, "rb").read() == b"payload"


def test_failures_go_to_stderr_without_traceback(http_server, dataset_root, capsys):
    assert main(["download", http_server.url("/missing")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "dataset-kit: error:" in captured.err and "404" in captured.err
    assert "Traceback" not in captured.err
    assert main(["download", "x", "--sha256", "nothex"]) == 1
    assert "sha256" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


@pytest.mark.parametrize("args", [["--help"], ["root", "--help"], ["download", "--help"]])
def test_console_script_has_help_for_each_command(args):
    exe = os.path.join(os.path.dirname(sys.executable), "dataset-kit")
    result = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "usage: dataset-kit" in result.stdout
