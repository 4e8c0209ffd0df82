"""MXNet's record header (``IRHeader``) and image records: kept as a public import path.

The code lives in :mod:`dataset_kit.formats.recordio.header`.
"""

from dataset_kit.formats.recordio.header import IRHeader, pack, pack_img, unpack, unpack_img

__all__ = ["IRHeader", "pack", "pack_img", "unpack", "unpack_img"]
