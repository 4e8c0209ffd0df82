"""MXNet's ``Module.fit`` (example/image-classification's training loop) fed by our iterators.

``Module.fit`` binds the network from ``provide_data``/``provide_label``, calls
``copyto``, ``asnumpy`` and ``wait_to_read`` on every batch's arrays, and its
metrics read the labels through ``asnumpy()``. Runs where MXNet 1.9.1 is
installed (the numpy<2 peers environment).
"""

import logging

import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from dataset_kit import io  # noqa: E402

CLASSES = 3


def _softmax_net(data_name, label_name):
    """A one-layer classifier whose inputs are named as the iterator names them."""
    data = mx.sym.Variable(data_name)
    hidden = mx.sym.FullyConnected(mx.sym.flatten(data), num_hidden=CLASSES, name="fc")
    return mx.sym.SoftmaxOutput(hidden, mx.sym.Variable(label_name), name="softmax")


def _fit_one_epoch(it):
    """Bind a Module from the iterator's descriptors and fit it one epoch; return the accuracy."""
    (data_name, _), = it.provide_data
    (label_name, _), = it.provide_label  # MXNet's examples unpack DataDesc this way
    module = mx.mod.Module(_softmax_net(data_name, label_name), data_names=[data_name],
                           label_names=[label_name], context=mx.cpu(),
                           logger=logging.getLogger("module_fit"))
    module.fit(it, num_epoch=1, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
               eval_metric="acc", initializer=mx.init.Xavier())
    assert module.data_shapes[0].shape == it.provide_data[0].shape
    assert module.get_params()[0]["fc_weight"].dtype == np.float32
    return dict(module.score(it, "acc"))["accuracy"]


def _separable(n=60, features=4, seed=0):
    """Float64 data with int64 labels (what numpy gives), which a linear layer can learn."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    data = rng.normal(0, 0.1, (n, features)) + np.eye(CLASSES, features)[labels] * 3
    return data, labels


def test_module_fit_runs_on_ndarray_iter_batches():
    data, labels = _separable()
    it = io.NDArrayIter(data, labels, batch_size=8, shuffle=True, seed=0)
    assert _fit_one_epoch(it) > 0.9


def test_module_fit_runs_on_csv_iter_batches_with_renamed_inputs(tmp_path):
    data, labels = _separable()
    np.savetxt(tmp_path / "d.csv", data, delimiter=",")
    np.savetxt(tmp_path / "l.csv", labels, delimiter=",", fmt="%d")
    it = io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(4,),
                    label_csv=str(tmp_path / "l.csv"), batch_size=8, data_name="features",
                    label_name="classes")
    assert _fit_one_epoch(it) > 0.9


def test_module_fit_runs_on_image_record_iter_as_the_image_classification_example(tmp_path):
    pytest.importorskip("PIL", reason="records are packed with Pillow (the image extra)")
    from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack_img

    rng = np.random.default_rng(0)
    with IndexedRecordWriter(tmp_path / "t.idx", tmp_path / "t.rec") as writer:
        for i in range(24):
            label = i % CLASSES
            image = np.full((10, 10, 3), 40 + 80 * label, np.uint8)
            image += rng.integers(0, 10, image.shape, dtype=np.uint8)
            writer.write_idx(i, pack_img(IRHeader(0, float(label), i, 0), image, img_fmt=".png"))
    # common/data.py passes path_imgidx='' when it has no index, and names the inputs.
    it = io.ImageRecordIter(path_imgrec=str(tmp_path / "t.rec"), path_imgidx="",
                            data_shape=(3, 8, 8), batch_size=6, shuffle=True,
                            preprocess_threads=0, rand_crop=True, mean_r=128, mean_g=128,
                            mean_b=128, scale=1 / 64, data_name="data",
                            label_name="softmax_label")
    assert 0 <= _fit_one_epoch(it) <= 1
