"""The store module: STORE of OUT tiles (the truncated accumulators) to DRAM."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import MemType, VTAConfig

from ..errors import ErrorCode
from .fields import INSN_BITS, mem_layout
from .memport import WriteSignature

__all__ = ["StoreModule"]


class StoreModule(wiring.Component):
    """The store module (spec §3.5): for each row ``y`` one write burst of ``x_size`` OUT
    tiles, read from consecutive OUT SRAM entries ``sram_base + y*x_size + x``, to byte address
    ``(dram_base + y*x_stride) * E``.  Rows are written in order (a later row overwrites an
    earlier one when they overlap); the module waits for each burst's ``wr_done``, so its
    ``s2g`` token is pushed only once the data is visible in DRAM.

    Members
    -------
    cmd_valid, cmd_ready, cmd_insn, cmd_index : the command queue.
    g2s_avail, g2s_pop : tokens from compute (``pop_prev``).
    s2g_push : tokens to compute (``push_prev``).
    wr : ``Out(WriteSignature)``
    out_rd_addr/out_rd_en/out_rd_data : OUT SRAM read port (synchronous, with enable).
    error, err_code, err_index : stopped on an illegal instruction.

    Latency: one tile per ``E / bus_bytes`` cycles within a row; per row the request
    handshake, the SRAM read and the write response.
    """

    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self.out_bits = cfg.batch * cfg.block_out * cfg.out_width
        B = cfg.bus_width
        if self.out_bits < B or self.out_bits % B:
            from ..errors import HwConfigError
            raise HwConfigError(f"an OUT tile ({self.out_bits} bits) must be a multiple of the "
                                f"bus width ({B} bits)")
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1), "cmd_insn": In(INSN_BITS),
            "cmd_index": In(32),
            "g2s_avail": In(1), "g2s_pop": Out(1), "s2g_push": Out(1),
            "wr": Out(WriteSignature(B)),
            "out_rd_addr": Out(range(cfg.acc_buff_depth)), "out_rd_en": Out(1),
            "out_rd_data": In(self.out_bits),
            "error": Out(1), "err_code": Out(4), "err_index": Out(32), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        B = cfg.bus_width
        beats = self.out_bits // B
        lg = (cfg.out_elem_bytes).bit_length() - 1
        insn = Signal(mem_layout(cfg))
        index = Signal(32)
        # y_size * x_size, registered in SIZE; DEP compares it with ``room`` (FPGA timing:
        # the product and the compare are not in one cycle)
        tiles = Signal(32)
        # DEP's checks but the range one, registered in SIZE with the product (FPGA timing:
        # DEP decides from registers and one short compare, not from the instruction
        # through an adder, a 33-bit compare and the error priority):
        # ``sram_base + tiles > depth`` is ``over | (tiles > room)``
        depth = cfg.acc_buff_depth
        room = Signal(range(depth + 1), name="room")    # depth - sram_base (when not over)
        over = Signal(name="base_over")                 # sram_base > depth
        xnz = Signal(name="x_nonzero")
        empty = Signal(name="empty")                    # x_size == 0 or y_size == 0
        pre_fail = Signal(name="pre_fail")              # a check before the range one fails
        pre_code = Signal(4, name="pre_code")           # ... the first one's error code
        # rows left after the current one, counting down, and whether the current one is
        # the last (``y_last``, a register updated with it; FPGA timing: no carry chain and
        # compare between the row counter and the ``s2g`` push / the token counter)
        y_left = Signal(16, name="y_left")
        y_last = Signal(name="y_last")
        rowaddr = Signal(40)
        sram = Signal(17)          # next OUT entry to read
        tiles_left = Signal(17)    # tiles of this row not yet read from the SRAM
        beats_left = Signal(24)    # beats of this row not yet sent
        # read stage: the SRAM output register holds tile `t1` when v1
        v1 = Signal()
        cur = Signal(self.out_bits)
        cur_v = Signal()
        beat = Signal(range(max(2, beats)))

        # ---- data path (active in state DATA)
        in_data = Signal()
        take = Signal()      # move the SRAM output into `cur`
        adv = Signal()       # issue an SRAM read
        last_beat = cur_v & self.wr.wr_data_ready & (beat == beats - 1)
        m.d.comb += [self.wr.wr_data_valid.eq(cur_v), self.wr.wr_data.eq(
            cur.word_select(beat, B) if beats > 1 else cur),
            take.eq(in_data & v1 & (~cur_v | last_beat)),
            adv.eq(in_data & (tiles_left != 0) & (~v1 | take)),
            self.out_rd_en.eq(adv), self.out_rd_addr.eq(sram)]
        with m.If(adv):
            m.d.sync += [sram.eq(sram + 1), tiles_left.eq(tiles_left - 1), v1.eq(1)]
        with m.Elif(take):
            m.d.sync += v1.eq(0)
        with m.If(cur_v & self.wr.wr_data_ready):
            m.d.sync += [beat.eq(beat + 1), beats_left.eq(beats_left - 1)]
            with m.If(beat == beats - 1):
                m.d.sync += [beat.eq(0), cur_v.eq(0)]
        with m.If(take):
            m.d.sync += [cur.eq(self.out_rd_data), cur_v.eq(1)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd_ready.eq(1)
                with m.If(self.cmd_valid):
                    m.d.sync += [insn.eq(self.cmd_insn), index.eq(self.cmd_index)]
                    m.next = "SIZE"
            with m.State("SIZE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += tiles.eq(insn.y_size * insn.x_size)
                # the checks in DEP's order: the first that fails names the error
                pads = insn.y_pad_0 | insn.y_pad_1 | insn.x_pad_0 | insn.x_pad_1
                x_nz = insn.x_size != 0
                bad_dep = insn.pop_next | insn.push_next
                bad_mt = x_nz & (insn.memory_type != MemType.OUT)
                bad_pad = x_nz & (pads != 0)
                m.d.sync += [pre_fail.eq(bad_dep | bad_mt | bad_pad),
                             pre_code.eq(Mux(bad_dep, ErrorCode.BAD_DEP_FLAGS,
                                             Mux(bad_mt, ErrorCode.ILLEGAL_MEM_TYPE,
                                                 ErrorCode.STORE_PADDING))),
                             over.eq(insn.sram_base > depth), room.eq(depth - insn.sram_base),
                             xnz.eq(x_nz), empty.eq(~x_nz | (insn.y_size == 0))]
                m.next = "DEP"
            with m.State("DEP"):
                m.d.comb += self.busy.eq(1)
                rb = len(room)
                bad_range = xnz & (over | (tiles[rb:] != 0) | (tiles[:rb] > room))
                with m.If(pre_fail | bad_range):
                    m.d.sync += [self.err_code.eq(Mux(pre_fail, pre_code, ErrorCode.SRAM_RANGE)),
                                 self.err_index.eq(index)]
                    m.next = "ERROR"
                with m.Elif(~insn.pop_prev | self.g2s_avail):
                    m.d.comb += self.g2s_pop.eq(insn.pop_prev)
                    m.d.sync += [y_left.eq(insn.y_size - 1), y_last.eq(insn.y_size == 1),
                                 sram.eq(insn.sram_base),
                                 rowaddr.eq(insn.dram_base << lg)]
                    with m.If(empty):
                        m.d.comb += self.s2g_push.eq(insn.push_prev)
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "REQ"
            with m.State("REQ"):
                m.d.comb += [self.busy.eq(1), self.wr.wr_req_valid.eq(1),
                             self.wr.wr_req_addr.eq(rowaddr),
                             self.wr.wr_req_len.eq(insn.x_size * beats)]
                with m.If(self.wr.wr_req_ready):
                    m.d.sync += [tiles_left.eq(insn.x_size), beats_left.eq(insn.x_size * beats)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.busy.eq(1), in_data.eq(1)]
                with m.If((beats_left == 1) & cur_v & self.wr.wr_data_ready):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.busy.eq(1)
                with m.If(self.wr.wr_done):
                    m.d.sync += [y_left.eq(y_left - 1), y_last.eq(y_left == 1),
                                 rowaddr.eq(rowaddr + (insn.x_stride << lg))]
                    with m.If(y_last):
                        m.d.comb += self.s2g_push.eq(insn.push_prev)
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "REQ"
            with m.State("ERROR"):
                m.d.comb += self.error.eq(1)
        return m
