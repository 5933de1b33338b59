"""A simulated board: the bitstream's :class:`~vta_hw.board.uart.UartSystem` in Amaranth's
simulator behind the byte transport interface of a serial port, for :class:`BoardHost`
tests and for users without a board."""

from __future__ import annotations

from collections import deque

from amaranth.sim import Simulator

from isa import VTAConfig

from .host import BoardError, BoardLinkError
from .uart import UartSystem

__all__ = ["SimulatedBoard"]


class SimulatedBoard:
    """:class:`~vta_hw.board.uart.UartSystem` (core, on-chip DRAM, UART, host bridge) in
    Amaranth's simulator, with pyserial's ``write``/``read`` interface.

    ``write(data)`` queues bytes for the host's transmit line; ``read(n)`` advances the
    simulation, shifting queued bytes into ``rx`` bit by bit while decoding the bits the
    board sends on ``tx``, until ``n`` bytes have arrived or ``read_timeout_cycles`` pass
    (then it returns fewer bytes, like a serial port's read timeout).  Simulated time only
    advances inside ``read`` and :meth:`flush`, and the line is as fast (in board cycles) as
    the real one with ``divisor`` cycles per bit, so the host's pipelining limits apply
    exactly as on the board.

    Parameters
    ----------
    cfg : isa.VTAConfig, optional
    divisor : int
        board cycles per UART bit (at least 4; a byte takes ``10 * divisor`` cycles).
    dram_words, latency
        as :class:`~vta_hw.board.uart.UartSystem` (the FPGA build: 8192 words, latency 8).
    serial : bool
        True: real UART bits through :class:`~vta_hw.board.uart.UartRx`/:class:`~vta_hw.board.uart.UartTx`.
        False: the bridge's byte stream is driven directly (one byte per cycle each way; the
        same bridge, FIFO and core, far fewer simulated cycles).
    read_timeout_cycles : int, optional
        cycles ``read`` waits beyond the time the queued bytes need on the line (default
        ``2000 + 40 * divisor``).
    **core_kw
        core generator options (default ``alu_stages=3``, as on the FPGA).

    Attributes
    ----------
    cycles : int
        simulated board cycles so far.
    overflow : bool
        the bridge dropped a received byte (its FIFO overflowed): a host pipelining bug.
    memory_zeroed : bool
        no byte has been written yet, so the DRAM is all zero (:class:`BoardHost` then skips
        writing zero words).
    simulated : True
        tells :class:`BoardHost` that time is simulated (no wall-clock run timeout; the
        cycle limit defaults to 2,000,000).

    Simulation speed: the default core simulates at roughly 3-4k cycles/s, so one byte over
    the UART at divisor 4 costs about 10 ms; ``serial=False`` about 0.3 ms.
    """

    def __init__(self, cfg: VTAConfig | None = None, *, divisor: int = 4,
                 dram_words: int = 8192, latency: int = 8, serial: bool = True,
                 read_timeout_cycles: int | None = None, **core_kw):
        cfg = cfg or VTAConfig()
        if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 4:
            raise BoardError(f"the UART divisor must be an integer of at least 4, "
                             f"not {divisor!r}")
        core_kw.setdefault("alu_stages", 3)
        self.dram_words = dram_words
        self.cfg = cfg
        self.divisor = int(divisor)
        self.serial = serial
        self.name = "simulated-uart" if serial else "simulated-bytes"
        self.read_timeout_cycles = (2000 + 40 * self.divisor if read_timeout_cycles is None
                                    else int(read_timeout_cycles))
        self.top = top = UartSystem(cfg, self.divisor, dram_words, latency, serial=serial,
                                    **core_kw)
        self.cycles = 0
        self.overflow = False
        self.memory_zeroed = True
        self.simulated = True
        self._outgoing: deque = deque()
        self._received = bytearray()
        self._shifting = False
        self._framing_error = None
        self._sim = sim = Simulator(top)
        sim.add_clock(1e-8)
        if serial:
            sim.add_testbench(self._drive_rx, background=True)
            sim.add_testbench(self._watch_tx, background=True)
        else:
            sim.add_testbench(self._drive_bytes, background=True)
        sim.add_testbench(self._watch_overflow, background=True)

    def __repr__(self):
        return (f"<SimulatedBoard {self.cfg.bitstream} {self.name} divisor={self.divisor} "
                f"cycle {self.cycles}>")

    # ------------------------------------------------------------------ testbenches
    async def _drive_rx(self, ctx):
        """Shift queued bytes into ``rx``: start bit, 8 data bits LSB first, stop bit."""
        div = self.divisor
        while True:
            if not self._outgoing:
                self._shifting = False
                await ctx.tick()
                self.cycles += 1
                continue
            self._shifting = True
            b = self._outgoing.popleft()
            for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]:
                ctx.set(self.top.rx, bit)
                await ctx.tick().repeat(div)
                self.cycles += div

    async def _watch_tx(self, ctx):
        """Decode ``tx``: after a falling edge, sample each bit once per bit time (the
        transmitter changes ``tx`` on clock edges, so a sample right after an edge holds the
        bit for the whole bit time)."""
        div = self.divisor
        tx = self.top.tx
        while True:
            await ctx.negedge(tx)
            byte = 0
            for i in range(8):
                await ctx.tick().repeat(div)
                byte |= ctx.get(tx) << i
            await ctx.tick().repeat(div)
            if not ctx.get(tx) and self._framing_error is None:
                self._framing_error = self.cycles
            self._received.append(byte)

    async def _drive_bytes(self, ctx):
        """``serial=False``: one byte per cycle into the bridge, one out of it."""
        top = self.top
        ctx.set(top.host_tx_ready, 1)
        while True:
            if self._outgoing:
                ctx.set(top.host_rx_data, self._outgoing.popleft())
                ctx.set(top.host_rx_valid, 1)
            else:
                ctx.set(top.host_rx_valid, 0)
            if ctx.get(top.host_tx_valid):
                self._received.append(ctx.get(top.host_tx_data))
            await ctx.tick()
            self.cycles += 1

    async def _watch_overflow(self, ctx):
        await ctx.posedge(self.top.overflow)
        self.overflow = True

    # ------------------------------------------------------------------ stepping
    def _line_cycles(self, nbytes: int) -> int:
        return nbytes * (10 * self.divisor if self.serial else 1)

    def _step_until(self, done, budget: int) -> None:
        end = self.cycles + budget
        advance = self._sim.advance
        while not done() and self.cycles < end:
            advance()
        if self._framing_error is not None:
            at, self._framing_error = self._framing_error, None
            raise BoardLinkError(f"simulated board: framing error on tx (no stop bit) near "
                                 f"cycle {at}")

    # ------------------------------------------------------------------ transport API
    def write(self, data) -> int:
        """Queue bytes for the board (they reach it while the simulation advances)."""
        data = bytes(data)
        if data:
            self.memory_zeroed = False
        self._outgoing.extend(data)
        return len(data)

    def read(self, n: int) -> bytes:
        """Advance until ``n`` bytes have arrived (or the read timeout) and return them."""
        n = int(n)
        budget = self._line_cycles(len(self._outgoing) + 1 + n) + self.read_timeout_cycles
        self._step_until(lambda: len(self._received) >= n, budget)
        out = bytes(self._received[:n])
        del self._received[:n]
        return out

    def flush(self) -> None:
        """Advance until every queued byte has been sent (like pyserial's ``flush``)."""
        budget = self._line_cycles(len(self._outgoing) + 1) + 16
        self._step_until(lambda: not self._outgoing and not self._shifting, budget)

    @property
    def in_waiting(self) -> int:
        """Bytes received and not yet read."""
        return len(self._received)

    def run_cycles(self, n: int) -> None:
        """Advance ``n`` cycles (the line keeps shifting queued bytes)."""
        self._step_until(lambda: False, int(n))

    def close(self) -> None:
        """Nothing to release (pyserial compatibility)."""
