"""The host side of the FPGA board's UART bridge: registers, DRAM transfers and runs.

:class:`BoardHost` speaks the byte protocol of :class:`vta_hw.board.uart.HostBridge` over any
transport with ``write(bytes)`` and ``read(n) -> bytes`` (``read`` returns fewer bytes when it
times out, like pyserial):

* ``'W' addr data32`` -> ``ACK``;  ``'R' addr`` -> 4 bytes (registers of :class:`vta_hw.blocks.csr.Reg`);
* ``'M' word32 data`` -> ``ACK``;  ``'m' word32`` -> one bus word (DRAM, word index);

little-endian.  Commands are pipelined: the request bytes sent beyond the last fully answered
command never exceed the bridge's receive FIFO (:data:`~vta_hw.board.uart.RX_FIFO_DEPTH`), and the
answers are read in batches, so a bulk transfer keeps the line busy in both directions.

:func:`vta_hw.board.run.run_board` runs one program the way :func:`vta_hw.runners.amaranth_sim.run_amaranth` does.
Transports: :func:`open_serial` (a pyserial port, the real board) and
:class:`vta_hw.board.simboard.SimulatedBoard` (the bitstream's :class:`~vta_hw.board.uart.UartSystem` in
Amaranth's simulator).  :class:`vta_runtime.board_device.BoardDevice` runs runtime streams
through this class; ``vta board run`` runs raw programs.

Errors: :class:`BoardError` (a :class:`~vta_hw.errors.HwError`) and its subclasses
:class:`BoardLinkError` (no or a wrong answer: names the command) and
:class:`BoardTimeoutError` (the program did not finish; also a
:class:`~vta_hw.errors.RtlRunError`, like the simulators' cycle limit).  A run the hardware
stops on an illegal instruction raises :class:`~vta_hw.errors.RtlRunError` with ``code`` and
``index``, as every other runner does.
"""

from __future__ import annotations

import secrets
import time
from collections import deque

import numpy as np

from isa import INSN_BYTES, VTAConfig

from ..blocks.csr import Reg
from ..errors import ErrorCode, RtlRunError
from ..runners.image import MemoryImage, RunResult, pack_image
from .link import (CTRL_DONE, CTRL_ERROR, CTRL_LAUNCH, CTRL_RUNNING, SIM_MAX_CYCLES,
                   BoardError, BoardLinkError, BoardTimeoutError, _as_u8, _Cmd, _COOKIE_REG,
                   _reg_name, open_serial)
from .uart import ACK, CMD_READ_MEM, CMD_READ_REG, CMD_WRITE_MEM, CMD_WRITE_REG, RX_FIFO_DEPTH

__all__ = ["BoardHost", "BoardError", "BoardLinkError", "BoardTimeoutError", "open_serial",
           "SIM_MAX_CYCLES", "CTRL_LAUNCH", "CTRL_RUNNING", "CTRL_DONE", "CTRL_ERROR"]

class BoardHost:
    """Drives a VTA board (the bitstream of ``vta hw build``) through its UART bridge.

    Parameters
    ----------
    transport
        an object with ``write(bytes)`` and ``read(n) -> bytes`` (fewer bytes on timeout): a
        pyserial ``Serial`` from :func:`open_serial`, a
        :class:`~vta_hw.board.simboard.SimulatedBoard`, or a test double.
    cfg : isa.VTAConfig, optional
        the configuration the bitstream was built for (default: the transport's ``cfg`` if
        it has one, else the reference 1x16x16).
    dram_words : int, optional
        the board's DRAM size in bus words (``build_bitstream(dram_words=...)``; default the
        transport's ``dram_words`` if it has one, else 8192).  The bridge's addresses wrap
        modulo the real size, so a wrong value corrupts memory: every access is checked
        against it.
    fifo_depth : int
        the bridge's receive FIFO (:data:`~vta_hw.board.uart.RX_FIFO_DEPTH`); the host never has
        more request bytes in flight than this.
    skip_unchanged : bool
        remember what the board's DRAM holds (what this host wrote or read back since the
        last launch) and skip writing words that already hold the right bytes.  A session
        cookie in an unused register detects a board that was reset or reprogrammed since,
        and then everything is written again.

    Attributes
    ----------
    bytes_sent, bytes_received : int
        traffic so far.
    """

    def __init__(self, transport, cfg: VTAConfig | None = None, *,
                 dram_words: int | None = None, fifo_depth: int = RX_FIFO_DEPTH,
                 skip_unchanged: bool = True):
        if not (hasattr(transport, "write") and hasattr(transport, "read")):
            raise BoardError(f"the transport must have write(bytes) and read(n), not "
                             f"{type(transport).__name__}")
        # a simulated board knows its configuration and DRAM size
        t_cfg, t_words = getattr(transport, "cfg", None), getattr(transport, "dram_words", None)
        if cfg is not None and t_cfg is not None and cfg != t_cfg:
            raise BoardError(f"the host's configuration ({cfg.bitstream}) is not the board's "
                             f"({t_cfg.bitstream})")
        if dram_words is not None and t_words is not None and dram_words != t_words:
            raise BoardError(f"dram_words={dram_words}, but the board has {t_words} words")
        cfg = cfg or t_cfg or VTAConfig()
        dram_words = dram_words if dram_words is not None else (t_words or 8192)
        if isinstance(dram_words, bool) or not isinstance(dram_words, int) or dram_words < 1:
            raise BoardError(f"dram_words must be a positive integer, not {dram_words!r}")
        bb = cfg.bus_bytes
        self.max_request = 1 + 4 + max(4, bb)
        if fifo_depth < self.max_request:
            raise BoardError(f"fifo_depth must be at least one command ({self.max_request} "
                             f"bytes), not {fifo_depth}")
        self.transport = transport
        self.cfg = cfg
        self.bus_bytes = bb
        self.dram_words = dram_words
        self.fifo_depth = fifo_depth
        self.skip_unchanged = skip_unchanged
        self.name = str(getattr(transport, "name", "") or "board")
        if hasattr(transport, "baudrate"):          # a serial port: its name is the port
            self.name = f"board:{self.name}"
        self.bytes_sent = 0
        self.bytes_received = 0
        self._out = bytearray()          # request bytes not yet handed to the transport
        self._pending: deque = deque()   # commands sent, answers not yet read
        self._in_flight = 0              # request bytes of those commands
        self._desynced = False
        # what the board's DRAM holds, where known (word granularity)
        self._shadow = np.zeros(dram_words * bb, dtype=np.uint8)
        self._known = np.zeros(dram_words, dtype=bool)
        self._fresh = bool(getattr(transport, "memory_zeroed", False))
        if self._fresh:
            self._known[:] = True        # a fresh simulated board: all zero
        self._cookie = None

    def __repr__(self):
        return (f"<BoardHost {self.name} {self.cfg.bitstream} {self.dram_words}x"
                f"{self.bus_bytes}B>")

    @property
    def mem_bytes(self) -> int:
        """The board's DRAM size in bytes."""
        return self.dram_words * self.bus_bytes

    # ------------------------------------------------------------------ the pipeline
    def _send(self, cmd: _Cmd, results: list) -> None:
        """Queue ``cmd``; first drain answers while the FIFO could not take its bytes."""
        if self._in_flight + len(cmd.req) > self.fifo_depth:
            self._drain(results, keep=self.fifo_depth // 2)
        self._out += cmd.req
        self._pending.append(cmd)
        self._in_flight += len(cmd.req)

    def _flush(self) -> None:
        if self._out:
            data = bytes(self._out)
            self._out.clear()
            try:
                n = self.transport.write(data)
            except Exception as e:
                self._desynced = True
                raise BoardLinkError(f"writing {len(data)} bytes to the board failed: "
                                     f"{e}") from e
            if n is not None and n != len(data):
                self._desynced = True
                raise BoardLinkError(f"the transport took {n} of {len(data)} bytes")
            self.bytes_sent += len(data)

    def _drain(self, results: list, keep: int = 0) -> None:
        """Read the answers of the oldest pending commands until at most ``keep`` request
        bytes remain in flight, in one read; check and decode them into ``results``."""
        self._flush()
        batch = []
        flight = self._in_flight
        for c in self._pending:
            if batch and flight <= keep:
                break
            batch.append(c)
            flight -= len(c.req)
        if not batch:
            return
        need = sum(c.ans_len for c in batch)
        try:
            data = bytes(self.transport.read(need))
        except Exception as e:
            self._desynced = True
            raise BoardLinkError(f"{batch[0].label}: reading the answer failed: {e}") from e
        self.bytes_received += len(data)
        pos = 0
        for c in batch:
            ans = data[pos:pos + c.ans_len]
            if len(ans) < c.ans_len:
                self._desynced = True
                self._pending.clear()
                self._in_flight = 0
                raise BoardLinkError(
                    f"{c.label}: the board answered {len(ans)} of {c.ans_len} bytes before "
                    f"the read timed out (board not programmed, wrong port or baud rate, or a "
                    f"lost byte?)")
            if c.kind == "ack" and ans[0] != ACK:
                self._desynced = True
                self._pending.clear()
                self._in_flight = 0
                raise BoardLinkError(f"{c.label}: expected ACK ({ACK:#04x}), got "
                                     f"{ans[0]:#04x} (the link is out of step)")
            results.append(ans)
            pos += c.ans_len
            self._pending.popleft()
            self._in_flight -= len(c.req)

    def _transact(self, cmds) -> list[bytes]:
        """Send ``cmds`` pipelined and return their answers in order."""
        if self._desynced:
            self.resync()
        results: list[bytes] = []
        try:
            for c in cmds:
                self._send(c, results)
            while self._pending:
                self._drain(results)
        except BaseException:
            # interrupted (Ctrl-C) or failed with answers outstanding: the next command
            # resynchronises first
            if self._pending or self._out:
                self._desynced = True
            raise
        return results

    # ------------------------------------------------------------------ commands
    def _reg_addr(self, reg) -> int:
        if isinstance(reg, bool) or not isinstance(reg, (int, np.integer)) or \
                not 0 <= int(reg) < 256:
            raise BoardError(f"register address must be an integer in [0, 256), not {reg!r}")
        return int(reg)

    def _cmd_write_reg(self, reg, value) -> _Cmd:
        a = self._reg_addr(reg)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
                not 0 <= int(value) < 1 << 32:
            raise BoardError(f"register value must be a 32-bit unsigned integer, not {value!r}")
        return _Cmd(bytes([CMD_WRITE_REG, a]) + int(value).to_bytes(4, "little"), 1,
                    f"W {_reg_name(a)}", "ack")

    def _cmd_read_reg(self, reg) -> _Cmd:
        a = self._reg_addr(reg)
        return _Cmd(bytes([CMD_READ_REG, a]), 4, f"R {_reg_name(a)}", "data")

    def write_reg(self, reg, value: int) -> None:
        """Write a 32-bit register (byte offset ``reg``, see :class:`~vta_hw.blocks.csr.Reg`)."""
        self._transact([self._cmd_write_reg(reg, value)])

    def read_reg(self, reg) -> int:
        """Read a 32-bit register."""
        (ans,) = self._transact([self._cmd_read_reg(reg)])
        return int.from_bytes(ans, "little")

    def read_regs(self, regs) -> list[int]:
        """Read several registers in one round trip."""
        return [int.from_bytes(a, "little")
                for a in self._transact([self._cmd_read_reg(r) for r in regs])]

    def _check_words(self, word: int, count: int, what: str) -> None:
        if isinstance(word, bool) or not isinstance(word, (int, np.integer)) or word < 0:
            raise BoardError(f"{what}: the word address must be a non-negative integer, "
                             f"not {word!r}")
        if word + count > self.dram_words:
            raise BoardError(f"{what}: words [{word}, {word + count}) are beyond the board's "
                             f"DRAM of {self.dram_words} words ({self.mem_bytes} bytes)")

    def write_words(self, word: int, data) -> int:
        """Write bus words from ``word`` on: ``data`` is bytes or a uint8 array whose length
        is a multiple of the bus width.  With ``skip_unchanged``, words known to hold the
        same bytes already are not sent.  Returns the number of words sent.
        """
        buf = _as_u8(data, "write_words")
        bb = self.bus_bytes
        if buf.size % bb:
            raise BoardError(f"write_words: {buf.size} bytes are not a whole number of "
                             f"{bb}-byte bus words")
        n = buf.size // bb
        self._check_words(word, n, "write_words")
        if n == 0:
            return 0
        word = int(word)
        if self.skip_unchanged:
            self._check_session()
        rows = buf.reshape(n, bb)
        send = np.ones(n, dtype=bool)
        if self.skip_unchanged:
            old = self._shadow[word * bb:(word + n) * bb].reshape(n, bb)
            send = ~self._known[word:word + n] | (old != rows).any(axis=1)
        cmds = [_Cmd(bytes([CMD_WRITE_MEM]) + (word + int(i)).to_bytes(4, "little")
                     + rows[i].tobytes(), 1, f"M word {word + int(i)}", "ack")
                for i in np.flatnonzero(send)]
        self._transact(cmds)
        self._shadow[word * bb:(word + n) * bb] = buf
        self._known[word:word + n] = True
        return len(cmds)

    def read_words(self, word: int, count: int) -> np.ndarray:
        """Read ``count`` bus words from ``word`` on; returns ``count * bus_bytes`` uint8."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise BoardError(f"read_words: the count must be a non-negative integer, "
                             f"not {count!r}")
        self._check_words(word, count, "read_words")
        word, count, bb = int(word), int(count), self.bus_bytes
        cmds = [_Cmd(bytes([CMD_READ_MEM]) + (word + i).to_bytes(4, "little"), bb,
                     f"m word {word + i}", "data") for i in range(count)]
        out = np.frombuffer(b"".join(self._transact(cmds)), dtype=np.uint8).copy()
        self._shadow[word * bb:(word + count) * bb] = out
        self._known[word:word + count] = True
        return out

    def _byte_range(self, addr: int, nbytes: int, what: str) -> tuple[int, int]:
        bb = self.bus_bytes
        if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)) or addr < 0:
            raise BoardError(f"{what}: the byte address must be a non-negative integer, "
                             f"not {addr!r}")
        if addr % bb:
            raise BoardError(f"{what}: byte address {addr:#x} is not aligned to the "
                             f"{bb}-byte bus word")
        if int(addr) + nbytes > self.mem_bytes:
            raise BoardError(f"{what}: bytes [{addr:#x}, {int(addr) + nbytes:#x}) are beyond "
                             f"the board's DRAM of {self.mem_bytes} bytes ({self.dram_words} "
                             f"words of {bb})")
        return int(addr) // bb, -(-nbytes // bb)

    def write_mem(self, addr: int, data) -> int:
        """Write bytes at a bus-aligned byte address (the tail of the last word is zero-
        padded).  Returns the number of words sent."""
        buf = _as_u8(data, "write_mem")
        word, n = self._byte_range(addr, buf.size, "write_mem")
        padded = np.zeros(n * self.bus_bytes, dtype=np.uint8)
        padded[:buf.size] = buf
        return self.write_words(word, padded)

    def read_mem(self, addr: int, nbytes: int) -> np.ndarray:
        """Read ``nbytes`` bytes from a bus-aligned byte address."""
        word, n = self._byte_range(addr, nbytes, "read_mem")
        return self.read_words(word, n)[:nbytes]

    # ------------------------------------------------------------------ link management
    def resync(self) -> None:
        """Bring the bridge back to a command boundary: zero bytes complete any half-received
        command (a zero byte between commands is ignored by the bridge), stale answers are
        discarded, then the link is checked.  Done automatically after a link error; call it
        after opening a port another process may have used (``run_board``, ``vta board`` and
        ``BoardDevice(port=...)`` do).

        Raises
        ------
        BoardLinkError
            the board still does not answer correctly.
        """
        self._out.clear()
        self._pending.clear()
        self._in_flight = 0
        self._known[:] = False          # a completed half command may have written memory
        try:
            self.transport.write(bytes(self.max_request))
            self.bytes_sent += self.max_request
            flush = getattr(self.transport, "flush", None)
            if flush is not None:
                flush()
            reset = getattr(self.transport, "reset_input_buffer", None)
            if reset is not None:
                baud = getattr(self.transport, "baudrate", None)
                if baud:
                    time.sleep(min(0.5, 40 * self.max_request * 10 / baud + 0.05))
                reset()
            else:
                while self.transport.read(64):
                    pass
        except Exception as e:
            raise BoardLinkError(f"resynchronising the link failed: {e}") from e
        self._desynced = False
        self._cookie = None
        self._fresh = False
        self.check_link()

    def check_link(self) -> None:
        """Write a pattern to a register the core ignores and read it back.

        Raises
        ------
        BoardLinkError
            no answer, or the pattern did not come back.
        """
        pattern = 0xA5C3_5A3C
        _, ans = self._transact([self._cmd_write_reg(Reg.OUT_BASE, pattern),
                                 self._cmd_read_reg(Reg.OUT_BASE)])
        got = int.from_bytes(ans, "little")
        if got != pattern:
            self._desynced = True
            raise BoardLinkError(f"R OUT_BASE: the board echoed {got:#010x} instead of "
                                 f"{pattern:#010x} (is this a VTA bitstream?)")
        self.write_reg(Reg.OUT_BASE, 0)

    def _check_session(self) -> None:
        """Make sure the memory shadow is still valid: the cookie register holds what this
        host wrote (a reset or reprogrammed board reads 0 there)."""
        if self._cookie is not None and self.read_reg(_COOKIE_REG) == self._cookie:
            return
        if self._cookie is not None or not self._fresh:
            self._known[:] = False
        self._fresh = False
        self._cookie = secrets.randbits(32) | 1
        self.write_reg(_COOKIE_REG, self._cookie)

    # ------------------------------------------------------------------ running
    def load_image(self, img: MemoryImage) -> int:
        """Write a :func:`~vta_hw.runners.image.pack_image` image at address 0; returns words sent.

        Raises
        ------
        BoardError
            the image does not fit the board's DRAM.
        """
        self._check_fits(img.data.size, img)
        return self.write_words(0, img.data)

    def _check_fits(self, nbytes: int, img: MemoryImage | None = None) -> None:
        if nbytes > self.mem_bytes:
            detail = (f" (DRAM image {img.image_bytes} bytes, instructions at "
                      f"{img.insn_addr:#x}, {img.insn_count} of them)" if img else "")
            raise BoardError(f"the image of {nbytes} bytes{detail} does not fit the board's "
                             f"DRAM of {self.mem_bytes} bytes ({self.dram_words} words of "
                             f"{self.bus_bytes}); build the bitstream with more dram_words")

    def launch(self, insn_addr: int, insn_count: int, *, writes=None) -> None:
        """Start the core on ``insn_count`` instructions at byte address ``insn_addr``.

        ``writes``: the byte ranges ``(lo, hi)`` the program can store to (its STOREs), if
        the caller knows them; the memory shadow forgets only those words (default: all).

        Raises
        ------
        BoardError
            the stream is empty, misaligned or outside the board's DRAM.
        """
        if isinstance(insn_count, bool) or not isinstance(insn_count, (int, np.integer)) or \
                insn_count <= 0:
            raise BoardError(f"launch: the instruction count must be a positive integer, "
                             f"not {insn_count!r}")
        align = max(INSN_BYTES, self.bus_bytes)
        if isinstance(insn_addr, bool) or not isinstance(insn_addr, (int, np.integer)) or \
                insn_addr < 0 or insn_addr % align:
            raise BoardError(f"launch: the instruction address must be a non-negative "
                             f"multiple of {align}, not {insn_addr!r}")
        end = int(insn_addr) + int(insn_count) * INSN_BYTES
        if end > self.mem_bytes:
            raise BoardError(f"launch: instructions [{int(insn_addr):#x}, {end:#x}) are beyond "
                             f"the board's DRAM of {self.mem_bytes} bytes")
        self._transact([self._cmd_write_reg(Reg.INSN_COUNT, int(insn_count)),
                        self._cmd_write_reg(Reg.INSN_ADDR, int(insn_addr)),
                        self._cmd_write_reg(Reg.CTRL, CTRL_LAUNCH)])
        if writes is None:
            self._known[:] = False       # the program may store anywhere
        else:
            bb = self.bus_bytes
            for lo, hi in writes:
                self._known[int(lo) // bb:-(-int(hi) // bb)] = False

    def stop(self) -> None:
        """Stop a running program: launching an empty stream resets every module of the core
        (nothing is fetched afterwards, so the core stays idle and leaves memory alone)."""
        self._transact([self._cmd_write_reg(Reg.INSN_COUNT, 0),
                        self._cmd_write_reg(Reg.CTRL, CTRL_LAUNCH)])

    def wait_done(self, *, max_cycles: int | None = None, timeout: float | None = None,
                  poll_interval: float = 0.0) -> dict:
        """Poll CTRL until the core is done; return ``{"cycles", "acc_write_cycles"}``.

        ``max_cycles`` bounds the CYCLES counter (default 2**31 on a board, 2,000,000 on a
        simulated one, like ``run_amaranth``); ``timeout`` bounds the wall-clock time
        (default 60 s on a board; none on a simulated board, whose time is its cycles).

        Raises
        ------
        BoardTimeoutError
            the CYCLES counter reached ``max_cycles`` or ``timeout`` seconds passed (the core
            is stopped first).
        RtlRunError
            the hardware stopped on an illegal instruction (``code``, ``index``).
        """
        simulated = bool(getattr(self.transport, "simulated", False))
        if max_cycles is None:
            max_cycles = SIM_MAX_CYCLES if simulated else 1 << 31
        if timeout is None:
            timeout = float("inf") if simulated else 60.0
        t0 = time.monotonic()
        while True:
            ctrl, cycles = self.read_regs([Reg.CTRL, Reg.CYCLES])
            if ctrl & CTRL_DONE:
                break
            waited = time.monotonic() - t0
            if cycles >= max_cycles or waited > timeout:
                self.stop()
                limit = (f"{max_cycles} cycles" if cycles >= max_cycles
                         else f"{timeout:g} s ({cycles} cycles)")
                raise BoardTimeoutError(f"the program did not finish within {limit}; "
                                        f"the core was stopped")
            if poll_interval:
                time.sleep(poll_interval)
        ctrl, cycles, acc, code, index = self.read_regs(
            [Reg.CTRL, Reg.CYCLES, Reg.ACC_WRITES, Reg.ERR_CODE, Reg.ERR_INDEX])
        if ctrl & CTRL_ERROR:
            try:
                ecode = ErrorCode(code)
                what = ecode.describe()
            except ValueError:
                ecode, what = code, f"unknown error code {code}"
            raise RtlRunError(f"instruction {index}: the hardware stopped: {what}",
                              code=ecode, index=index)
        return {"cycles": cycles, "acc_write_cycles": acc}

    def execute(self, insn_addr: int, insn_count: int, *, max_cycles: int | None = None,
                timeout: float | None = None, poll_interval: float = 0.0,
                writes=None) -> dict:
        """:meth:`launch` then :meth:`wait_done` (the program and data already in DRAM)."""
        self.launch(insn_addr, insn_count, writes=writes)
        return self.wait_done(max_cycles=max_cycles, timeout=timeout,
                              poll_interval=poll_interval)

    def run(self, insns: bytes, dram: np.ndarray, *, max_cycles: int | None = None,
            timeout: float | None = None, poll_interval: float = 0.0,
            validate: bool = True, progress=None) -> RunResult:
        """Execute ``insns`` on the board with ``dram`` as the DRAM image (byte 0 = address
        0), like :func:`vta_hw.runners.amaranth_sim.run_amaranth` and :func:`vta_hw.runners.rtlsim.run_rtl`.

        ``dram`` (a uint8 array) is updated in place with the image after execution.  The
        instructions go right after the image (aligned to 16 bytes and the bus word).
        ``cycles`` come from the CYCLES register; ``sim_seconds`` is the wall time of the
        whole run (load, execution, read-back); ``extra`` holds the phases and traffic.

        Raises
        ------
        BoardError
            a bad image, an image too large for the board, or a link failure.
        RtlRunError
            the hardware stopped on an illegal instruction (``code``, ``index``), or (as
            :class:`BoardTimeoutError`) the program did not finish.
        """
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8:
            kind = (f"an array of {dram.dtype}" if isinstance(dram, np.ndarray)
                    else type(dram).__name__)
            raise BoardError(f"the DRAM image must be a uint8 numpy array (it is updated in "
                             f"place), not {kind}")
        if not dram.flags.writeable:
            raise BoardError("the DRAM image array is read-only (it is updated in place)")
        if isinstance(insns, np.ndarray):
            insns = insns.tobytes()
        img = pack_image(bytes(insns), dram, self.cfg, align=max(INSN_BYTES, self.bus_bytes),
                         validate=validate)
        self._check_fits(img.data.size, img)
        sent0, recv0 = self.bytes_sent, self.bytes_received
        board0 = getattr(self.transport, "cycles", None)
        say = progress or (lambda message: None)
        t0 = time.perf_counter()
        say(f"writing the image ({img.data.size} bytes) ...")
        words = self.load_image(img)
        t1 = time.perf_counter()
        say(f"running {img.insn_count} instructions ({t1 - t0:.1f} s so far) ...")
        stats = self.execute(img.insn_addr, img.insn_count, max_cycles=max_cycles,
                             timeout=timeout, poll_interval=poll_interval)
        t2 = time.perf_counter()
        say(f"reading back {img.image_bytes} bytes ({t2 - t0:.1f} s so far) ...")
        out = self.read_mem(0, img.image_bytes)
        t3 = time.perf_counter()
        dram[...] = out.reshape(dram.shape)
        res = RunResult(dram, stats["cycles"], stats["acc_write_cycles"], t3 - t0, self.name)
        res.extra = {"load_seconds": round(t1 - t0, 3), "run_seconds": round(t2 - t1, 3),
                     "readback_seconds": round(t3 - t2, 3), "words_written": words,
                     "bytes_sent": self.bytes_sent - sent0,
                     "bytes_received": self.bytes_received - recv0}
        if isinstance(board0, int):      # a simulated board: its cycles, transfers included
            res.extra["board_cycles"] = self.transport.cycles - board0
        return res
