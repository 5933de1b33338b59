"""A VTA board (the ``vta hw build`` bitstream) as a device, through its UART bridge.

The board's DRAM is on the FPGA, so this device keeps the runtime's memory on the host (as
every device does) and mirrors it: before each run it writes the live buffers to the board
(only the bus words that changed since the board last held them), launches the stream, polls
until done, and reads the live buffers back.  The register protocol is the one of
:mod:`vta_runtime.board` (INSN_COUNT, INSN_ADDR, CTRL = launch, poll done, CYCLES,
ACC_WRITES, ERR_CODE/ERR_INDEX), spoken by :class:`vta_hw.board.host.BoardHost`.

Transports: a serial port (``port=``, needs pyserial), ``simulate=True`` (the bitstream's
design in Amaranth's simulator, :class:`vta_hw.board.simboard.SimulatedBoard`; slow, for tests and
bring-up without a board) or any object with ``write``/``read`` (``transport=``).

Limitations (stated, not hidden):

* the device memory is the board's DRAM: ``dram_words * bus_bytes`` bytes (64 KiB for the
  default build), page 0 included (never allocated);
* only live buffers travel: a program that stores into memory no buffer owns writes the
  board's DRAM but not the host copy (``readback="stores"`` reads back exactly the STORE
  targets instead, trusting that the core writes DRAM only through STOREs);
* the board's SRAMs keep their contents between runs (the launch resets the modules and
  the token counters, not the memories); the runtime assumes nothing across runs;
* at 115200 baud a bus word costs about 1.1 ms to write and 0.7 ms to read back.
"""

from __future__ import annotations

from .device import Device
from .errors import DeviceError
from .memory import PAGE_BYTES

__all__ = ["BoardDevice"]


class BoardDevice(Device):
    """Runs instruction streams on a VTA FPGA board (or its simulation) over the UART.

    Parameters
    ----------
    config : isa.VTAConfig, optional
        the configuration the bitstream was built for.
    port : str, optional
        serial port of the board (e.g. ``/dev/ttyUSB0``); needs pyserial.
    baud : int
        UART baud rate of the bitstream (115200).
    simulate : bool
        use :class:`vta_hw.board.simboard.SimulatedBoard` instead of a port.
    transport : optional
        any object with ``write(bytes)`` / ``read(n)`` (overrides ``port``/``simulate``).
    dram_words : int
        the board's DRAM in bus words (the bitstream's, 8192 by default).
    max_cycles : int, optional
        cycle limit of one run (also capped by ``synchronize``'s ``wait_cycles``; default
        2**31 on a board, 2,000,000 simulated).
    timeout : float, optional
        wall-clock limit of one run in seconds (default 60 on a board, none simulated).
    read_timeout : float
        serial read timeout in seconds (a silent board fails after this long).
    readback : {"live", "stores"}
        what is read back after a run: every live buffer (default; also checks that the
        core wrote nothing else into them), or only the byte ranges the stream's STOREs
        target (decoded from the stream; far less traffic on a real board).
    **sim_kw
        passed to :class:`~vta_hw.board.simboard.SimulatedBoard` (e.g. ``serial=False`` for the
        fast byte-level simulation, ``divisor``).

    Raises
    ------
    DeviceError
        vta_hw (or pyserial) is missing, the port cannot be opened, the link fails, the run
        times out, or the hardware flags an illegal instruction (the message names it).
    """

    name = "board"

    def __init__(self, config=None, *, port: str | None = None, baud: int = 115200,
                 simulate: bool = False, transport=None, dram_words: int = 8192,
                 max_cycles: int | None = None, timeout: float | None = None,
                 read_timeout: float = 2.0,
                 readback: str = "live", **sim_kw):
        from isa import VTAConfig
        config = config or VTAConfig()
        if readback not in ("live", "stores"):
            raise DeviceError(f"BoardDevice: readback must be 'live' or 'stores', not "
                              f"{readback!r}")
        self.readback = readback
        capacity = dram_words * config.bus_bytes
        if capacity < 2 * PAGE_BYTES:
            raise DeviceError(f"BoardDevice: a board DRAM of {dram_words} words "
                              f"({capacity} bytes) is smaller than two {PAGE_BYTES}-byte pages")
        super().__init__(config, capacity=capacity, max_alloc=capacity - PAGE_BYTES)
        try:
            from vta_hw.errors import HwError
            from vta_hw.board.host import BoardHost, open_serial
        except ImportError as e:
            raise DeviceError(f"BoardDevice needs vta_hw (pip install -e '.[hw]'): {e}") from e
        try:
            if transport is None:
                if simulate:
                    from vta_hw.board.simboard import SimulatedBoard
                    transport = SimulatedBoard(config, dram_words=dram_words, **sim_kw)
                elif port is None:
                    raise DeviceError("BoardDevice: give a serial port, simulate=True or a "
                                      "transport")
                else:
                    transport = open_serial(port, baud, timeout=read_timeout)
            self.host = BoardHost(transport, config, dram_words=dram_words)
            if port is not None and not simulate:
                self.host.resync()       # a previous host may have left a command half sent
        except HwError as e:
            raise DeviceError(f"board: {e}") from e
        self.transport = transport
        self.max_cycles, self.timeout = max_cycles, timeout
        self._core_options = {k: sim_kw[k] for k in ("alu_stages", "pipelined", "latency")
                              if k in sim_kw}

    @property
    def timing_preset(self) -> str | None:
        """The vta_sim timing preset that models the bitstream's core (:func:`vta_sim.timing.
        preset_for_core` of a board: the on-chip DRAM of latency 8, ``alu_stages`` 3):
        ``vta_hw_fpga``, or ``vta_hw_fpga_pipelined`` for a ``pipelined`` build (a simulated
        board made with ``pipelined=True``; a real board says nothing of its build, so give
        ``pipelined=`` to the constructor of a board holding such a bitstream).  None when
        the simulated core's options match no preset."""
        from vta_sim.timing import preset_for_core
        kw = self._core_options
        return preset_for_core("board", kw.get("latency"), alu_stages=kw.get("alu_stages"),
                               pipelined=kw.get("pipelined", False))

    def _regions(self) -> list[tuple[int, int]]:
        """Byte ranges of the live buffers, widened to bus words and merged."""
        return self._merge((b.phys, b.phys + b.nbytes) for b in self._buffers.values())

    def _store_ranges(self, insn_phys: int, insn_count: int):
        """Byte ranges the stream's STOREs write (widened to bus words, merged), or None if
        the stream does not decode or a STORE reaches beyond the board's DRAM (where the
        board's addresses would wrap)."""
        import numpy as np

        from isa import IsaError, Opcode, decode_stream
        try:
            arr = decode_stream(self.insn_bytes(insn_phys, insn_count), self.config)
        except IsaError:
            return None
        m = (arr.opcode == int(Opcode.STORE)) & (arr.x_size > 0) & (arr.y_size > 0)
        eb = self.config.out_elem_bytes
        lo = arr.dram_base[m] * eb
        hi = (arr.dram_base[m] + (arr.y_size[m] - 1) * arr.x_stride[m] + arr.x_size[m]) * eb
        if np.any(hi > self.memory.capacity):
            return None
        return self._merge(zip(lo.tolist(), hi.tolist()))

    def _merge(self, spans) -> list[tuple[int, int]]:
        bb = self.config.bus_bytes
        out: list[list[int]] = []
        for lo, hi in sorted(spans):
            lo, hi = lo - lo % bb, -(-hi // bb) * bb
            if out and lo <= out[-1][1]:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        return [(lo, hi) for lo, hi in out]

    def _execute(self, insn_phys, insn_count, wait_cycles):
        from vta_hw.errors import HwError
        regions = self._regions()
        back = writes = None
        if self.readback == "stores":
            back = writes = self._store_ranges(insn_phys, insn_count)
        if back is None:
            back = regions
        data = self.memory.data
        try:
            sent = sum(self.host.write_mem(lo, data[lo:hi]) for lo, hi in regions)
            cap = None if int(wait_cycles) >= 1 << 31 else int(wait_cycles)
            if self.max_cycles is not None:
                cap = self.max_cycles if cap is None else min(cap, self.max_cycles)
            stats = self.host.execute(insn_phys, insn_count, max_cycles=cap,
                                      timeout=self.timeout, writes=writes)
            for lo, hi in back:
                data[lo:hi] = self.host.read_mem(lo, hi - lo)
        except HwError as e:
            raise DeviceError(f"board: {e}") from e
        stats["words_written"] = sent
        return stats

    def close(self) -> None:
        """Close the transport (the serial port)."""
        close = getattr(self.transport, "close", None)
        if close is not None:
            close()
