"""IR -> IR passes, one per module; :mod:`compiler.vta.pipeline` lists them in order."""

from .fold_uop import fold_uop_loops
from .inject_dma import inject_dma
from .inject_vthread import inject_vthread
from .storage_flatten import StorageError, storage_flatten
from .verify import verify

__all__ = ["storage_flatten", "StorageError", "inject_vthread", "fold_uop_loops", "inject_dma",
           "verify"]
