"""The compute module: LOAD UOP/ACC/ACC_8BIT, GEMM, ALU and FINISH, with the UOP and ACC SRAMs."""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from isa import AluOp, MemType, Opcode, VTAConfig

from .alu import AluPipe
from ..errors import ErrorCode
from .fields import FUSE_BITS, INSN_BITS, insn_layout, uop_layout
from .gemm import GemmPipe
from .load import granules
from .loader import TileLoader, tile_write
from .memport import ReadSignature
from .sliced import sliced_sram
from .uoploop import OFF_BITS, UopLoop

__all__ = ["ComputeModule", "pre_layout"]

_UOP, _ACC, _ACC8 = 0, 1, 2


class _LoopChecks(NamedTuple):
    """What DECODE checks of a GEMM/ALU instruction, as expressions (see
    :meth:`ComputeModule._loop_checks`)."""
    zero_trip: object      # the loop runs no micro-op (a zero trip count or an empty range)
    bad_alu: object        # an ALU instruction with an opcode above MUL (ILLEGAL_ALU_OP)
    out_of_range: object   # a GEMM/ALU loop that runs, past the UOP buffer (SRAM_RANGE)
    runs_loop: object      # DECODE starts the micro-op loop once the tokens are ready


def pre_layout(cfg: VTAConfig) -> data.StructLayout:
    """What the ``pipelined`` compute module's command queue carries beside each instruction
    (:meth:`ComputeModule.predecode`, computed where fetch pushes it): the ``start`` cycle's
    UOP look-ahead ``uop_bgn + 1`` (``bgn1``), ``uop_bgn + 1 == uop_end`` (``single``),
    DECODE's ``runs_loop`` (``runs``) and DECODE's checks (:meth:`ComputeModule._decode`:
    ``fail``, ``code``, ``done``), so nothing but a register and a select follows the
    queue's block RAM, and DECODE decides from registers (FPGA timing).  18 bits for the
    1x8x8 build, 20 for the 1x16x16: they fit in the spare bits of the queue's 36-bit-wide
    block RAMs."""
    U = cfg.log_index_bits[0]
    return data.StructLayout({"bgn1": unsigned(U + 1), "single": unsigned(1),
                              "runs": unsigned(1), "fail": unsigned(1), "code": unsigned(2),
                              "done": unsigned(1)})


class _Decode(NamedTuple):
    """DECODE's decision on an instruction, before the tokens (:meth:`ComputeModule._decode`)."""
    fail: object           # it stops with an error ...
    code: object           # ... ``_FAIL_CODES[code]``
    done: object           # a LOAD with x_size 0 or a GEMM/ALU with no micro-op: completes


#: DECODE's error codes, by the 2-bit ``code`` of :class:`_Decode` (contiguous: code + 1)
_FAIL_CODES = (ErrorCode.ILLEGAL_OPCODE, ErrorCode.ILLEGAL_MEM_TYPE, ErrorCode.ILLEGAL_ALU_OP,
               ErrorCode.SRAM_RANGE)
assert [int(c) for c in _FAIL_CODES] == list(range(_FAIL_CODES[0], _FAIL_CODES[0] + 4))


#: yosys commands (after reading the design, before ``synth_ecp5``) that let the reads of the
#: core's SRAMs (ACC slices, INP, WGT, OUT, UOP) return anything when they collide with a
#: write, so they map to plain block RAMs without the bypass registers, compares and the
#: output mux that emulate read-first behaviour.  No collision is ever used: the GEMM and
#: the ALU forward around the ACC write; the micro-op loop reads the UOP SRAM only after
#: LOAD UOP is done; INP, WGT and OUT are written and read by different modules only when
#: the program's tokens order them (a program that races them has no defined result).
ACC_MEM_SCRIPT = ("setparam -set COLLISION_X_MASK 1 t:$memrd_v2 r:MEMID=\\\\acc_mem* "
                  + " ".join(f"r:MEMID=\\\\{n}_mem %u" for n in ("inp", "wgt", "out", "uop"))
                  + " %i")


class ComputeModule(wiring.Component):
    """The compute module (spec §3.2): runs its instructions in program order.

    Owns the UOP SRAM and the ACC SRAM (one write port, two read ports; a read that collides
    with a write is never used, the GEMM and ALU forward those writes themselves).
    Every ACC write is mirrored into the OUT SRAM (low ``out_width`` bits of each lane) through
    ``out_wr_*``, so a STORE sees the truncated accumulator exactly as the reference
    functional simulator does, also after LOAD ACC.

    Members
    -------
    cmd_valid, cmd_ready, cmd_insn, cmd_index : the command queue.
    cmd_pre : ``In(pre_layout(cfg))`` (``pipelined`` only) :meth:`predecode` of ``cmd_insn``,
        carried in the queue with it.
    cmd_head_bgn : ``In`` (``pipelined`` only) the ``uop_bgn`` of ``cmd_insn`` from a
        register, valid in every IDLE cycle with ``cmd_valid`` (the queue's side keeps it,
        see :class:`~vta_hw.blocks.core.VTACore`).
    l2g_avail, l2g_pop, s2g_avail, s2g_pop : tokens popped (``pop_prev``, ``pop_next``).
    g2l_push, g2s_push : tokens pushed (``push_prev``, ``push_next``).
    rd : ``Out(ReadSignature)``  (LOAD UOP/ACC/ACC_8BIT).
    inp_rd_addr/inp_rd_data, wgt_rd_addr/wgt_rd_data : INP and WGT SRAM read ports.
    out_wr_addr/out_wr_data/out_wr_en : OUT SRAM write port (one enable per lane).
    finish : ``Out(1)``  pulse when FINISH executes.
    acc_write : ``Out(1)``  an ACC write happens this cycle (activity counter).
    error, err_code, err_index : the module stopped on an illegal instruction.

    Latency: GEMM and ALU issue one micro-op per cycle; an instruction with N micro-ops
    takes N + 7 cycles from dequeue (N + 5 for ALU, N + 6 with ``pipelined``); FINISH and
    no-ops 2 cycles.
    """

    def __init__(self, cfg: VTAConfig, alu_stages: int = 1, lut_mults: int = 0,
                 pipelined: bool = False, fuse_clamp: bool = False):
        self.cfg = cfg
        self.alu_stages = alu_stages
        self.fuse_clamp = bool(fuse_clamp) and not pipelined
        self.lut_mults = lut_mults
        self.pipelined = pipelined
        self.inp_bits = cfg.batch * cfg.block_in * cfg.inp_width
        self.wgt_bits = cfg.block_out * cfg.block_in * cfg.wgt_width
        self.acc_lanes = cfg.batch * cfg.block_out
        self.acc_bits = self.acc_lanes * cfg.acc_width
        self.out_bits = self.acc_lanes * cfg.out_width
        U = cfg.log_index_bits[0]
        pre = ({"cmd_pre": In(pre_layout(cfg)), "cmd_head_bgn": In(U)} if pipelined
               else {})
        if self.fuse_clamp:
            pre["cmd_fuse"] = In(FUSE_BITS)
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1), "cmd_insn": In(INSN_BITS),
            "cmd_index": In(32), **pre,
            "l2g_avail": In(1), "l2g_pop": Out(1), "s2g_avail": In(1), "s2g_pop": Out(1),
            "g2l_push": Out(1), "g2s_push": Out(1),
            "rd": Out(ReadSignature(cfg.bus_width)),
            "inp_rd_addr": Out(range(cfg.inp_buff_depth)), "inp_rd_data": In(self.inp_bits),
            "wgt_rd_addr": Out(range(cfg.wgt_buff_depth)), "wgt_rd_data": In(self.wgt_bits),
            "out_wr_addr": Out(range(cfg.acc_buff_depth)), "out_wr_data": Out(self.out_bits),
            "out_wr_en": Out(self.acc_lanes),
            "finish": Out(1), "acc_write": Out(1),
            "error": Out(1), "err_code": Out(4), "err_index": Out(32), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        B = cfg.bus_width
        Wa = cfg.acc_width

        # ---------------------------------------------------------------- memories
        n_uop_en = granules(32, B)
        m.submodules.uop_mem = uop_mem = memory.Memory(
            shape=unsigned(32), depth=cfg.uop_buff_depth, init=[])
        uop_wp = uop_mem.write_port(granularity=32 // n_uop_en if n_uop_en > 1 else None)
        uop_rp = uop_mem.read_port()

        # ---------------------------------------------------------------- loader
        acc8_bytes = cfg.batch * cfg.block_out * 8 // 8
        m.submodules.loader = ld = TileLoader(
            B, [4, cfg.acc_elem_bytes, acc8_bytes],
            [cfg.uop_buff_depth, cfg.acc_buff_depth, cfg.acc_buff_depth],
            dsp_products=self.pipelined)
        wiring.connect(m, wiring.flipped(self.rd), ld.rd)
        tile_write(m, ld, _UOP, uop_wp.addr, uop_wp.data, uop_wp.en, 32, 32 // n_uop_en)
        ld_acc_valid = ld.wr_valid & (ld.wr_kind != _UOP)
        ld_acc_addr = Signal(range(cfg.acc_buff_depth))
        ld_acc_data = Signal(self.acc_bits)
        ld_acc_en = Signal(self.acc_lanes)
        tile_write(m, ld, _ACC, ld_acc_addr, ld_acc_data, ld_acc_en, self.acc_bits, Wa)
        self._acc8_write(m, ld, ld_acc_addr, ld_acc_data, ld_acc_en)

        # ---------------------------------------------------------------- pipelines
        m.submodules.loop = loop = UopLoop(cfg, ahead=self.pipelined)
        m.submodules.gemm = gemm = GemmPipe(cfg, lut_mults=self.lut_mults,
                                                pipelined=self.pipelined)
        m.submodules.alu = alu = AluPipe(cfg, stages=self.alu_stages,
                                             pipelined=self.pipelined,
                                             fuse_clamp=self.fuse_clamp)
        # ``fuse_clamp``: the clamps the fetch module joined to the instruction, held with it
        fuse = Signal(FUSE_BITS, name="insn_fuse") if self.fuse_clamp else None
        insn = Signal(insn_layout(cfg))
        index = Signal(32)
        # ``pipelined``: the instruction's ``predecode``, registered with it
        pre = Signal(pre_layout(cfg), name="insn_pre") if self.pipelined else None
        g, a = insn.gemm, insn.alu
        is_alu = Signal()
        m.d.comb += [loop.uop_bgn.eq(g.uop_bgn), loop.uop_end.eq(g.uop_end),
                     loop.iter_out.eq(g.iter_out), loop.iter_in.eq(g.iter_in)]
        with m.If(insn.common.opcode == Opcode.ALU):
            m.d.comb += [loop.dst_fo.eq(a.dst_factor_out), loop.dst_fi.eq(a.dst_factor_in),
                         loop.src_fo.eq(a.src_factor_out), loop.src_fi.eq(a.src_factor_in)]
        with m.Else():
            m.d.comb += [loop.dst_fo.eq(g.dst_factor_out), loop.dst_fi.eq(g.dst_factor_in),
                         loop.src_fo.eq(g.src_factor_out), loop.src_fi.eq(g.src_factor_in),
                         loop.wgt_fo.eq(g.wgt_factor_out), loop.wgt_fi.eq(g.wgt_factor_in)]
        # stage 0 -> 1: the micro-op SRAM is addressed with the loop's next index, so the
        # word of the current one is out of the SRAM in stage 0 and registered into stage 1
        # with its offsets (FPGA timing: nothing after the SRAM's clock-to-out)
        v1 = Signal()
        uop1 = Signal(32, reset_less=True)
        offs = [Signal.like(loop.dst_off, name=n, reset_less=True)
                for n in ("dst1", "src1", "wgt1")]
        in_decode = Signal()
        uop0 = self._uop_read(m, insn, pre, loop, uop_rp, in_decode)
        m.d.sync += [v1.eq(loop.valid), uop1.eq(uop0), offs[0].eq(loop.dst_off),
                     offs[1].eq(loop.src_off), offs[2].eq(loop.wgt_off)]
        # the SRAM read addresses of stage 1 (the GEMM's INP/WGT reads, the ALU's ACC reads;
        # the GEMM's ACC read of s3 is one cycle ahead in ``acc_rd_addr_next``), summed here
        # and registered, so a register drives the block RAMs spread over the die
        uw = Signal(uop_layout(cfg))
        m.d.comb += uw.eq(uop0)
        d_next = Signal(OFF_BITS + 1)
        m.d.comb += d_next.eq(uw.dst + loop.dst_off)
        s1 = Signal(OFF_BITS + 1, name="src_sum1", reset_less=True)
        w1 = Signal(OFF_BITS + 1, name="wgt_sum1", reset_less=True)
        s_next = Signal(OFF_BITS + 1)
        m.d.comb += s_next.eq(uw.src + loop.src_off)
        m.d.sync += [s1.eq(s_next), w1.eq(uw.wgt + loop.wgt_off)]
        for unit in (gemm, alu):
            m.d.comb += [unit.uop.eq(uop1), unit.dst_off.eq(offs[0]),
                         unit.src_off.eq(offs[1])]
        again, kill = self._fused_vector(m, insn, uop1, v1, alu, fuse)
        if again is None:
            m.d.comb += [alu.op.eq(a.alu_opcode), alu.use_imm.eq(a.use_imm),
                         alu.imm.eq(a.imm)]
        else:           # the second pass: the clamps alone (a SHR by 0 is the identity)
            m.d.comb += [alu.op.eq(Mux(again, AluOp.SHR, a.alu_opcode)),
                         alu.use_imm.eq(again | a.use_imm), alu.imm.eq(Mux(again, 0, a.imm))]
        m.d.comb += [gemm.valid.eq(v1 & ~is_alu), alu.valid.eq(v1 & is_alu),
                     gemm.wgt_off.eq(offs[2]), gemm.reset.eq(g.reset),
                     gemm.inp_rd_data.eq(self._inp_read(m, s1, s_next)),
                     self.wgt_rd_addr.eq(w1), gemm.wgt_rd_data.eq(self.wgt_rd_data),
                     ]

        # ACC write mux (one writer at a time) and the OUT mirror.  The ACC write is
        # registered (it lands in the SRAM a cycle later; FPGA timing: the mux is not in front
        # of the block RAMs spread over the die): the GEMM and ALU forward around it, and
        # every instruction completes after its last write has been issued, a cycle before
        # the next one can read.  The OUT mirror is written at once (``pipelined``: its
        # write is registered too, below).
        all_lanes = (1 << self.acc_lanes) - 1
        w_addr = Signal(range(cfg.acc_buff_depth))
        w_data = Signal(self.acc_bits)
        w_en = Signal(self.acc_lanes)
        with m.If(ld_acc_valid):
            m.d.comb += [w_addr.eq(ld_acc_addr), w_data.eq(ld_acc_data), w_en.eq(ld_acc_en)]
        with m.Elif(gemm.acc_wr_valid):
            m.d.comb += [w_addr.eq(gemm.acc_wr_addr), w_data.eq(gemm.acc_wr_data),
                         w_en.eq(all_lanes)]
        with m.Elif(alu.acc_wr_valid):
            m.d.comb += [w_addr.eq(alu.acc_wr_addr), w_data.eq(alu.acc_wr_data),
                         w_en.eq(all_lanes)]
        # the ACC SRAM: one lane per slice, each with its own registered write and read
        # addresses.  Not transparent: the GEMM and the ALU forward the writes their reads
        # collide with (a block RAM has no cross-port write-through; see ACC_MEM_SCRIPT).
        # Port A reads for the GEMM (its s3 address, a cycle ahead in acc_rd_addr_next) or
        # the ALU (its d), port B for the ALU (its s): the same addresses as the units' own
        # acc_rd*_addr, given a cycle earlier.
        rda, rdb = sliced_sram(
            m, "acc_mem", width=self.acc_bits, depth=cfg.acc_buff_depth, gran=Wa,
            slices=self.acc_lanes, platform=platform, wr_addr=w_addr, wr_data=w_data,
            wr_en=w_en, rd_addrs=[Mux(is_alu, d_next, gemm.acc_rd_addr_next), s_next])
        m.d.comb += [gemm.acc_rd_data.eq(rda), alu.acc_rda_data.eq(rda),
                     alu.acc_rdb_data.eq(rdb)]
        out_wr = [self.out_wr_addr.eq(w_addr), self.out_wr_en.eq(w_en),
                  self.out_wr_data.eq(Cat(*[w_data.word_select(i, Wa)[:cfg.out_width]
                                            for i in range(self.acc_lanes)]))]
        # ``pipelined``: the OUT mirror's write is registered too (it lands a cycle later,
        # with the ACC write; FPGA timing: the GEMM's accumulate adder and the write select
        # drive a register, not the OUT SRAM's block RAMs).  Its only reader is STORE, which
        # starts after compute's token, well after the write has landed
        m.d.sync += out_wr if self.pipelined else []
        m.d.comb += out_wr if not self.pipelined else []
        m.d.comb += self.acc_write.eq(w_en != 0)

        self._control(m, insn, pre, index, is_alu, ld, loop, gemm, alu, v1, in_decode, fuse,
                      again, kill)
        return m

    def _fused_vector(self, m, insn, uop1, v1, alu, fuse):
        """``fuse_clamp``: drive ``alu.fuse``; returns the registers ``(again, kill)``:
        the clamps' second pass is running, and it is needed (``None, None`` without
        ``fuse_clamp``).  A chain whose first instruction has a vector operand (fetch: a SHR
        over an injective loop) equals the instructions one after another only if no
        micro-op reads a source row an earlier one of the chain has written.  Its single
        micro-op's source rows ``src .. src + span`` and destination rows ``dst .. dst +
        span`` (every factor is unsigned) are compared when its first micro-op is in stage
        1, a cycle before the ALU applies the clamps: if they may overlap (``kill``), the
        first pass runs the first instruction alone and a second pass (``again``) applies
        the clamps to the same rows.  Timing model: ``vector_overlap`` in
        vta_sim.timing_plan."""
        if fuse is None:
            return None, None
        g, a = insn.gemm, insn.alu
        again = Signal(name="fuse_again")
        kill = Signal(name="fuse_kill")
        u = Signal(uop_layout(self.cfg))
        m.d.comb += u.eq(uop1)
        span_d = (g.iter_out - 1) * a.dst_factor_out + (g.iter_in - 1) * a.dst_factor_in
        span_s = (g.iter_out - 1) * a.src_factor_out + (g.iter_in - 1) * a.src_factor_in
        apart = (u.src + span_s < u.dst) | (u.src > u.dst + span_d)
        with m.If(v1 & ~again):
            m.d.sync += kill.eq(~a.use_imm & (fuse[:2] != 0) & ~apart)
        m.d.comb += alu.fuse.eq(Mux(kill & ~again, 0, fuse))
        return again, kill

    def _inp_read(self, m, s1, s_next):
        """The INP tile for the GEMM's stage 2.  Plain: read at the registered address
        ``s1``.  ``pipelined``: read a cycle earlier at the sum itself (``s_next``) and
        registered right after the SRAM (FPGA timing: the block RAM's clock-to-out drives
        only that register, not the multipliers across the die).  Same cycles."""
        if not self.pipelined:
            m.d.comb += self.inp_rd_addr.eq(s1)
            return self.inp_rd_data
        inp_q = Signal.like(self.inp_rd_data, name="inp_q", reset_less=True)
        m.d.comb += self.inp_rd_addr.eq(s_next)
        m.d.sync += inp_q.eq(self.inp_rd_data)
        return inp_q

    def _uop_read(self, m, insn, pre, loop, uop_rp, in_decode):
        """The micro-op word of the loop's current index (stage 0).  Plain: the SRAM read
        addressed by the loop's next index.  ``pipelined``: a register after the SRAM read
        (FPGA timing: the block RAM's clock-to-out drives only that register), addressed two
        cycles ahead by ``loop.u_ahead`` (a register while the loop runs); in the cycle
        before ``start`` (IDLE with the command queue's head, from the register
        ``cmd_head_bgn``, or DECODE) by the instruction's ``uop_bgn``; ``in_decode``: the
        control is in DECODE.  Same cycles."""
        if not self.pipelined:
            m.d.comb += uop_rp.addr.eq(loop.u_next)
            return uop_rp.data
        # the ``start`` cycle's look-ahead (``uop_bgn + 1``, or ``uop_bgn`` for one micro-op)
        # and whether the instruction starts the loop at all (DECODE's own checks,
        # ``_loop_checks``, except the tokens) come with the instruction from the queue
        # (``cmd_pre``, computed where fetch pushes it) and are registered with it (``pre``),
        # so neither the address nor those registers have an adder, compare or decode behind
        # the queue's block RAM (FPGA timing): only the loop's registers, the tokens and the
        # instruction's fields through a few selects
        start = in_decode & pre.runs & self._tokens_ready(insn)     # equal to ``loop.start``
        at_start = Mux(pre.single, insn.gemm.uop_bgn, pre.bgn1)
        # in IDLE (``cmd_ready``) the loop is idle and DECODE's ``start`` is low: the head's
        # ``uop_bgn``, from a register (``cmd_head_bgn``: no path from the queue's block RAM
        # to the SRAM address); while the loop runs its ``u_ahead_run``, a register too
        m.d.comb += uop_rp.addr.eq(Mux(self.cmd_ready, self.cmd_head_bgn,
                                       Mux(loop.busy, loop.u_ahead_run,
                                           Mux(start, at_start, insn.gemm.uop_bgn))))
        uop0 = Signal(32, name="uop_q", reset_less=True)
        m.d.sync += uop0.eq(uop_rp.data)
        return uop0

    def predecode(self, insn):
        """The ``cmd_pre`` word (:func:`pre_layout`) of the 128-bit instruction ``insn``, as
        an expression: what the command queue's writer stores beside it."""
        v = data.View(insn_layout(self.cfg), insn)
        g = v.gemm
        dec = self._decode(v)
        return Cat(g.uop_bgn + 1, g.uop_bgn + 1 == g.uop_end, self._loop_checks(v).runs_loop,
                   dec.fail, dec.code, dec.done)

    def _decode(self, insn) -> _Decode:
        """DECODE's checks of ``insn`` (a view of ``insn_layout``), in DECODE's order: the
        first that fails names the error.  The plain core computes them from the decoded
        instruction in DECODE, the ``pipelined`` one where fetch pushes it (``predecode``)."""
        mem, c = insn.mem, insn.common
        chk = self._loop_checks(insn)
        ok_mt = ((mem.memory_type == MemType.UOP) | (mem.memory_type == MemType.ACC) |
                 (mem.memory_type == MemType.ACC_8BIT) | (mem.x_size == 0))
        bad_mt = (c.opcode == Opcode.LOAD) & ~ok_mt
        bad_op = ((c.opcode != Opcode.LOAD) & (c.opcode != Opcode.GEMM) &
                  (c.opcode != Opcode.ALU) & (c.opcode != Opcode.FINISH))
        code = Mux(bad_mt, ErrorCode.ILLEGAL_MEM_TYPE,
                   Mux(chk.bad_alu, ErrorCode.ILLEGAL_ALU_OP,
                       Mux(bad_op, ErrorCode.ILLEGAL_OPCODE, ErrorCode.SRAM_RANGE)))
        return _Decode(fail=bad_mt | chk.bad_alu | bad_op | chk.out_of_range,
                       code=(code - _FAIL_CODES[0])[:2],
                       done=Mux(c.opcode == Opcode.LOAD, mem.x_size == 0, chk.zero_trip))

    def _loop_checks(self, insn) -> _LoopChecks:
        """DECODE's checks of the GEMM/ALU instruction ``insn`` (a view of ``insn_layout``:
        the decoded instruction, or the command queue's head for the ``pipelined`` UOP
        look-ahead, which registers ``runs_loop`` a cycle early), in one place so the two
        cannot drift apart.  ``runs_loop`` is true exactly when DECODE, with the tokens
        ready (:meth:`_tokens_ready`), starts the micro-op loop: GEMM or a legal ALU op,
        a non-zero trip, ``uop_end`` within the UOP buffer."""
        g, c = insn.gemm, insn.common
        loop_op = (c.opcode == Opcode.GEMM) | (c.opcode == Opcode.ALU)
        zero_trip = (g.iter_out == 0) | (g.iter_in == 0) | (g.uop_end <= g.uop_bgn)
        bad_alu = (c.opcode == Opcode.ALU) & (insn.alu.alu_opcode > AluOp.MUL)
        legal_op = (c.opcode == Opcode.GEMM) | ((c.opcode == Opcode.ALU) &
                                                (insn.alu.alu_opcode <= AluOp.MUL))
        in_range = g.uop_end <= self.cfg.uop_buff_depth
        return _LoopChecks(zero_trip=zero_trip, bad_alu=bad_alu,
                           out_of_range=loop_op & ~zero_trip & ~in_range,
                           runs_loop=legal_op & ~zero_trip & in_range)

    def _tokens_ready(self, insn):
        """The tokens ``insn`` pops are there (DECODE waits for this)."""
        c = insn.common
        return (~c.pop_prev | self.l2g_avail) & (~c.pop_next | self.s2g_avail)

    def _acc8_write(self, m, ld, addr, data, en):
        """LOAD ACC_8BIT: each DRAM byte becomes one sign-extended ACC lane."""
        cfg = self.cfg
        B = cfg.bus_width
        Wa = cfg.acc_width
        elem_bits = self.acc_lanes * 8
        with m.If(ld.wr_valid & (ld.wr_kind == _ACC8)):
            m.d.comb += addr.eq(ld.wr_addr)
            with m.If(ld.wr_zero):
                m.d.comb += [data.eq(0), en.eq((1 << self.acc_lanes) - 1)]
            with m.Else():
                nbytes = min(B, elem_bits) // 8
                ext = Cat(*[_sext(ld.wr_data.word_select(i, 8), Wa) for i in range(nbytes)])
                if elem_bits > B:
                    m.d.comb += [data.eq(ext.replicate(elem_bits // B)),
                                 en.eq(((1 << nbytes) - 1) << (ld.wr_lane * nbytes))]
                else:
                    m.d.comb += [data.eq(ext), en.eq((1 << self.acc_lanes) - 1)]

    def _control(self, m, insn, pre, index, is_alu, ld, loop, gemm, alu, v1, in_decode,
                 fuse=None, again=None, kill=None):
        mem, c = insn.mem, insn.common
        m.d.comb += [ld.cmd_sram.eq(mem.sram_base), ld.cmd_dram.eq(mem.dram_base),
                     ld.cmd_y.eq(mem.y_size), ld.cmd_x.eq(mem.x_size),
                     ld.cmd_stride.eq(mem.x_stride), ld.cmd_ypad0.eq(mem.y_pad_0),
                     ld.cmd_ypad1.eq(mem.y_pad_1), ld.cmd_xpad0.eq(mem.x_pad_0),
                     ld.cmd_xpad1.eq(mem.x_pad_1)]
        with m.Switch(mem.memory_type):
            with m.Case(MemType.ACC):
                m.d.comb += ld.cmd_kind.eq(_ACC)
            with m.Case(MemType.ACC_8BIT):
                m.d.comb += ld.cmd_kind.eq(_ACC8)
            with m.Default():
                m.d.comb += ld.cmd_kind.eq(_UOP)
        dec = self._decode(insn) if pre is None else pre

        # an error only moves the FSM to ERROR; ``err_code`` / ``err_index`` are formed there
        # from registers that hold still from DECODE on (FPGA timing: no path from the fail
        # conditions - DECODE's checks, the loader's and the units' range checks - to the
        # enables of 36 flip-flops).  DECODE's checks failed, or else the instruction passed
        # them and a range check of LOAD or RUN stopped it: SRAM_RANGE.
        def fail():
            m.next = "ERROR"

        def complete():
            m.d.comb += [self.g2l_push.eq(c.push_prev), self.g2s_push.eq(c.push_next)]
            m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd_ready.eq(1)
                with m.If(self.cmd_valid):
                    m.d.sync += [insn.eq(self.cmd_insn), index.eq(self.cmd_index)]
                    if pre is not None:
                        m.d.sync += pre.eq(self.cmd_pre)
                    if fuse is not None:
                        m.d.sync += fuse.eq(self.cmd_fuse)
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += [self.busy.eq(1), in_decode.eq(1)]
                with m.If(dec.fail):
                    fail()
                with m.Elif(self._tokens_ready(insn)):
                    m.d.comb += [self.l2g_pop.eq(c.pop_prev), self.s2g_pop.eq(c.pop_next)]
                    with m.Switch(c.opcode):
                        with m.Case(Opcode.LOAD):
                            with m.If(dec.done):
                                complete()
                            with m.Else():
                                m.d.comb += ld.cmd_valid.eq(1)
                                m.next = "LOAD"
                        with m.Case(Opcode.GEMM, Opcode.ALU):
                            m.d.sync += is_alu.eq(c.opcode == Opcode.ALU)
                            with m.If(dec.done):
                                complete()
                            with m.Else():
                                m.d.comb += loop.start.eq(1)
                                with m.If(c.opcode == Opcode.ALU):
                                    m.d.comb += loop.gap.eq(self.alu_stages - 1)
                                m.next = "RUN"
                        with m.Case(Opcode.FINISH):
                            m.d.comb += self.finish.eq(1)
                            complete()
            with m.State("LOAD"):
                m.d.comb += self.busy.eq(1)
                with m.If(ld.done):
                    complete()
                with m.If(ld.range_error):
                    fail()
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(~loop.busy & ~v1 & ~gemm.busy & ~alu.busy):
                    if again is None:
                        complete()
                    else:
                        with m.If(is_alu & kill & ~again):
                            m.d.sync += again.eq(1)
                            m.next = "AGAIN"
                        with m.Else():
                            m.d.sync += again.eq(0)
                            complete()
                with m.If(gemm.range_error | alu.range_error):
                    fail()
            if again is not None:
                with m.State("AGAIN"):      # the clamps' second pass (_fused_vector)
                    m.d.comb += [self.busy.eq(1), loop.start.eq(1),
                                 loop.gap.eq(self.alu_stages - 1)]
                    m.next = "RUN"
            with m.State("ERROR"):
                m.d.comb += [self.error.eq(1), self.err_index.eq(index),
                             self.err_code.eq(Mux(dec.fail, dec.code + _FAIL_CODES[0],
                                                  ErrorCode.SRAM_RANGE))]


def _sext(v, width):
    """Sign-extend ``v`` to ``width`` bits (as an unsigned bit pattern)."""
    return Cat(v, v[-1].replicate(width - len(v)))
