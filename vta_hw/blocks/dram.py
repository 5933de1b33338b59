"""A DRAM stand-in built from on-chip memory, serving the memory port (:mod:`vta_hw.blocks.memport`).

Used by the Amaranth-simulator runs (:mod:`vta_hw.runners.amaranth_sim`) and by the FPGA top level.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from .memport import MemPortSignature

__all__ = ["OnChipDram", "DRAM_MEM_SCRIPT"]

#: yosys commands (run after reading the design, as ``compute.ACC_MEM_SCRIPT``) that let a
#: read of :class:`OnChipDram`'s memory (``mem``) collide with a write to the same word and
#: return anything.  Without it yosys keeps the read port's read-old-data semantics on the
#: ECP5 with registers of the write and a bypass after the block RAMs (on the DRAM alone 143
#: flip-flops and 130 LUT4 more): a compare of the next read address with the write's
#: (``ext_en`` -> the read issue -> ``raddr_next`` -> that compare -> a register, s24_fmax:
#: 652eaba seed 3's critical path) and a 64-bit select into ``rd_q``.  Nothing reads a word
#: in the cycle it is written: the host port has both ports alone and reads nothing while it
#: writes, and a core LOAD of a word a STORE is writing in the same cycle is a race in the
#: program (the dependency tokens order them by many cycles); a read that is not issued is
#: never used.  The FPGA build of the ``pipelined`` core runs it
#: (:func:`vta_hw.board.fpga.build_bitstream`).
DRAM_MEM_SCRIPT = "setparam -set COLLISION_X_MASK 1 t:$memrd_v2 r:MEMID=\\\\mem %i"


class OnChipDram(wiring.Component):
    """A word-addressed RAM of ``depth`` bus words behind the memory port (slave side).

    Parameters
    ----------
    bus_width : int
    depth : int
        words (of ``bus_width`` bits); byte addresses wrap modulo ``depth * bus_bytes``.
    latency : int
        cycles between a read request handshake and its first beat (>= 1); up to four
        requests queue up and their latencies overlap; beats come one per cycle.
    init : list of int
        initial words.

    Members
    -------
    port : ``In(MemPortSignature)``  the slave side of the memory port.
    ext_en, ext_addr, ext_wdata, ext_we, ext_rdata : the host-side word port (synchronous
        read, data one cycle after the address) to load and read back the contents; while
        ``ext_en`` is high it borrows the memory's ports and the core's accesses wait, so the
        host uses it only while the core is idle.

    read_reg : bool
        the block RAM's read data goes into a register (``rd_q``) and from there into the read
        queue (FPGA timing: the block RAMs' clock-to-out and their output select drive that
        register only, not the queue's LUT RAM).  The word a read issues is then read from
        the block RAM a cycle earlier, at the read address's next value, so every beat, and
        every request taken, is in the same cycle as with ``read_reg=False`` (the RAM's data
        straight into the queue); a core read is not issued in the cycle after the host
        port had the RAM.

    Latency: reads ``latency + 1`` cycles to the first beat (at least 3); writes one beat per
    cycle, ``wr_done`` one cycle after the last beat, one write burst at a time.
    """

    def __init__(self, bus_width: int, depth: int, latency: int = 4, init=(),
                 read_reg: bool = True):
        self.bus_width = bus_width
        self.depth = depth
        self.latency = latency
        self.read_reg = bool(read_reg)
        self.init = list(init)
        super().__init__({"port": In(MemPortSignature(bus_width)),
                          "ext_en": In(1), "ext_addr": In(range(depth)),
                          "ext_wdata": In(bus_width), "ext_we": In(1),
                          "ext_rdata": Out(bus_width)})

    def elaborate(self, platform):
        m = Module()
        p = self.port
        lg = (self.bus_width // 8).bit_length() - 1
        m.submodules.mem = mem = self.mem = memory.Memory(
            shape=unsigned(self.bus_width), depth=self.depth,
                                               init=self.init)
        # one read and one write port (block RAM friendly); the host port borrows them
        rp = mem.read_port()
        wp = mem.write_port()
        m.d.comb += self.ext_rdata.eq(rp.data)

        # ---- read channel: requests queue up (with the cycle their data may start), so
        # the latency of queued bursts overlaps the data of earlier ones
        now = Signal(16)
        m.d.sync += now.eq(now + 1)
        m.submodules.rq = rq = fifo.SyncFIFOBuffered(width=32 + 24 + 16, depth=4)
        m.d.comb += [p.rd_req_ready.eq(rq.w_rdy),
                     rq.w_data.eq(Cat(p.rd_req_addr, p.rd_req_len,
                                      (now + self.latency - 1)[:16])),
                     rq.w_en.eq(p.rd_req_valid)]
        raddr = Signal(range(self.depth))
        rleft = Signal(24)
        start = Signal(16)
        rbusy = Signal()
        # the block RAM's output goes straight into a small FIFO (FPGA timing: no logic or
        # long route after the RAM's clock-to-out); a read is issued only when the FIFO has
        # room for it counting the read in flight, so beats stream at one per cycle under
        # the master's back-pressure.  The FIFO adds a cycle, which ``start`` gives back.
        m.submodules.rdq = rdq = fifo.SyncFIFO(width=self.bus_width, depth=4)
        inflight = Signal()
        m.d.comb += [p.rd_data_valid.eq(rdq.r_rdy), p.rd_data.eq(rdq.r_data),
                     rdq.r_en.eq(p.rd_data_ready), rdq.w_en.eq(inflight)]
        # the read port is always enabled (FPGA timing: no enable net from the issue logic
        # to the CE pins of every block RAM): a read whose data is not wanted is simply not
        # put into ``rdq``, and the host port's data is the word at its address of the
        # cycle before, as with an enable
        raddr_next = Signal.like(raddr)
        m.d.comb += raddr_next.eq(raddr)
        m.d.sync += raddr.eq(raddr_next)
        raddr_p1 = Signal.like(raddr, init=1)   # ``raddr + 1``, a register (loaded with it)
        m.d.sync += raddr_p1.eq(raddr_next + 1)
        # ``due`` (now >= start, modulo 2**16), ``rleft != 0`` and ``rleft == 1`` are
        # registers, computed a cycle ahead from the next ``now``, ``start`` and ``rleft``
        # (FPGA timing: no subtractor or wide compare in front of the issue logic); so is
        # the whole issue condition but the host port's ``ext_en`` (``go``, loaded with the
        # next values of its terms; with ``read_reg`` no core read is issued in the cycle
        # after the host port had the RAM, so ``go`` is loaded with ``~ext_en`` too), so the block RAM's read address is a select, by
        # ``go`` / ``ext_en`` and the pop of the request queue (flip-flops only), between
        # registers: ``raddr``, ``raddr_p1``, the queue head's address, ``ext_addr``
        # (twentieth session's f84a879 seeds 1 / 2: ``rleft_nz`` / ``ext_en`` -> the issue
        # -> ``raddr_next``'s select -> the block RAM's address pins)
        due = Signal(init=1)
        rleft_nz = Signal()
        rleft_one = Signal()        # ``rleft == 1``, a register like ``rleft_nz``
        # ``go``: rbusy & due & rleft_nz & room (& the host port idle a cycle ago), a register
        go = Signal()
        issue = Signal()
        m.d.comb += issue.eq(go & ~self.ext_en)
        m.d.sync += inflight.eq(issue)
        pop = Signal()
        m.d.comb += pop.eq(rq.r_rdy & (~rbusy | (issue & rleft_one)))
        q_addr = Signal.like(raddr)
        m.d.comb += q_addr.eq(rq.r_data[:32] >> lg)
        rleft_next = Signal(24)
        m.d.comb += rleft_next.eq(rleft)
        rbusy_next = Signal()
        m.d.comb += rbusy_next.eq(rbusy)
        nz_next = Signal()
        one_next = Signal()
        m.d.comb += [nz_next.eq(rleft_nz), one_next.eq(rleft_one)]
        with m.If(issue):
            m.d.comb += [rleft_next.eq(rleft - 1), raddr_next.eq(raddr_p1),
                         nz_next.eq(~rleft_one), one_next.eq(rleft == 2)]
            with m.If(rleft_one):
                m.d.comb += rbusy_next.eq(0)
        # the next burst starts in the cycle after the last beat of this one is issued
        q_len = rq.r_data[32:56]
        with m.If(pop):
            m.d.comb += [rq.r_en.eq(1), rleft_next.eq(q_len), raddr_next.eq(q_addr),
                         nz_next.eq(q_len != 0), one_next.eq(q_len == 1),
                         rbusy_next.eq(1)]
            m.d.sync += start.eq(rq.r_data[56:72])
        # ``due``'s next value for either ``start``, the select last
        due_keep = ((now + 1)[:16] - start)[15] == 0
        due_pop = ((now + 1)[:16] - rq.r_data[56:72])[15] == 0
        due_next = Signal()
        m.d.comb += due_next.eq(Mux(pop, due_pop, due_keep))
        # the read queue's room next cycle: its entries plus the read in flight, ``level +
        # inflight + issue - deq``, below 3.  From small equality flags of registers, with
        # the master's ``rd_data_ready`` (``deq``) in the last gate only (FPGA timing: the
        # loaders' ready logic -> one LUT -> ``go``, no compare chain after it; 1435d97 seed
        # 1: the loader's ``dat_more`` -> ``rd_data_ready`` -> a CCU2C compare -> ``go``)
        deq = rdq.r_rdy & p.rd_data_ready
        lvl = rdq.level
        n_eq = [(lvl == 0) & ~inflight] + [((lvl == k - 1) & inflight) | ((lvl == k) & ~inflight)
                                          for k in range(1, 4)]     # level + inflight == k
        # ``level + inflight + issue`` <= 2 and == 3
        le2 = Mux(issue, n_eq[0] | n_eq[1], n_eq[0] | n_eq[1] | n_eq[2])
        eq3 = Mux(issue, n_eq[2], n_eq[3])
        room_next = le2 | (deq & eq3)
        ext_free = ~self.ext_en if self.read_reg else 1
        m.d.sync += [rleft.eq(rleft_next), rleft_nz.eq(nz_next), rleft_one.eq(one_next),
                     rbusy.eq(rbusy_next), due.eq(due_next),
                     go.eq(rbusy_next & due_next & nz_next & room_next & ext_free)]
        if self.read_reg:
            # ``rd_q`` holds in cycle t + 1 the word at ``raddr`` of cycle t (the RAM is read
            # in cycle t - 1 at ``raddr_next``), what the RAM's data is without it
            rd_q = Signal(self.bus_width, name="rd_q", reset_less=True)
            m.d.sync += rd_q.eq(rp.data)
            m.d.comb += rdq.w_data.eq(rd_q)
            # ``raddr_next`` as a select between registers; ``go`` is ``issue`` unless
            # ``ext_en``, when the host's address is taken anyway
            pop_go = rq.r_rdy & (~rbusy | (go & rleft_one))
            # ``keep``: yosys' ABC would otherwise build it from ``raddr_next``'s logic (equal
            # to it unless ``ext_en``), so ``ext_en`` -> the issue -> the read address again
            # (s24_fmax, with ``DRAM_MEM_SCRIPT``: seed 3's ``ext_en`` -> ``go`` / ``rbusy``
            # -> ``raddr_next``'s select -> a block RAM's ``ADB8``, 11.88 ns, 4 LUT levels);
            # with it ``ext_en`` is one LUT from the block RAMs' read address
            core_addr = Signal.like(raddr, name="core_addr", attrs={"keep": 1})
            m.d.comb += core_addr.eq(Mux(pop_go, q_addr, Mux(go, raddr_p1, raddr)))
        else:
            m.d.comb += rdq.w_data.eq(rp.data)
            core_addr = raddr
        with m.If(self.ext_en):
            m.d.comb += rp.addr.eq(self.ext_addr)
        with m.Else():
            m.d.comb += rp.addr.eq(core_addr)
        # for the tests (tests/test_hw_blocks.py): the read channel's state
        self.rd_probe = dict(go=go, rbusy=rbusy, due=due, now=now, start=start, rleft=rleft,
                             rleft_nz=rleft_nz, rleft_one=rleft_one, inflight=inflight,
                             level=rdq.level, raddr=raddr, raddr_p1=raddr_p1, addr=rp.addr)

        # ---- write channel
        waddr = Signal(range(self.depth))
        wleft = Signal(24)
        wbusy = Signal()
        # ``wleft != 0`` and ``wleft == 1`` are registers, loaded with ``wleft`` (FPGA timing:
        # no 24-bit compare in front of ``wr_data_ready``, the store's beat and the OUT SRAM's
        # read enable)
        wleft_nz = Signal()
        wleft_one = Signal()
        m.d.comb += [p.wr_req_ready.eq(~wbusy),
                     p.wr_data_ready.eq(wbusy & wleft_nz & ~self.ext_en)]
        with m.If(self.ext_en):
            m.d.comb += [wp.addr.eq(self.ext_addr), wp.data.eq(self.ext_wdata),
                         wp.en.eq(self.ext_we)]
        with m.Else():
            m.d.comb += [wp.addr.eq(waddr), wp.data.eq(p.wr_data),
                         wp.en.eq(p.wr_data_valid & p.wr_data_ready)]
        with m.If(p.wr_req_valid & ~wbusy):
            m.d.sync += [wbusy.eq(1), waddr.eq(p.wr_req_addr >> lg), wleft.eq(p.wr_req_len),
                         wleft_nz.eq(p.wr_req_len != 0), wleft_one.eq(p.wr_req_len == 1)]
        with m.If(p.wr_data_valid & p.wr_data_ready):
            m.d.sync += [waddr.eq(waddr + 1), wleft.eq(wleft - 1),
                         wleft_nz.eq(~wleft_one), wleft_one.eq(wleft == 2)]
            with m.If(wleft_one):
                m.d.sync += [wbusy.eq(0), p.wr_done.eq(1)]
        with m.Else():
            m.d.sync += p.wr_done.eq(0)
        return m
