"""MXNetError: dataset_kit's, a ValueError, and MXNet's own class when MXNet is loaded."""

import sys
import types

import pytest

from dataset_kit.io import MXNetError
from dataset_kit.io.errors import mxnet_error


def test_without_mxnet_it_is_a_runtime_and_value_error():
    error = mxnet_error("bad")
    assert isinstance(error, (MXNetError, RuntimeError, ValueError)) and str(error) == "bad"


def test_with_mxnet_loaded_it_is_also_mxnets_class(monkeypatch):
    base = types.ModuleType("mxnet.base")

    class TheirError(RuntimeError):
        pass

    base.MXNetError = TheirError
    monkeypatch.setitem(sys.modules, "mxnet.base", base)
    with pytest.raises(TheirError, match="bad"):
        raise mxnet_error("bad")
    assert isinstance(mxnet_error("x"), MXNetError)
