"""The 2-D strided, zero-padded tile loader shared by the load and compute modules."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .dsp import is_ecp5, registered_product
from .memport import ADDR_BITS, ReadSignature
from .replica import replicated_register

__all__ = ["TileLoader"]


def _log2(v: int) -> int:
    assert v > 0 and v & (v - 1) == 0, v
    return v.bit_length() - 1


class TileLoader(wiring.Component):
    """Execute the data movement of one LOAD instruction (spec §3.4).

    Writes ``(y_pad_0 + y_size + y_pad_1) * (x_pad_0 + x_size + x_pad_1)`` consecutive SRAM
    elements from ``sram_base``: zero tiles for the padding, and for each of the ``y_size``
    rows one read burst of ``x_size`` elements at byte address
    ``(dram_base + y*x_stride) * E``.  Three independent parts run at once: the request side
    issues the row bursts back to back (as many as the memory port accepts, so DRAM latency
    overlaps), the data side writes each beat as it arrives, and the zero side writes the
    padding runs in the cycles without a data beat.

    Parameters
    ----------
    bus_width : int
        memory bus width in bits.
    elem_bytes : list of int
        DRAM bytes per element for each *kind* of load this loader handles (powers of two).
    depths : list of int
        SRAM depth (elements) of each kind, for the range check.
    zero_copies : int
        copies of ``wr_zero`` in ``wr_zero_rep`` (0: no such member), each a register of the
        same value (kept flip-flops on an ECP5, ``replica.replicated_register``), so a wide
        SRAM's write data can take its zero select from a copy beside its block RAMs
        (``tile_write(..., zeros=loader.wr_zero_rep)``) instead of one register fanned out
        over the die.
    dsp_products : bool
        (the ``pipelined`` core) the set-up's three products (``total``, ``ylead``,
        ``ytail``) each in a multiplier with its operands and product registered inside it
        (:func:`vta_hw.blocks.dsp.registered_product`; on an ECP5 a MULT18X18D with input
        and output registers), the operands taken a cycle early from the sums ``rowlen`` /
        ``nrows`` are loaded with: the same values in the same cycles.

    Members
    -------
    cmd_valid, cmd_ready, cmd_kind, cmd_sram, cmd_dram, cmd_y, cmd_x, cmd_stride,
    cmd_ypad0, cmd_ypad1, cmd_xpad0, cmd_xpad1 :
        the command, taken when ``cmd_valid & cmd_ready`` (``cmd_ready`` = idle).
    done : ``Out(1)``
        one-cycle pulse when every element is written.
    range_error : ``Out(1)``
        one-cycle pulse instead of ``done`` when the region exceeds the SRAM depth (nothing
        is written).
    rd : ``Out(ReadSignature)``
        read master.
    wr_valid, wr_addr, wr_zero, wr_data, wr_lane :
        SRAM write: element ``wr_addr`` gets zero (``wr_zero``) or, for an element of ``E >=
        bus_bytes`` bytes, beat ``wr_lane`` of it (``wr_data``); for ``E < bus_bytes`` the
        whole element in the low bits of ``wr_data``.
    wr_zero_rep : ``Out(zero_copies)`` (with ``zero_copies``)  each bit equal to ``wr_zero``.

    Latency: 4 cycles from command to the first request; then one beat per cycle (one
    element per cycle when ``E < bus_bytes``); the ``wr_*`` outputs are registered (a
    write appears one cycle after its data beat), and ``done`` pulses in the cycle of the
    last write.
    """

    def __init__(self, bus_width: int, elem_bytes, depths, zero_copies: int = 0,
                 dsp_products: bool = False):
        self.bus_width = bus_width
        self.zero_copies = zero_copies
        self.dsp_products = bool(dsp_products)
        self.bus_bytes = bus_width // 8
        self.elem_bytes = list(elem_bytes)
        self.depths = list(depths)
        self.max_lanes = max(1, max(e // self.bus_bytes for e in self.elem_bytes))
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1), "cmd_kind": In(range(max(2, len(elem_bytes)))),
            "cmd_sram": In(16), "cmd_dram": In(32), "cmd_y": In(16), "cmd_x": In(16),
            "cmd_stride": In(16), "cmd_ypad0": In(4), "cmd_ypad1": In(4), "cmd_xpad0": In(4),
            "cmd_xpad1": In(4),
            "done": Out(1), "range_error": Out(1),
            "rd": Out(ReadSignature(bus_width)),
            "wr_valid": Out(1), "wr_addr": Out(16), "wr_zero": Out(1),
            "wr_data": Out(bus_width), "wr_lane": Out(range(max(2, self.max_lanes))),
            "wr_kind": Out(range(max(2, len(elem_bytes)))),
            **({"wr_zero_rep": Out(zero_copies)} if zero_copies else {}),
        })

    def elaborate(self, platform):
        m = Module()
        B = self.bus_bytes
        kind = Signal.like(self.cmd_kind)
        sram = Signal(17)
        dram = Signal(32)
        y_size = Signal(16)
        x_size = Signal(16)
        stride = Signal(16)
        yp0, yp1, xp0, xp1 = (Signal(4, name=n) for n in ("yp0", "yp1", "xp0", "xp1"))
        # sizes, registered over three set-up cycles (SIZES, PRODUCTS, CHECK) to keep the
        # multiplications off the critical path: each product lands in a register of its
        # own (``total``, ``ylead`` = yp0 * rowlen, ``ytail`` = yp1 * rowlen), with no adder
        # after the multiplier in that cycle (FPGA timing: a MULT18X18D without registers is
        # slow enough); ``lead`` / ``tail`` add the pads to them a cycle later (``lead`` in
        # CHECK, where it is used; ``tail`` registered in CHECK, used in RUN at the earliest)
        rowlen = Signal(18)
        nrows = Signal(18)
        total = Signal(36)
        ylead = Signal(22)
        sram_x0 = Signal(18, name="sram_x0", reset_less=True)    # sram + xp0, in SIZES
        ytail = Signal(22)
        lead = Signal(24)
        tail = Signal(24)
        if self.dsp_products:
            # ``dsp_products``: the three products run inside their MULT18X18D, from its
            # input registers to its output register (:func:`registered_product`): the input
            # registers take what ``rowlen`` / ``nrows`` take at the end of SIZES (the same
            # sums, ``yp0`` / ``yp1`` as they are), the output registers are ``total`` /
            # ``ylead`` / ``ytail`` at the end of PRODUCTS, as above, and they hold while the
            # command's fields do (until the next command, after CHECK).  FPGA timing: no
            # fabric register -> DSP -> fabric register path (routing to and from the DSP)
            rl_d = (xp0 + x_size + xp1)[:18]
            nr_d = (yp0 + y_size + yp1)[:18]
            primitive = is_ecp5(platform)
            total = registered_product(m, rl_d, nr_d, 36, "total", primitive=primitive)
            ylead = registered_product(m, yp0, rl_d, 22, "ylead", primitive=primitive)
            ytail = registered_product(m, yp1, rl_d, 22, "ytail", primitive=primitive)
        # the SRAM write (w_*) is registered before it leaves (FPGA timing: the write
        # address, data and enables fan out to every block RAM of the SRAM); it lands one
        # cycle after it is formed, which is still before anyone can read the element
        w = {n: Signal.like(getattr(self, f"wr_{n}"), name=f"w_{n}")
             for n in ("valid", "addr", "zero", "data", "lane")}
        m.d.sync += [getattr(self, f"wr_{n}").eq(sig) for n, sig in w.items()]
        m.d.sync += self.wr_kind.eq(kind)
        if self.zero_copies:
            m.d.comb += self.wr_zero_rep.eq(Cat(*replicated_register(
                m, w["zero"], self.zero_copies, "wr_zero_rep", platform)))
        depth = Signal(18)
        shift = Signal(4)
        with m.Switch(kind):
            for k, (e, d) in enumerate(zip(self.elem_bytes, self.depths)):
                with m.Case(k):
                    m.d.comb += [depth.eq(d), shift.eq(_log2(e))]
        # registered in SIZES (FPGA timing: no kind decode or shifter in front of the
        # request and data adders, nor of the range check): the row stride and the first
        # row's address in bytes, and the room left in the SRAM after ``sram``
        stride_bytes = Signal(24, reset_less=True)
        first = Signal(ADDR_BITS + 8, reset_less=True)
        room = Signal(19, reset_less=True)
        # ``req_y < y_size``, ``dat_y < y_size``, ``zrow < y_size`` and ``zrow + 1 < y_size``
        # kept as flags (the counters only count up to ``y_size``), so no compare sits in
        # front of the read request or the write enables
        req_more, dat_more, z_more, z_more2 = (Signal(name=n) for n in
                                               ("req_more", "dat_more", "z_more", "z_more2"))

        # request side: one read burst per row, issued back to back
        req_y = Signal(16)
        req_addr = Signal(ADDR_BITS + 8)
        # data side
        dat_y = Signal(16)
        dat_base = Signal(18)      # SRAM index of the first data element of row dat_y
        dat_addr = Signal(ADDR_BITS + 8)   # DRAM byte address of row dat_y
        waddr = Signal(18)
        lane = Signal(range(max(2, self.max_lanes)))
        elems_left = Signal(17)
        max_epb = max([B // e for e in self.elem_bytes if e < B] + [2])
        pos = Signal(range(max_epb))
        # zero side: runs of padding between data rows
        zaddr = Signal(18)
        zcnt = Signal(20)
        zrow = Signal(17)
        zrow_data = Signal(18)

        running = Signal()
        data_wr = Signal()
        with m.If(data_wr):
            m.d.comb += [w["valid"].eq(1), w["addr"].eq(waddr)]
        with m.Elif(running & (zcnt != 0)):
            m.d.comb += [w["valid"].eq(1), w["zero"].eq(1), w["addr"].eq(zaddr)]
            m.d.sync += [zaddr.eq(zaddr + 1), zcnt.eq(zcnt - 1)]
        with m.If(running & (zcnt == 0) & z_more):
            m.d.sync += [zaddr.eq(zrow_data + x_size), zrow.eq(zrow + 1),
                         zrow_data.eq(zrow_data + rowlen),
                         z_more.eq(z_more2), z_more2.eq(z_more2 & (zrow + 2 != y_size))]
            with m.If(z_more2):
                m.d.sync += zcnt.eq(xp1 + xp0)
            with m.Else():
                m.d.sync += zcnt.eq(tail)

        with m.If(running & req_more):
            m.d.comb += self.rd.rd_req_valid.eq(1)
            with m.Switch(kind):
                for k, e in enumerate(self.elem_bytes):
                    with m.Case(k):
                        if e >= B:
                            m.d.comb += [self.rd.rd_req_addr.eq(req_addr),
                                         self.rd.rd_req_len.eq(x_size << _log2(e // B))]
                        else:
                            epb = B // e
                            off = req_addr[:_log2(B)] >> _log2(e)
                            m.d.comb += [
                                self.rd.rd_req_addr.eq((req_addr >> _log2(B)) << _log2(B)),
                                self.rd.rd_req_len.eq((off + x_size + epb - 1) >> _log2(epb))]
            with m.If(self.rd.rd_req_ready):
                m.d.sync += [req_y.eq(req_y + 1), req_addr.eq(req_addr + stride_bytes),
                             req_more.eq(req_y + 1 != y_size)]

        row_end = Signal()
        with m.If(running & dat_more):
            with m.Switch(kind):
                for k, e in enumerate(self.elem_bytes):
                    with m.Case(k):
                        self._data_beat(m, e, w, waddr, lane, elems_left, pos, data_wr,
                                        row_end)
        with m.If(row_end):
            nxt = dat_addr + stride_bytes
            m.d.sync += [dat_y.eq(dat_y + 1), dat_more.eq(dat_y + 1 != y_size),
                         dat_base.eq(dat_base + rowlen),
                         waddr.eq(dat_base + rowlen), dat_addr.eq(nxt), lane.eq(0),
                         elems_left.eq(x_size)]
            self._row_pos(m, kind, nxt, pos)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd_ready.eq(1)
                with m.If(self.cmd_valid):
                    m.d.sync += [kind.eq(self.cmd_kind), sram.eq(self.cmd_sram),
                                 dram.eq(self.cmd_dram), y_size.eq(self.cmd_y),
                                 x_size.eq(self.cmd_x), stride.eq(self.cmd_stride),
                                 yp0.eq(self.cmd_ypad0), yp1.eq(self.cmd_ypad1),
                                 xp0.eq(self.cmd_xpad0), xp1.eq(self.cmd_xpad1)]
                    m.next = "SIZES"
            with m.State("SIZES"):
                m.d.sync += [rowlen.eq(xp0 + x_size + xp1), nrows.eq(yp0 + y_size + yp1),
                             stride_bytes.eq(stride << shift), first.eq(dram << shift),
                             room.eq(depth - sram), sram_x0.eq(sram + xp0)]
                m.next = "PRODUCTS"
            with m.State("PRODUCTS"):
                if not self.dsp_products:
                    m.d.sync += [total.eq(rowlen * nrows), ylead.eq(yp0 * rowlen),
                                 ytail.eq(yp1 * rowlen)]
                m.next = "CHECK"
            with m.State("CHECK"):
                # ``sram + lead`` is ``sram_x0 + ylead``: one adder after the registers
                m.d.comb += lead.eq(ylead + xp0)
                lead_at = sram_x0 + ylead
                # the run's registers are set whatever the range check says (they are only
                # used while ``running``), so the check drives two registers, not all of them
                m.d.sync += [tail.eq(xp1 + ytail), req_y.eq(0), req_addr.eq(first),
                             req_more.eq(y_size != 0),
                             dat_y.eq(0), dat_addr.eq(first), dat_base.eq(lead_at),
                             dat_more.eq(y_size != 0),
                             waddr.eq(lead_at), lane.eq(0), elems_left.eq(x_size),
                             zaddr.eq(sram), zrow.eq(0), zrow_data.eq(lead_at),
                             z_more.eq(y_size != 0), z_more2.eq(y_size > 1),
                             zcnt.eq(Mux(y_size == 0, total, lead))]
                self._row_pos(m, kind, first, pos)
                # sram + total > depth, with room = depth - sram (negative: sram > depth)
                with m.If(room[-1] | (total > room[:-1])):
                    m.d.comb += self.range_error.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += running.eq(1)
                    m.next = "RUN"
            with m.State("RUN"):
                with m.If(~req_more & ~dat_more & (zcnt == 0) & ~z_more):
                    m.d.comb += self.done.eq(1)
                    m.d.sync += running.eq(0)
                    m.next = "IDLE"
        return m

    def _row_pos(self, m, kind, rowaddr, pos):
        """Element offset of a row's first element within its first bus word (narrow)."""
        B = self.bus_bytes
        with m.Switch(kind):
            for k, e in enumerate(self.elem_bytes):
                if e < B:
                    with m.Case(k):
                        m.d.sync += pos.eq(rowaddr[:_log2(B)] >> _log2(e))

    def _data_beat(self, m, e, w, waddr, lane, elems_left, pos, data_wr, row_end):
        """Data-beat handling for one element size ``e`` (static)."""
        B = self.bus_bytes
        rd = self.rd
        if e >= B:
            lanes = e // B
            m.d.comb += [rd.rd_data_ready.eq(1), w["data"].eq(rd.rd_data),
                         w["lane"].eq(lane)]
            with m.If(rd.rd_data_valid):
                m.d.comb += data_wr.eq(1)
                last_lane = (lane == lanes - 1) if lanes > 1 else 1
                with m.If(last_lane):
                    m.d.sync += [lane.eq(0), waddr.eq(waddr + 1),
                                 elems_left.eq(elems_left - 1)]
                    with m.If(elems_left == 1):
                        m.d.comb += row_end.eq(1)
                with m.Else():
                    m.d.sync += lane.eq(lane + 1)
        else:
            epb = B // e
            m.d.comb += [w["lane"].eq(0),
                         w["data"].eq(rd.rd_data.word_select(pos, e * 8)),
                         rd.rd_data_ready.eq((pos == epb - 1) | (elems_left == 1))]
            with m.If(rd.rd_data_valid):
                m.d.comb += data_wr.eq(1)
                m.d.sync += [waddr.eq(waddr + 1), elems_left.eq(elems_left - 1),
                             pos.eq(Mux(pos == epb - 1, 0, pos + 1))]
                with m.If(elems_left == 1):
                    m.d.comb += row_end.eq(1)


def tile_write(m, loader: TileLoader, kind: int, addr, data, en, tile_bits: int, gran_bits: int,
               zeros=None):
    """Drive an SRAM write port (``addr``, ``data``, ``en``) from ``loader``'s writes of kind
    ``kind``, for a memory whose rows are ``tile_bits`` wide with ``gran_bits`` write
    granularity (``gran_bits`` divides the bus width or the tile is narrower than the bus).

    ``zeros`` (a tile wider than the bus): copies of ``wr_zero`` (``loader.wr_zero_rep``);
    each bus-wide slice of the write data takes its zero select from copy ``slice * copies //
    slices`` instead of ``wr_zero`` (the data is not looked at without an enable)."""
    bus = loader.bus_width
    n_en = len(en)
    # the address comes straight from the loader's register (only the enables say whether
    # this SRAM is written; FPGA timing: no select between the register and the block RAMs)
    m.d.comb += addr.eq(loader.wr_addr)
    if zeros is not None:
        if tile_bits <= bus:
            raise ValueError("zero copies are for a tile wider than the bus")
        slices = tile_bits // bus
        m.d.comb += data.eq(Cat(*[Mux(zeros[k * len(zeros) // slices], 0, loader.wr_data)
                                  for k in range(slices)]))
    with m.If(loader.wr_valid & (loader.wr_kind == kind)):
        with m.If(loader.wr_zero):
            if zeros is None:
                m.d.comb += data.eq(0)
            m.d.comb += en.eq((1 << n_en) - 1)
        with m.Else():
            if tile_bits > bus:
                per_beat = bus // gran_bits
                if zeros is None:
                    m.d.comb += data.eq(loader.wr_data.replicate(tile_bits // bus))
                m.d.comb += en.eq(((1 << per_beat) - 1) << (loader.wr_lane * per_beat))
            else:
                m.d.comb += [data.eq(loader.wr_data[:tile_bits]), en.eq((1 << n_en) - 1)]
