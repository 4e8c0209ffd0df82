"""A Gluon training loop over dataset_kit's DataLoader trains, and resumes mid-epoch exactly.

Our own loop in Gluon's idiom (gluon_loop_script.py beside this file: an MXNet
network, ``gluon.Trainer`` and ``autograd`` over ``dataset_kit.loader``'s MNIST and
DataLoader) runs on a small synthetic MNIST in the IDX format. A run checkpointed
in the middle of an epoch (the loader's state, the parameters and the trainer's
states) and resumed ends with the very parameters and history of an
uninterrupted run. Runs where MXNet 1.9.1 is installed (CI's numpy<2 environment).
"""

import gzip

import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from tests.peers import gluon_loop_script  # noqa: E402

# 600 training examples in batches of 20: 30 batches an epoch; batch 40 is the tenth
# of the second epoch.
N_TRAIN, N_TEST, BATCH, EPOCHS, STOP_AFTER = 600, 200, 20, 3, 40


def write_idx(path, array, magic):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def write_synthetic_mnist(folder, counts=(("train", N_TRAIN), ("t10k", N_TEST))):
    """Digits a small MLP can learn: label k lights rows 2k + 4 .. 2k + 6 of the image."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    for prefix, n in counts:
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
        for k, label in enumerate(labels):
            images[k, 2 * label + 4:2 * label + 7, 4:24] = 255
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images, 2051)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels, 2049)


def parameters(net):
    # By position: Gluon's names carry a process-wide counter (dense0_, dense2_, ...).
    return [p.data().asnumpy() for p in net.collect_params().values()]


WORKERS = {"serial": [], "threads": ["--num-workers", "2", "--thread-pool"],
           "processes": ["--num-workers", "2"]}


@pytest.mark.parametrize("workers", sorted(WORKERS))
def test_a_loop_checkpointed_mid_epoch_resumes_to_the_same_parameters(tmp_path, monkeypatch,
                                                                      workers):
    # The dataset root is a folder that stays empty: MNIST reads the files in --data as
    # they are, and the process is offline (a missing file is an error, not a download).
    monkeypatch.setenv("DATASET_KIT_DATASET_ROOT", str(tmp_path / "dataset_root"))
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")
    write_synthetic_mnist(tmp_path / "mnist")

    def run(*args):
        return gluon_loop_script.main(["--data", str(tmp_path / "mnist"), "--epochs",
                                       str(EPOCHS), "--batch-size", str(BATCH),
                                       *WORKERS[workers], *args])

    whole = run()
    history = whole["history"]
    assert [entry["epoch"] for entry in history] == list(range(EPOCHS))
    # It trains: the loss falls and the held-out accuracy rises, far above chance.
    assert history[-1]["loss"] < history[0]["loss"] / 2
    assert history[-1]["val_accuracy"] >= max(0.9, history[0]["val_accuracy"])

    checkpoint = str(tmp_path / "ckpt")
    first = run("--stop-after", str(STOP_AFTER), "--checkpoint", checkpoint)
    assert first["stopped"] and first["history"] == history[:1]

    resumed = run("--resume", checkpoint)
    assert not resumed["stopped"]
    assert resumed["history"] == history  # losses and accuracies, exactly
    ours, theirs = parameters(resumed["net"]), parameters(whole["net"])
    assert len(ours) == len(theirs) == 4
    for k, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {k}")
    assert not (tmp_path / "dataset_root").exists()


def test_resuming_without_the_loaders_state_is_not_the_same_run(tmp_path, monkeypatch):
    # The check above has teeth: the same checkpoint, with the loader starting its
    # epoch afresh instead of where it stood, gives other parameters.
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")
    write_synthetic_mnist(tmp_path / "mnist")
    args = ["--data", str(tmp_path / "mnist"), "--epochs", "2", "--batch-size", str(BATCH)]
    whole = gluon_loop_script.main(args)
    checkpoint = str(tmp_path / "ckpt")
    gluon_loop_script.main([*args, "--stop-after", str(STOP_AFTER), "--checkpoint", checkpoint])
    monkeypatch.setattr(gluon_loop_script.data.DataLoader, "load_state_dict",
                        lambda self, state: None)
    resumed = gluon_loop_script.main([*args, "--resume", checkpoint])
    ours, theirs = parameters(resumed["net"]), parameters(whole["net"])
    assert any(not np.array_equal(a, b) for a, b in zip(ours, theirs))
