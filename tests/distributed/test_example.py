"""examples/distributed_mpi.py runs as the README says, on 2 ranks resumed on 3 (and back)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.test_real_ranks import _has, _mpiexec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_mpi.py"


@pytest.mark.skipif(not _has("mpi4py"), reason="mpi4py is not installed: "
                    "pip install 'dataset_kit[mpi]'")
@pytest.mark.parametrize("before,after", [(2, 3), (3, 2)])
def test_the_example_sees_every_example_once(before, after):
    done = subprocess.run([_mpiexec(), "-n", str(before), sys.executable, str(EXAMPLE),
                           "--ranks-after", str(after)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{after} ranks resumed" in done.stdout
    assert "every example of the epoch seen exactly once: True" in done.stdout
