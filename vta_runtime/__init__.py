"""The VTA JIT runtime: device memory, the command queue that turns runtime calls into
instruction streams, micro-kernel recording and caching, dependency push/pop, synchronisation;
devices for the simulator and RTL simulation (spec §4).

Typical use (runnable as it stands; ``tests/test_docs.py`` runs it)::

    import numpy as np
    from isa import AluOp, MemType
    from vta_runtime import CommandQueue, KernelHandle, SimDevice
    dev = SimDevice()
    x_host = np.arange(36 * 16, dtype=np.int32) * 3
    x = dev.alloc(36 * 64); x.copy_from(x_host)          # 36 ACC tiles (16 int32 each)
    y = dev.alloc(36 * 16)
    cq = CommandQueue(dev)
    cq.load_buffer_2d(x, 0, 36, 1, 36, 0, 0, 0, 0, 0, MemType.ACC)
    shr0 = KernelHandle("shr0")
    def finit(cq, sig):
        cq.uop_loop_begin(36, 1, 1, 0)
        cq.uop_push(1, 0, 0, 0, 0, AluOp.SHR, 1, 2)        # x >> 2, 36 tiles
        cq.uop_loop_end()
    cq.push_alu_op(shr0, finit)
    cq.dep_push(2, 3); cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, MemType.OUT, y, 0, 36, 1, 36)
    cq.synchronize()
    y_host = y.copy_to(np.int8)
    assert np.array_equal(y_host, (x_host >> 2).astype(np.int8))

- :mod:`.memory`: page allocator and :class:`Buffer` handles.
- :mod:`.device`: the :class:`Device` protocol; :class:`SimDevice`, :class:`NullDevice`;
  :mod:`.rtl_device`: :class:`RtlDevice`; :mod:`.board`: the register-level contract of a board;
  :mod:`.board_device`: :class:`BoardDevice` (the FPGA board over its UART, or its simulation).
- :mod:`.kernel`: :class:`UopKernel` recording and :class:`KernelHandle` caches.
- :mod:`.uop_cache`: uop SRAM residency ring and append-only staging.
- :mod:`.insn_queue`: instruction rows, dependency tokens, NOPs, force-serial.
- :mod:`.command_queue`: :class:`CommandQueue`, the public API; :mod:`.launch`: one device run
  of a finished window and its :class:`RunRecord`.
- :mod:`.capture`: a captured window replayed on other buffers (``capture`` / ``replay``).
- :mod:`.debug`: instruction dump and token balances.
- :mod:`.layout`: NCHW/OIHW <-> tiled layouts.
- :mod:`.replay`: replay and compare runtime golden cases.
"""

from .command_queue import CommandQueue, RunRecord
from .debug import (DEBUG_DUMP_INSN, DEBUG_DUMP_UOP, DEBUG_FORCE_SERIAL,
                    DEBUG_SKIP_READ_BARRIER, DEBUG_SKIP_WRITE_BARRIER, format_insn_dump,
                    token_balance)
from .device import Device, NullDevice, SimDevice
from .errors import (DependencyError, DeviceError, DeviceMemoryError, KernelError, QueueError,
                     RuntimeError_, VTARuntimeError)
from .kernel import KernelHandle, UopKernel, signature_key
from .layout import (pack_matrix, pack_nchw, pack_oihw, pack_weights, pad_to_multiple,
                     tile_spec, unpack_matrix, unpack_nchw, unpack_oihw, unpack_weights)
from .memory import PAGE_BYTES, VTA_MAX_XFER, Buffer, DeviceMemory
from .replay import CaseError, ReplayResult, compare_case, load_case, replay_case
from .rtl_device import RtlDevice
from .board import MmioDevice, vcr_run_sequence
from .board_device import BoardDevice

#: Debug flag aliases with the reference names (spec §1.3).
DUMP_INSN, DUMP_UOP, FORCE_SERIAL = DEBUG_DUMP_INSN, DEBUG_DUMP_UOP, DEBUG_FORCE_SERIAL

__all__ = [
    # devices and memory
    "Device", "SimDevice", "RtlDevice", "NullDevice", "Buffer", "DeviceMemory", "PAGE_BYTES",
    "VTA_MAX_XFER", "MmioDevice", "vcr_run_sequence", "BoardDevice",
    # command queue and kernels
    "CommandQueue", "RunRecord", "KernelHandle", "UopKernel", "signature_key",
    # debug
    "DEBUG_DUMP_INSN", "DEBUG_DUMP_UOP", "DEBUG_FORCE_SERIAL", "DEBUG_SKIP_READ_BARRIER",
    "DEBUG_SKIP_WRITE_BARRIER", "DUMP_INSN", "DUMP_UOP", "FORCE_SERIAL", "format_insn_dump",
    "token_balance",
    # errors
    "VTARuntimeError", "RuntimeError_", "DeviceMemoryError", "KernelError", "DependencyError",
    "QueueError", "DeviceError",
    # layouts
    "tile_spec", "pack_nchw", "unpack_nchw", "pack_oihw", "unpack_oihw", "pack_matrix",
    "unpack_matrix", "pack_weights", "unpack_weights", "pad_to_multiple",
    # golden cases
    "replay_case", "compare_case", "load_case", "ReplayResult", "CaseError",
]
