"""What MXNet's doors return without MXNet: MXArray, numpy views with NDArray's methods.

With MXNet installed and imported the same doors give ``mx.nd.NDArray``
(tests/peers/test_mxnet_interop.py checks that where MXNet is installed).
"""

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataset_kit import image
from dataset_kit._mxnet_arrays import CPU, MXArray, mxnet_output, mxnet_outputs
from dataset_kit.datasets import ArrayDataset
from dataset_kit.io import NDArrayIter
from dataset_kit.loader import DataLoader

pytestmark = pytest.mark.skipif("mxnet" in sys.modules,
                                reason="these check the doors' outputs without MXNet")


@given(hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3)))
def test_an_output_is_a_zero_copy_view_that_is_still_the_same_numpy_array(array):
    out = mxnet_output(array)
    assert isinstance(out, MXArray) and isinstance(out, np.ndarray)
    assert out.shape == array.shape and out.dtype == array.dtype
    assert out.size == 0 or np.shares_memory(out, array)
    assert type(out.asnumpy()) is np.ndarray and not np.shares_memory(out.asnumpy(), array)
    assert out.asnumpy().tobytes() == array.tobytes()


def test_mxarray_has_ndarrays_conveniences():
    x = mxnet_output(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.context == CPU and x.ctx == CPU and repr(x.context) == "cpu(0)"
    assert x.as_in_context(x.context) is x and x.stype == "default"
    target = np.zeros((2, 3), np.float32)
    assert x.copyto(target) is target and target.tolist() == x.tolist()
    copy = x.copyto(CPU)
    assert isinstance(copy, MXArray) and not np.shares_memory(copy, x)
    x.wait_to_read()
    x.wait_to_write()
    assert mxnet_output(np.array([7], np.int32)).asscalar() == 7
    with pytest.raises(ValueError, match="not a scalar"):
        x.asscalar()
    with pytest.raises(ValueError, match="shape"):
        x.copyto(np.zeros(3))


def test_reductions_and_elements_are_numpy_scalars_as_on_plain_arrays():
    x = mxnet_output(np.arange(6.0).reshape(2, 3))
    assert type(x.sum()) is np.float64 and type(x[0, 1]) is np.float64
    assert {x.max(): "hashable"} and isinstance(x.sum(axis=0), MXArray)
    assert isinstance(x + 1, MXArray) and isinstance(np.sqrt(x), MXArray)


def test_only_cpu_contexts_are_accepted():
    class GPU:
        device_type, device_id = "gpu", 0

    x = mxnet_output(np.zeros(2))
    for call in (x.as_in_context, x.copyto):
        with pytest.raises(ValueError, match="CPU context"):
            call(GPU())


def test_outputs_keep_the_batchs_structure():
    batch = mxnet_outputs({"a": [np.zeros(2), (np.ones(1), "text")]})
    assert isinstance(batch["a"][0], MXArray) and isinstance(batch["a"][1][0], MXArray)
    assert batch["a"][1][1] == "text" and isinstance(batch["a"][1], tuple)


@given(st.integers(1, 5))
def test_io_batches_have_asnumpy(batch_size):
    it = NDArrayIter(np.arange(10.0).reshape(5, 2), np.arange(5), batch_size=batch_size)
    batch = next(it)
    assert batch.data[0].asnumpy().tolist() == np.arange(10.0).reshape(5, 2)[:batch_size].tolist()
    assert batch.label[0].asnumpy().dtype == np.float32
    assert it.getdata()[0] is batch.data[0]  # one conversion per batch, as MXNet's getdata


def test_gluon_loader_batches_have_asnumpy_and_context():
    loader = DataLoader(ArrayDataset(np.arange(8.0).reshape(4, 2), np.arange(4)), 2)
    x, y = next(iter(loader))
    assert x.asnumpy().tolist() == [[0, 1], [2, 3]] and y[1:2].asscalar() == 1
    assert x.context == CPU
    plain = next(iter(DataLoader(np.arange(4), 2, device="@numpy")))
    assert type(plain) is np.ndarray  # '@numpy' asks for plain arrays


def test_image_functions_give_mxarrays_and_views_of_numpy_input():
    pytest.importorskip("PIL", reason="decoding needs Pillow (the image extra)")
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((6, 8, 3), 9, np.uint8)).save(buffer, format="PNG")
    decoded = image.imdecode(buffer.getvalue())
    assert isinstance(decoded, MXArray) and decoded.asnumpy().shape == (6, 8, 3)
    crop = image.fixed_crop(decoded.asnumpy(), 1, 1, 4, 3)
    assert isinstance(crop, MXArray) and crop.shape == (3, 4, 3)
    assert image.imresize(crop, 2, 2).asnumpy().shape == (2, 2, 3)
