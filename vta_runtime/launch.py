"""One device run of a finished window: the uop staging image and the instructions copied to
device memory, the device run, the :class:`RunRecord` (spec §4.7).

:class:`~vta_runtime.command_queue.CommandQueue` builds a window's rows; its ``synchronize``
and ``replay`` (a captured window, :mod:`.capture`) both end here, in :func:`launch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa import INSN_BYTES, UOP_BYTES, Opcode, VTAConfig

from .debug import DEBUG_DUMP_INSN, format_insn_dump
from .errors import DependencyError, QueueError
from .insn_queue import C, encode_table, table_array
from .memory import PAGE_BYTES, Buffer

__all__ = ["RunRecord", "launch", "ensure_buffer"]

_FINISH = int(Opcode.FINISH)


@dataclass
class RunRecord:
    """What one device run was given, for inspection, replay and tests.

    ``insns`` are the exact bytes run (absolute ``dram_base``); ``uop_loads`` lists
    ``(insn_index, sram_base, staging_offset, count)`` per LOAD UOP the uop cache emitted;
    ``mem_refs`` maps instruction index -> (buffer, elem_bytes) for every LOAD/STORE with
    x_size > 0 issued through ``load_buffer_2d`` / ``store_buffer_2d``.
    """
    index: int
    insns: bytes
    insn_phys: int
    insn_count: int
    wait_cycles: int
    uop_image: bytes
    uop_phys: int
    uop_loads: list
    mem_refs: dict
    token_balance: tuple
    stats: dict = field(default_factory=dict)
    config: VTAConfig | None = None

    def array(self):
        from isa import decode_stream
        return decode_stream(self.insns, self.config)


def ensure_buffer(cq, attr: str, nbytes: int) -> Buffer:
    """The queue's device buffer ``cq.<attr>`` (instructions or uop staging), reallocated
    (power-of-two pages, at most ``max_xfer`` unless ``nbytes`` is more) when too small."""
    buf = getattr(cq, attr)
    if buf is not None and buf.alive and buf.nbytes >= nbytes:
        return buf
    if buf is not None and buf.alive:
        cq.device.free(buf)
    size = PAGE_BYTES
    while size < nbytes:
        size *= 2
    buf = cq.device.alloc(min(max(size, nbytes), max(cq.max_xfer, nbytes)),
                          name=attr.strip("_"))
    setattr(cq, attr, buf)
    return buf


def launch(cq, table, image, uop_loads: list, mem_refs: dict, balance,
           wait_cycles: int) -> RunRecord:
    """Run the window's rows ``table`` (LOAD UOPs staging-relative) and uop ``image`` on
    ``cq``'s device; update the queue's run count, token balance and history.

    Raises
    ------
    QueueError
        The instructions or the staging image exceed ``cq.max_xfer``.
    DependencyError
        ``cq.check_tokens`` and the cumulative token balance is not zero after the run.
    """
    cfg = cq.config
    n = len(table)
    if n * INSN_BYTES > cq.max_xfer:
        raise QueueError(f"synchronize: {n} instructions exceed the instruction buffer "
                         f"({cq.max_xfer} bytes)")
    if image.nbytes > cq.max_xfer:
        raise QueueError(f"synchronize: the uop staging image ({image.nbytes} bytes) exceeds "
                         f"the staging buffer ({cq.max_xfer} bytes)")
    uop_phys = 0
    if uop_loads:
        ubuf = ensure_buffer(cq, "_uop_buf", max(image.nbytes, UOP_BYTES))
        cq.device.copy_from_host(ubuf, image)
        uop_phys = ubuf.phys
        idx = np.fromiter((t[0] for t in uop_loads), dtype=np.int64,
                          count=len(uop_loads))
        table[idx, C.dram_base] += uop_phys // UOP_BYTES
    data = encode_table(table, cfg)
    arr = table_array(table, cfg)
    ibuf = ensure_buffer(cq, "_insn_buf", len(data))
    cq.device.copy_from_host(ibuf, data)
    if cq.debug_flags & DEBUG_DUMP_INSN:
        cq._write_debug(format_insn_dump(arr))
    assert arr.opcode[-1] == _FINISH
    record = RunRecord(cq.num_runs, data, ibuf.phys, n, int(wait_cycles), image.tobytes(),
                       uop_phys, uop_loads, mem_refs, balance, {}, cfg)
    cq.num_runs += 1
    for i in range(4):
        cq.token_balance[i] += balance[i]
    cq.last_run = record
    if cq.keep_history:
        cq.runs.append(record)
    record.stats = cq.device.run(ibuf.phys, n, int(wait_cycles))
    if cq.check_tokens and any(cq.token_balance):
        l2g, g2l, s2g, g2s = cq.token_balance
        raise DependencyError(f"synchronize: run {record.index} leaves the token balance "
                              f"l2g={l2g}, g2l={g2l}, s2g={s2g}, g2s={g2s} (every push "
                              f"needs one pop)")
    return record
