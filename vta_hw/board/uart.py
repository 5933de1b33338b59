"""A UART and the host bridge that drives the core's registers and DRAM over it (FPGA host
interface)."""


from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "HostBridge", "UartSystem", "CMD_WRITE_REG", "CMD_READ_REG",
           "CMD_WRITE_MEM", "CMD_READ_MEM", "ACK", "RX_FIFO_DEPTH"]

CMD_WRITE_REG = 0x57   #: 'W' addr(1) data(4)  -> ACK
CMD_READ_REG = 0x52    #: 'R' addr(1)          -> data(4)
CMD_WRITE_MEM = 0x4D   #: 'M' word(4) data(bus bytes) -> ACK
CMD_READ_MEM = 0x6D    #: 'm' word(4)          -> data(bus bytes)
ACK = 0x06
RX_FIFO_DEPTH = 256    #: request bytes a host may have in flight beyond the last answer


class UartRx(wiring.Component):
    """8N1 receiver.  ``data`` is valid for one cycle with ``valid``, about 1.5 bit times
    after the start bit's falling edge plus 8 bit times.

    Parameters
    ----------
    divisor : int
        clock cycles per bit.
    """

    rx: In(1, init=1)
    data: Out(8)
    valid: Out(1)

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"divisor must be at least 4, not {divisor}")
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        rx0 = Signal(init=1)
        m.d.sync += [rx0.eq(self.rx), rx.eq(rx0)]
        timer = Signal(range(2 * self.divisor))
        bit = Signal(range(10))
        shreg = Signal(8)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += [timer.eq(self.divisor + self.divisor // 2 - 1), bit.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), bit.eq(bit + 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.comb += [self.valid.eq(rx), self.data.eq(shreg)]
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """8N1 transmitter: takes ``data`` when ``valid & ready``; ``ready`` once the previous
    byte's stop bit has lasted a whole bit time."""

    tx: Out(1, init=1)
    data: In(8)
    valid: In(1)
    ready: Out(1)

    def __init__(self, divisor: int):
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        shreg = Signal(10)
        left = Signal(range(11))
        m.d.comb += self.ready.eq((left == 0) & (timer == 0))
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Elif(left != 0):
            m.d.sync += [self.tx.eq(shreg[0]), shreg.eq(shreg >> 1), left.eq(left - 1),
                         timer.eq(self.divisor - 1)]
        with m.Elif(self.valid):
            m.d.sync += [shreg.eq(Cat(0, self.data, 1)), left.eq(10)]
        return m


class HostBridge(wiring.Component):
    """Byte-stream commands to the core's register bus and the DRAM host port.

    Commands (little-endian fields): ``'W' addr data32`` writes a register and answers
    ``ACK``; ``'R' addr`` answers the register's 4 bytes; ``'M' word32 data`` writes one DRAM
    bus word and answers ``ACK``; ``'m' word32`` answers the word's bytes.

    Received bytes go through a FIFO of :data:`RX_FIFO_DEPTH` bytes, so a host may pipeline
    commands: as long as the request bytes it has sent beyond the last fully answered command
    fit in the FIFO, nothing is lost, whatever the answers' lengths (a command's answer waits
    until the previous answer has gone out).  A byte arriving at a full FIFO is dropped and
    sets ``overflow`` (sticky).

    Members
    -------
    rx_data, rx_valid : bytes from the host.
    overflow : ``Out(1)``  a received byte was dropped (FIFO full); sticky until reset.
    tx_data, tx_valid, tx_ready : bytes to the host.
    csr_addr, csr_wdata, csr_we, csr_rdata : the core's register bus.
    mem_en, mem_addr, mem_wdata, mem_we, mem_rdata : DRAM host port (``mem_en`` while a memory
        command executes; read data ``mem_latency`` cycles after the address).  The bridge
        registers ``mem_rdata`` (``mem_rdata_q``) before its answer select, so a memory read
        answers ``mem_latency + 1`` cycles after the address (FPGA timing: a block RAM's
        clock-to-out then drives one register, not the select into ``out``).

    ``registered_decode`` (the ``pipelined`` core's board): whether ARG has taken all of a
    command's bytes is a flip-flop (``arg_done``), loaded with the next values (the received
    command byte's length in CMD, ``n + 1`` against the registered length in ARG), instead
    of ``n == arg_len + dat_len`` decoded from ``cmd``; so the FIFO's read enable starts at
    registers of the FSM (s25_fmax, seeds 1 and 2: ``cmd`` -> the length decode -> the FSM
    -> ``take`` -> the receive FIFO's read enable, 10.9-11.1 ns).  Same outputs every cycle.
    """

    def __init__(self, bus_width: int, mem_depth: int, mem_latency: int = 1,
                 registered_decode: bool = False):
        if mem_latency not in (1, 2):
            raise ValueError(f"mem_latency must be 1 or 2, not {mem_latency}")
        self.mem_latency = mem_latency
        self.registered_decode = registered_decode
        self.bus_bytes = bus_width // 8
        super().__init__({
            "rx_data": In(8), "rx_valid": In(1), "tx_data": Out(8), "tx_valid": Out(1),
            "tx_ready": In(1), "overflow": Out(1), "csr_addr": Out(8), "csr_wdata": Out(32), "csr_we": Out(1),
            "csr_rdata": In(32), "mem_addr": Out(range(mem_depth)), "mem_wdata": Out(bus_width),
            "mem_en": Out(1), "mem_we": Out(1), "mem_rdata": In(bus_width)})

    def elaborate(self, platform):
        m = Module()
        bb = self.bus_bytes
        # the FIFO's read data comes straight from its block RAM (a DP16KD's clock-to-out is
        # about 5.6 ns), so a one-byte register stage (``rx_data``/``rx_valid``, refilled in the
        # cycle its byte is taken) stands between it and the command decode and data shifts
        # (FPGA timing); the FIFO is one byte shorter, so together they hold RX_FIFO_DEPTH
        m.submodules.rx_fifo = fifo = SyncFIFOBuffered(width=8, depth=RX_FIFO_DEPTH - 1)
        m.d.comb += [fifo.w_data.eq(self.rx_data), fifo.w_en.eq(self.rx_valid)]
        with m.If(self.rx_valid & ~fifo.w_rdy):
            m.d.sync += self.overflow.eq(1)
        rx_data = Signal(8, name="rx_byte", reset_less=True)
        rx_valid = Signal(name="rx_byte_valid")
        take = Signal()                 # the FSM takes ``rx_data`` when ``rx_valid``
        m.d.comb += fifo.r_en.eq(~rx_valid | take)
        with m.If(fifo.r_rdy & fifo.r_en):
            m.d.sync += [rx_data.eq(fifo.r_data), rx_valid.eq(1)]
        with m.Elif(take):
            m.d.sync += rx_valid.eq(0)
        rdata = Signal(8 * bb, name="mem_rdata_q", reset_less=True)
        m.d.sync += rdata.eq(self.mem_rdata)
        cmd = Signal(8)
        arg = Signal(32)
        data = Signal(8 * max(4, bb))
        n = Signal(range(max(4, bb) + 6))
        out = Signal(8 * max(4, bb))
        out_n = Signal(range(max(4, bb) + 1))
        m.d.comb += [self.csr_addr.eq(arg[:8]), self.csr_wdata.eq(data[:32]),
                     self.mem_addr.eq(arg), self.mem_wdata.eq(data[:8 * bb]),
                     self.tx_data.eq(out[:8]), self.tx_valid.eq(out_n != 0)]
        with m.If(self.tx_valid & self.tx_ready):
            m.d.sync += [out.eq(out >> 8), out_n.eq(out_n - 1)]
        def lengths(byte):
            """(argument bytes, data bytes) of command byte ``byte``."""
            arg_len = Signal(range(5))
            dat_len = Signal(range(bb + 5))
            with m.Switch(byte):
                with m.Case(CMD_WRITE_REG):
                    m.d.comb += [arg_len.eq(1), dat_len.eq(4)]
                with m.Case(CMD_READ_REG):
                    m.d.comb += arg_len.eq(1)
                with m.Case(CMD_WRITE_MEM):
                    m.d.comb += [arg_len.eq(4), dat_len.eq(bb)]
                with m.Case(CMD_READ_MEM):
                    m.d.comb += arg_len.eq(4)
            return arg_len, dat_len

        arg_len, dat_len = lengths(cmd)
        reg = self.registered_decode
        if reg:
            # ``need`` = arg_len + dat_len of ``cmd``; ``arg_done`` = ``n == need`` (in ARG)
            need = Signal(range(bb + 9), reset_less=True)
            arg_done = Signal(name="arg_done", reset_less=True)
            rx_alen, rx_dlen = lengths(rx_data)
            rx_need = rx_alen + rx_dlen
            all_taken = arg_done
        else:
            all_taken = n == arg_len + dat_len
        with m.FSM():
            with m.State("CMD"):
                m.d.comb += take.eq(1)
                with m.If(rx_valid):
                    m.d.sync += [cmd.eq(rx_data), n.eq(0), arg.eq(0), data.eq(0)]
                    if reg:
                        m.d.sync += [need.eq(rx_need), arg_done.eq(rx_need == 0)]
                    m.next = "ARG"
            with m.State("ARG"):
                with m.If(all_taken):
                    m.next = "EXEC"
                with m.Else():
                    m.d.comb += take.eq(1)
                    with m.If(rx_valid):
                        m.d.sync += n.eq(n + 1)
                        if reg:
                            m.d.sync += arg_done.eq(n + 1 == need)
                        with m.If(n < arg_len):
                            m.d.sync += arg.eq(arg | (rx_data << (n << 3)))
                        with m.Else():
                            m.d.sync += data.eq(
                                data | (rx_data << ((n - arg_len).as_unsigned()[:4] << 3)))
            with m.State("EXEC"):
                # an answer waits until the previous one has gone out (and so does a write,
                # so the host sees the effects in command order)
                with m.If(out_n == 0):
                    m.d.comb += self.mem_en.eq((cmd == CMD_WRITE_MEM) | (cmd == CMD_READ_MEM))
                    with m.Switch(cmd):
                        with m.Case(CMD_WRITE_REG):
                            m.d.comb += self.csr_we.eq(1)
                            m.d.sync += [out.eq(ACK), out_n.eq(1)]
                        with m.Case(CMD_READ_REG):
                            m.d.sync += [out.eq(self.csr_rdata), out_n.eq(4)]
                        with m.Case(CMD_WRITE_MEM):
                            m.d.comb += self.mem_we.eq(1)
                            m.d.sync += [out.eq(ACK), out_n.eq(1)]
                    with m.If(cmd == CMD_READ_MEM):
                        m.next = "MEMWAIT1"
                    with m.Else():
                        m.next = "CMD"
            # the read data arrives ``mem_latency`` cycles after EXEC, in the last MEMWAIT
            # state, and ``rdata`` holds it in MEMRD
            for i in range(1, self.mem_latency + 1):
                with m.State(f"MEMWAIT{i}"):
                    m.d.comb += self.mem_en.eq(1)
                    m.next = "MEMRD" if i == self.mem_latency else f"MEMWAIT{i + 1}"
            with m.State("MEMRD"):
                m.d.comb += self.mem_en.eq(1)
                m.d.sync += [out.eq(rdata), out_n.eq(bb)]
                m.next = "CMD"
        return m


class UartSystem(wiring.Component):
    """Everything the FPGA top level holds except clocking and pins: the core with its
    on-chip DRAM (:class:`~vta_hw.blocks.system.CoreWithDram`), a UART (``divisor`` clock cycles
    per bit) and the :class:`HostBridge` between them.  Simulating this component is
    simulating the board as the host sees it (:class:`vta_hw.board.host.SimulatedBoard`).

    Parameters
    ----------
    cfg : isa.VTAConfig
    divisor : int
        clock cycles per UART bit (at least 4).
    dram_words : int
        on-chip DRAM size in bus words (the bridge's memory addresses wrap modulo this).
    latency : int
        DRAM read latency in cycles.
    serial : bool
        True (the bitstream): the bridge talks through :class:`UartRx`/:class:`UartTx` on
        ``rx``/``tx``.  False (fast simulation only): the UART is left out and the bridge's
        byte stream is on ``host_rx_*``/``host_tx_*`` (one byte per cycle each way).
    **core_kw
        passed to the core generator (e.g. ``alu_stages=3`` as on the FPGA).

    Members
    -------
    rx : ``In(1)``   serial line from the host (idle high).
    tx : ``Out(1)``  serial line to the host.
    done : ``Out(1)``  the core's done flag (an LED on the board).
    rx_valid : ``Out(1)``  pulse per received byte (an LED on the board).
    overflow : ``Out(1)``  sticky: the bridge dropped a received byte (its FIFO was full).
    host_rx_data, host_rx_valid : ``In``  (``serial=False`` only) a byte into the bridge.
    host_tx_data, host_tx_valid, host_tx_ready : (``serial=False`` only) a byte out of the
        bridge, taken on ``valid & ready``.
    """

    def __init__(self, cfg, divisor: int, dram_words: int = 8192, latency: int = 8, *,
                 serial: bool = True, **core_kw):
        from ..blocks.system import CoreWithDram
        self.cfg = cfg
        self.divisor = divisor
        self.dram_words = dram_words
        self.serial = serial
        self.system_kw = core_kw
        self.system = CoreWithDram(cfg, dram_words, latency=latency, **core_kw)
        members = {"rx": In(1, init=1), "tx": Out(1, init=1), "done": Out(1),
                   "rx_valid": Out(1), "overflow": Out(1)}
        if not serial:
            members.update({"host_rx_data": In(8), "host_rx_valid": In(1),
                            "host_tx_data": Out(8), "host_tx_valid": Out(1),
                            "host_tx_ready": In(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sys = sys_ = self.system
        # the bridge's DRAM accesses reach the DRAM one cycle late, from registers (FPGA
        # timing: ``ext_en`` switches the DRAM's ports), so its reads take two cycles
        m.submodules.bridge = br = HostBridge(
            self.cfg.bus_width, self.dram_words, mem_latency=2,
            registered_decode=bool(self.system_kw.get("pipelined", False)))
        if self.serial:
            m.submodules.rx = rx = UartRx(self.divisor)
            m.submodules.tx = tx = UartTx(self.divisor)
            m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx),
                         br.rx_data.eq(rx.data), br.rx_valid.eq(rx.valid),
                         tx.data.eq(br.tx_data), tx.valid.eq(br.tx_valid),
                         br.tx_ready.eq(tx.ready)]
        else:
            m.d.comb += [self.tx.eq(1),
                         br.rx_data.eq(self.host_rx_data), br.rx_valid.eq(self.host_rx_valid),
                         self.host_tx_data.eq(br.tx_data), self.host_tx_valid.eq(br.tx_valid),
                         br.tx_ready.eq(self.host_tx_ready)]
        m.d.comb += [self.rx_valid.eq(br.rx_valid), self.done.eq(sys_.done),
                     self.overflow.eq(br.overflow),
                     br.csr_rdata.eq(sys_.csr_rdata), br.mem_rdata.eq(sys_.ext_rdata)]
        m.d.sync += [sys_.ext_addr.eq(br.mem_addr), sys_.ext_wdata.eq(br.mem_wdata),
                     sys_.ext_we.eq(br.mem_we), sys_.ext_en.eq(br.mem_en)]
        # a register write reaches the core one cycle late, from registers (FPGA timing: the
        # CSR ``launch`` resets the engine, a wide fan-out)
        m.d.sync += [sys_.csr_addr.eq(br.csr_addr), sys_.csr_wdata.eq(br.csr_wdata),
                     sys_.csr_we.eq(br.csr_we)]
        return m
