"""The command queue: runtime calls -> instruction streams -> device runs (spec §4.4-4.7).

This is the layer compiled code talks to, with the reference runtime's semantics in snake_case:
:meth:`~CommandQueue.load_buffer_2d`, :meth:`~CommandQueue.store_buffer_2d`,
:meth:`~CommandQueue.push_gemm_op`, :meth:`~CommandQueue.push_alu_op`,
:meth:`~CommandQueue.uop_loop_begin` / :meth:`~CommandQueue.uop_push` /
:meth:`~CommandQueue.uop_loop_end` (inside a kernel's ``finit``),
:meth:`~CommandQueue.dep_push`, :meth:`~CommandQueue.dep_pop`,
:meth:`~CommandQueue.synchronize`, :meth:`~CommandQueue.set_debug_mode`.

Streams are byte-identical to the reference runtime (TVM v0.14.0) for the same calls, after
normalising ``dram_base`` to buffer-relative offsets, except that the uop staging image is
append-only by default (see :mod:`vta_runtime.uop_cache`).
"""

from __future__ import annotations

import sys

import numpy as np

from isa import INSN_BYTES, UOP_BYTES, MemType, Opcode, VTAConfig

from .capture import capture_window, rebind_window
from .debug import DEBUG_DUMP_UOP, DEBUG_FORCE_SERIAL, token_balance_rows
from .errors import DependencyError, DeviceMemoryError, KernelError, QueueError
from .insn_queue import COMPUTE_STAGE, LOAD_STAGE, STORE_STAGE, C, InsnQueue, mem_stage
from .kernel import ALU_MODE, GEMM_MODE, KernelHandle, UopKernel, signature_key
from .launch import RunRecord, launch
from .memory import VTA_MAX_XFER, Buffer
from .uop_cache import UopRing, coalesce_uop_loads

__all__ = ["CommandQueue", "RunRecord"]

_LOAD, _STORE, _FINISH = int(Opcode.LOAD), int(Opcode.STORE), int(Opcode.FINISH)
_UOP, _OUT = int(MemType.UOP), int(MemType.OUT)
_PP, _PN, _BGN, _END = C.pop_prev, C.pop_next, C.uop_bgn, C.uop_end


def _u(v, bits: int, name: str, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise QueueError(f"{what}: {name} must be an integer, not {v!r}")
    v = int(v)
    if not 0 <= v < (1 << bits):
        raise QueueError(f"{what}: {name} = {v} does not fit in {bits} bits")
    return v


_TABLES: dict = {}


def _config_tables(cfg: VTAConfig):
    """Per configuration (computed once): DRAM tile bytes and SRAM depth per memory type,
    and the widths of the LOAD/STORE fields the queue checks."""
    t = _TABLES.get(cfg)
    if t is None:
        lay = cfg.mem_layout
        t = _TABLES[cfg] = (
            {int(m): cfg.elem_bytes(m) for m in MemType},
            {int(m): cfg.sram_depth(m) for m in MemType},
            {n: lay[n][1] for n in ("sram_base", "dram_base", "y_size", "x_size", "x_stride",
                                    "y_pad_0")})
    return t


class CommandQueue:
    """Builds instruction streams for one device and runs them at :meth:`synchronize`.

    Parameters
    ----------
    device : Device
        Where buffers live and streams run.
    config : isa.VTAConfig, optional
        Defaults to ``device.config``.
    max_xfer : int
        Size limit of the instruction buffer and of the uop staging image (VTA_MAX_XFER).  The
        queue auto-synchronises when ``(count + 6) * 16 > max_xfer`` after a call (and, with
        append-only staging only, before a LOAD UOP that would overflow the image).
    uop_depth : int, optional
        Uop SRAM entries the residency ring manages (default ``config.uop_buff_depth``).
    dep_distance : int, optional
        Destination-hazard distance for kernel recording (default ``config.ACC_DEP_DISTANCE``).
    staging : {"append", "reference"}
        Uop staging policy (:mod:`vta_runtime.uop_cache`).
    coalesce_uops : bool
        At synchronisation, replace a window's LOAD UOPs by one LOAD UOP of the whole staging
        image where that is exact (:func:`~vta_runtime.uop_cache.coalesce_uop_loads`).  Off by
        default: the streams are then the reference runtime's.  The attribute of the same name
        may be changed between windows.
    keep_history : bool
        Keep a :class:`RunRecord` of every run in :attr:`runs` (the last one is always in
        :attr:`last_run`).
    debug_stream : file, optional
        Where DUMP_INSN / DUMP_UOP text goes (default ``sys.stdout``).
    check_tokens : bool
        Raise :class:`DependencyError` after a run that leaves the cumulative token balance
        non-zero (a push without its pop, or a pop without its push, across all runs so far).

    Attributes
    ----------
    token_balance : list of int
        Cumulative (l2g, g2l, s2g, g2s) balance over all runs; zero after every
        :meth:`synchronize` for a well-formed program.
    kernels_recorded : int
        How many kernels ``finit`` has recorded (cache misses).
    """

    def __init__(self, device, config: VTAConfig | None = None, *, max_xfer: int = VTA_MAX_XFER,
                 uop_depth: int | None = None, dep_distance: int | None = None,
                 staging: str = "append", keep_history: bool = False, debug_stream=None,
                 check_tokens: bool = False, coalesce_uops: bool = False):
        self.device = device
        self.config = config or device.config
        if self.config != device.config:
            raise QueueError("the command queue's configuration differs from the device's")
        if max_xfer < 16 * INSN_BYTES:
            raise QueueError(f"max_xfer must be at least {16 * INSN_BYTES} bytes, not {max_xfer}")
        self.max_xfer = max_xfer
        self._flush_at = max_xfer // INSN_BYTES - 6
        self._max_staging = max_xfer // UOP_BYTES
        self.dep_distance = self.config.ACC_DEP_DISTANCE if dep_distance is None else dep_distance
        self._q = InsnQueue()
        self._ring = UopRing(uop_depth or self.config.uop_buff_depth, staging)
        self._uop_loads: list[tuple[int, int, int, int]] = []
        self._mem_refs: dict[int, tuple[Buffer, int]] = {}
        self._recording: UopKernel | None = None
        self._capture: list | None = None    # (row, buffer, E) per LOAD/STORE call
        self.captured = None                 # the last captured Window (vta_runtime.capture)
        self.debug_flags = 0
        self.debug_stream = debug_stream
        self.keep_history = keep_history
        self.check_tokens = check_tokens
        self.coalesce_uops = bool(coalesce_uops)
        #: an ALU kernel whose micro-ops equal those of the ALU kernel issued just before it
        #: (still resident) runs on that one's uop SRAM range, without a LOAD UOP of its own,
        #: so a clip's MAX and MIN have equal fields (vta_hw's fetch fuses such a pair:
        #: ``TimingParams.fuse_clamp``).  Off by default (the reference runtime's streams);
        #: compiled kernels turn it on with ``coalesce_uops``
        self.share_uops = False
        self._last_alu = None           # (kernel, its uop SRAM range)
        self.runs: list[RunRecord] = []
        self.last_run: RunRecord | None = None
        self.num_runs = 0
        self.kernels_recorded = 0
        self.token_balance = [0, 0, 0, 0]
        self._insn_buf: Buffer | None = None
        self._uop_buf: Buffer | None = None
        self._elem_bytes, self._depth, self._w = _config_tables(self.config)

    def __repr__(self):
        return (f"<CommandQueue {len(self._q)} insns pending, {self.num_runs} runs, "
                f"device={self.device!r}>")

    # ------------------------------------------------------------------ properties
    @property
    def pending_count(self) -> int:
        """Instructions queued in the current window."""
        return len(self._q)

    @property
    def idle(self) -> bool:
        """No instructions and no pops pending (a window can be captured or replayed)."""
        return not self._q.rows and not self._q.has_pending_pop()

    @property
    def pending_rows(self) -> list:
        """The current window's rows (read-only use: :data:`isa.COLUMNS` order)."""
        return self._q.rows

    # ------------------------------------------------------------------ debug
    def set_debug_mode(self, flags: int, stream=None) -> None:
        """``VTASetDebugMode``: DUMP_INSN = 2, DUMP_UOP = 4, FORCE_SERIAL = 32 (spec §1.3)."""
        if isinstance(flags, bool) or not isinstance(flags, (int, np.integer)) or flags < 0:
            raise QueueError(f"debug flags must be a non-negative integer, not {flags!r}")
        self.debug_flags = int(flags)
        if stream is not None:
            self.debug_stream = stream

    def _write_debug(self, text: str) -> None:
        (self.debug_stream or sys.stdout).write(text)

    # ------------------------------------------------------------------ DMA
    def load_buffer_2d(self, buf: Buffer, elem_offset: int, x_size: int, y_size: int,
                       x_stride: int, x_pad_before: int, y_pad_before: int, x_pad_after: int,
                       y_pad_after: int, dst_sram_index: int, dst_memory_type: int) -> None:
        """``VTALoadBuffer2D``: a (padded) 2-D tile copy DRAM -> SRAM (spec §4.5).

        INP/WGT loads go to the load stage; ACC, ACC_8BIT and UOP loads to compute.
        ``dram_base = phys(buf) / E + elem_offset`` with E the DRAM tile bytes of the type.

        Raises
        ------
        QueueError
            Unknown or OUT memory type, a field that does not fit, an SRAM range past the
            buffer depth or a DRAM range past the end of ``buf``.
        """
        what = "load_buffer_2d"
        self.device.check(buf)
        mt = dst_memory_type
        if isinstance(mt, bool) or mt not in self._elem_bytes or mt == _OUT:
            shown = int(mt) if isinstance(mt, (int, np.integer)) else repr(mt)
            raise QueueError(f"{what}: memory type {shown} cannot be loaded (UOP 0, WGT 1, INP 2, "
                             f"ACC 3, ACC_8BIT 5)")
        mt = int(mt)
        w = self._w
        x = _u(x_size, w["x_size"], "x_size", what)
        y = _u(y_size, w["y_size"], "y_size", what)
        stride = _u(x_stride, w["x_stride"], "x_stride", what)
        pads = [_u(v, w["y_pad_0"], n, what) for v, n in
                ((y_pad_before, "y_pad_before"), (y_pad_after, "y_pad_after"),
                 (x_pad_before, "x_pad_before"), (x_pad_after, "x_pad_after"))]
        sram = _u(dst_sram_index, w["sram_base"], "dst_sram_index", what)
        off = _u(elem_offset, 32, "elem_offset", what)
        E = self._elem_bytes[mt]
        if x:
            rows = pads[0] + y + pads[1]
            cols = pads[2] + x + pads[3]
            if sram + rows * cols > self._depth[mt]:
                raise QueueError(f"{what}: SRAM tiles [{sram}, {sram + rows * cols}) exceed the "
                                 f"{MemType(mt).name} buffer depth {self._depth[mt]}")
            self._check_dram(buf, off, x, y, stride, E, what)
        dram = self._dram_base(buf, off, E, what)
        q = self._q
        row = q.create(mem_stage(mt))
        row[C.opcode] = _LOAD
        row[C.memory_type] = mt
        row[C.sram_base] = sram
        row[C.dram_base] = dram
        row[C.y_size], row[C.x_size], row[C.x_stride] = y, x, stride
        row[C.y_pad_0], row[C.y_pad_1], row[C.x_pad_0], row[C.x_pad_1] = pads
        if x:
            self._mem_refs[len(q.rows) - 1] = (buf, E)
        if self._capture is not None:
            self._capture.append((row, buf, E))
        if len(q.rows) > self._flush_at:
            self._auto_sync()

    def _dram_base(self, buf: Buffer, off: int, E: int, what: str) -> int:
        """``phys(buf) / E + elem_offset``, checked against the 32-bit dram_base field."""
        dram = buf.phys // E + off
        bits = self._w["dram_base"]
        if dram >= 1 << bits:
            raise QueueError(f"{what}: dram_base {dram} does not fit in {bits} bits")
        return dram

    def store_buffer_2d(self, src_sram_index: int, src_memory_type: int, buf: Buffer,
                        elem_offset: int, x_size: int, y_size: int, x_stride: int) -> None:
        """``VTAStoreBuffer2D``: OUT tiles SRAM -> DRAM, store stage, no padding (spec §4.5).

        Raises
        ------
        QueueError
            A memory type other than OUT, a field that does not fit, or an SRAM/DRAM range
            past the buffer.
        """
        what = "store_buffer_2d"
        self.device.check(buf)
        if src_memory_type != _OUT or isinstance(src_memory_type, bool):
            raise QueueError(f"{what}: stores read the OUT buffer (memory type 4), "
                             f"not {src_memory_type!r}")
        w = self._w
        x = _u(x_size, w["x_size"], "x_size", what)
        y = _u(y_size, w["y_size"], "y_size", what)
        stride = _u(x_stride, w["x_stride"], "x_stride", what)
        sram = _u(src_sram_index, w["sram_base"], "src_sram_index", what)
        off = _u(elem_offset, 32, "elem_offset", what)
        E = self._elem_bytes[_OUT]
        if x:
            if sram + x * y > self._depth[_OUT]:
                raise QueueError(f"{what}: SRAM tiles [{sram}, {sram + x * y}) exceed the OUT "
                                 f"buffer depth {self._depth[_OUT]}")
            self._check_dram(buf, off, x, y, stride, E, what)
        dram = self._dram_base(buf, off, E, what)
        q = self._q
        row = q.create(STORE_STAGE)
        row[C.opcode] = _STORE
        row[C.memory_type] = _OUT
        row[C.sram_base] = sram
        row[C.dram_base] = dram
        row[C.y_size], row[C.x_size], row[C.x_stride] = y, x, stride
        if x:
            self._mem_refs[len(q.rows) - 1] = (buf, E)
        if self._capture is not None:
            self._capture.append((row, buf, E))
        if len(q.rows) > self._flush_at:
            self._auto_sync()

    @staticmethod
    def _check_dram(buf, off, x, y, stride, E, what):
        if y == 0:
            return
        end = (off + (y - 1) * stride + x) * E
        limit = -(-buf.nbytes // E) * E
        if end > limit:
            raise QueueError(f"{what}: tiles up to byte {end} (elem_offset {off}, y={y}, "
                             f"stride={stride}, x={x}, {E}-byte tiles) run past the end of "
                             f"{buf!r}")

    # ------------------------------------------------------------------ dependencies
    def dep_push(self, from_stage: int, to_stage: int) -> None:
        """``VTADepPush``: give one token from ``from_stage`` to ``to_stage`` (spec §4.7)."""
        self._q.dep_push(from_stage, to_stage)

    def dep_pop(self, from_stage: int, to_stage: int) -> None:
        """``VTADepPop``: the next ``to_stage`` instruction waits for a token (spec §4.7)."""
        self._q.dep_pop(from_stage, to_stage)

    # ------------------------------------------------------------------ kernels
    def uop_loop_begin(self, extent: int, dst_factor: int, src_factor: int,
                       wgt_factor: int = 0) -> None:
        """``VTAUopLoopBegin`` (inside ``finit`` only)."""
        self._rec("uop_loop_begin").loop_begin(extent, dst_factor, src_factor, wgt_factor)

    def uop_loop_end(self) -> None:
        """``VTAUopLoopEnd`` (inside ``finit`` only)."""
        self._rec("uop_loop_end").loop_end()

    def uop_push(self, mode: int, reset_out: int, dst: int, src: int, wgt: int = 0,
                 alu_opcode: int = 0, use_imm: int = 0, imm: int = 0) -> None:
        """``VTAUopPush`` (inside ``finit`` only)."""
        self._rec("uop_push").push(mode, reset_out, dst, src, wgt, alu_opcode, use_imm, imm)

    def _rec(self, what) -> UopKernel:
        k = self._recording
        if k is None:
            raise KernelError(f"{what} outside a kernel recording (call it from the finit "
                              f"function given to push_gemm_op / push_alu_op)")
        return k

    def _record(self, handle: KernelHandle, key: int, finit, signature, mode: int) -> UopKernel:
        if self._recording is not None:
            raise KernelError("push_gemm_op / push_alu_op called while recording another kernel")
        if not isinstance(handle, KernelHandle):
            raise KernelError(f"expected a KernelHandle, not {type(handle).__name__}")
        name = f"{handle.name or 'kernel'}[{signature}]"
        k = UopKernel(self.config, signature, self.dep_distance, name)
        self._recording = k
        try:
            rc = finit(self, signature)
        finally:
            self._recording = None
        if rc not in (None, 0):
            raise KernelError(f"{name}: finit returned {rc!r}, not 0")
        k.finalize(mode)
        handle.kernels[key] = k
        self.kernels_recorded += 1
        if self.debug_flags & DEBUG_DUMP_UOP:
            self._write_debug(k.dump())
        return k

    def _load_kernel(self, k: UopKernel) -> tuple[int, int]:
        ring = self._ring
        # The reference never synchronises here (its uop queue's size test reads a vector that
        # stays empty), and its image is at most the uop SRAM.  Only the append-only image can
        # outgrow the staging buffer, after more than max_xfer / 4 uops of distinct kernels in
        # one window; it then runs what it has first.
        if ring.staging == "append" and k not in ring.append_pos and \
                ring.staging_uops + k.size > self._max_staging:
            self._auto_sync()
        begin, end, offset = ring.place(k)
        q = self._q
        row = q.create(COMPUTE_STAGE)
        row[C.opcode] = _LOAD
        row[C.memory_type] = _UOP
        row[C.sram_base] = begin
        row[C.dram_base] = offset       # staging-relative until synchronize adds the base
        row[C.y_size] = 1
        row[C.x_size] = row[C.x_stride] = end - begin
        self._uop_loads.append((len(q.rows) - 1, begin, offset, end - begin))
        return begin, end

    def push_gemm_op(self, handle: KernelHandle, finit, signature=None) -> None:
        """``VTAPushGEMMOp``: record (on first use) and issue a GEMM micro-kernel.

        ``finit(cq, signature)`` is called on a cache miss and records the kernel through
        :meth:`uop_loop_begin`, :meth:`uop_push` (mode 0) and :meth:`uop_loop_end`.  A kernel
        not resident in the uop SRAM is preceded by a LOAD UOP.  One kernel loop maps to the
        GEMM *outer* loop.
        """
        self._push_op(handle, finit, signature, GEMM_MODE)

    def push_alu_op(self, handle: KernelHandle, finit, signature=None) -> None:
        """``VTAPushALUOp``: like :meth:`push_gemm_op` for ALU kernels (uop mode 1).

        One kernel loop maps to the ALU *inner* loop (the reference asymmetry, spec §4.6).
        """
        self._push_op(handle, finit, signature, ALU_MODE)

    def _push_op(self, handle: KernelHandle, finit, signature, mode: int) -> None:
        key = 0 if signature is None else signature_key(signature)
        try:
            k = handle.kernels.get(key)
        except AttributeError:
            raise KernelError(f"expected a KernelHandle, not {type(handle).__name__}") from None
        if k is None:
            k = self._record(handle, key, finit, signature, mode)
        elif k.mode != mode:
            ops = ("push_gemm_op", "an ALU") if mode == GEMM_MODE else ("push_alu_op", "a GEMM")
            raise KernelError(f"{k.name}: {ops[0]} on a call site that recorded {ops[1]} kernel")
        ring = self._ring
        res = ring.resident.get(k)
        last, owner = self._last_alu, k
        if res is None and last is not None and self.share_uops and mode == ALU_MODE and \
                ring.resident.get(last[0]) == last[1] and k.size == last[0].size and \
                np.array_equal(k.words, last[0].words):
            owner, res = last         # the resident kernel whose range this one runs on
        if res is None:
            res = self._load_kernel(k)
        self._last_alu = (owner, res) if mode == ALU_MODE else None
        q = self._q
        row = k.template.copy()
        row[_BGN], row[_END] = res
        pp, pn = q.pending_prev, q.pending_next
        if pp[2] or pn[2]:
            row[_PP], row[_PN] = pp[2], pn[2]
            pp[2] = pn[2] = 0
        rows = q.rows
        rows.append(row)
        if len(rows) > self._flush_at:
            self._auto_sync()

    # ------------------------------------------------------------------ synchronisation
    def _auto_sync(self) -> None:
        self._capture = None            # a window cut in two is not captured
        self.synchronize(1 << 31)

    # ------------------------------------------------------------------ captured windows
    def window_key(self) -> tuple:
        """What a window's stream depends on besides the calls (:mod:`.capture`)."""
        return (self.config, self.max_xfer, self._ring.staging, self._ring.depth,
                self.dep_distance, self.coalesce_uops, self.share_uops)

    def capture(self) -> None:
        """Capture the window the next calls build (:mod:`.capture`): its :meth:`synchronize`
        sets :attr:`captured` (a :class:`~.capture.Window`; None if cut or debugged)."""
        if not self.idle:
            raise QueueError("capture: instructions or pops are pending")
        self._capture, self.captured = [], None

    def replay(self, window, buffers, wait_cycles: int = 1 << 31) -> RunRecord:
        """Run captured ``window`` with ``buffers`` (one per LOAD/STORE call, in call order)
        instead of its calls and :meth:`synchronize`: the same run (:mod:`.capture`)."""
        return self._launch(*rebind_window(self, window, buffers), wait_cycles)

    def synchronize(self, wait_cycles: int = 1 << 31) -> RunRecord:
        """``VTASynchronize``: finish the window, run it, wait, and reset (spec §4.7).

        Appends the final dependency sequence (or the FORCE_SERIAL rewrite) and FINISH, copies
        the uop staging image and the instructions to device memory, optionally dumps them
        (DUMP_INSN), runs the device and resets the instruction queue and uop residency.

        Returns
        -------
        RunRecord

        Raises
        ------
        DependencyError
            Pops would be left pending (a store-stage pop under FORCE_SERIAL).
        DeviceError
            The device failed; the queue is reset anyway.
        """
        if isinstance(wait_cycles, bool) or not isinstance(wait_cycles, (int, np.integer)) \
                or not 0 <= wait_cycles < 1 << 32:
            raise QueueError(f"synchronize: wait_cycles must be a 32-bit unsigned integer, "
                             f"not {wait_cycles!r}")
        q = self._q
        if self.debug_flags & DEBUG_FORCE_SERIAL:
            if q.pending_prev[STORE_STAGE] or q.pending_next[STORE_STAGE]:
                raise DependencyError("synchronize: a store-stage pop is pending and FORCE_SERIAL "
                                      "would leave it uncommitted")
            q.rewrite_force_serial()
        else:
            q.dep_push(STORE_STAGE, COMPUTE_STAGE)
            q.dep_push(LOAD_STAGE, COMPUTE_STAGE)
            q.dep_pop(STORE_STAGE, COMPUTE_STAGE)
            q.dep_pop(LOAD_STAGE, COMPUTE_STAGE)
            q.commit_pending_pop(COMPUTE_STAGE)
        row = q.create(COMPUTE_STAGE)
        row[C.opcode] = _FINISH
        if q.has_pending_pop():     # pragma: no cover - excluded by the checks above
            raise DependencyError("synchronize: dependency pops still pending after FINISH")
        try:
            return self._run(wait_cycles)
        finally:
            q.reset()
            self._ring.reset()
            self._uop_loads = []
            self._mem_refs, self._capture = {}, None

    def _check_live(self) -> None:
        """Every buffer a queued LOAD/STORE names must still be allocated: a buffer freed
        (and its memory perhaps handed to a new allocation) would be read or overwritten."""
        seen = set()
        for i, (buf, _) in sorted(self._mem_refs.items()):
            if id(buf) in seen:
                continue
            seen.add(id(buf))
            try:
                self.device.check(buf)
            except DeviceMemoryError:
                raise QueueError(f"synchronize: instruction {i} (a queued LOAD/STORE) uses "
                                 f"{buf!r}, which was freed before the queue ran; free a "
                                 f"buffer only after synchronize") from None

    def _run(self, wait_cycles: int) -> RunRecord:
        self._check_live()
        if self.coalesce_uops:
            q = self._q
            q.rows, self._uop_loads, self._mem_refs = coalesce_uop_loads(
                q.rows, self._uop_loads, self._mem_refs, self._ring.staging_uops)
        table = self._q.to_table()
        image = self._ring.image()
        balance = token_balance_rows(self._q.rows)
        if self._capture is not None:
            self.captured = capture_window(self, self._capture, table, image, balance)
            self._capture = None
        return self._launch(table, image, list(self._uop_loads), dict(self._mem_refs), balance,
                            wait_cycles)

    def _launch(self, table, image, uop_loads: list, mem_refs: dict, balance,
                wait_cycles: int) -> RunRecord:
        """Run the window's rows ``table`` (LOAD UOPs staging-relative) and uop ``image``
        (:func:`.launch.launch`)."""
        return launch(self, table, image, uop_loads, mem_refs, balance, wait_cycles)

    def close(self) -> None:
        """Free the instruction and uop staging buffers."""
        for attr in ("_insn_buf", "_uop_buf"):
            buf = getattr(self, attr)
            if buf is not None and buf.alive:
                self.device.free(buf)
            setattr(self, attr, None)
