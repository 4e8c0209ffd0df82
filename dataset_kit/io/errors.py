"""MXNetError, where MXNet's io users look for it.

It lives in :mod:`dataset_kit._mxnet_errors` so that storage modules which
keep MXNet's words (``dataset_kit.image``'s ``mx.image`` functions) raise it
without importing this front door.
"""

from dataset_kit._mxnet_errors import MXNetError, mxnet_error

__all__ = ["MXNetError", "mxnet_error"]
