"""The whole VTA core: fetch, load, compute, store, token queues, SRAMs and registers."""

from __future__ import annotations

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Instance, Module,
                          Mux, ResetInserter, ResetSignal, Signal, unsigned)
from amaranth.lib import data, fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from isa import VTAConfig

from .compute import ComputeModule
from .csr import CSR_ADDR_BITS, ControlStatus
from .dsp import is_ecp5
from ..errors import ErrorCode, HwConfigError
from .fetch import FetchModule
from .fields import INSN_BITS, insn_layout
from .load import LoadModule, granules
from .memport import MemPortSignature, ReadArbiter
from .store import StoreModule
from .tokens import TokenQueue

__all__ = ["VTACore", "check_config"]


def check_config(cfg: VTAConfig) -> None:
    """Raise :class:`HwConfigError` if the generator cannot build ``cfg``."""
    B = cfg.bus_width
    if B > INSN_BITS:
        raise HwConfigError(f"the bus width ({B} bits) must be at most the instruction width "
                            f"({INSN_BITS} bits)")
    out_bits = cfg.batch * cfg.block_out * cfg.out_width
    if out_bits < B:
        raise HwConfigError(f"an OUT tile ({out_bits} bits) must be at least as wide as the "
                            f"bus ({B} bits)")


class VTACore(wiring.Component):
    """The VTA accelerator core for one :class:`isa.VTAConfig`.

    Parameters
    ----------
    cfg : VTAConfig
    queue_depth : int
        entries of each of the three command queues (fetch -> load/compute/store); 512 as
        in the reference hardware (``instQueueEntries``), so the programs it runs without
        head-of-line deadlock run here too.
    token_bits : int
        width of the four dependency-token counters.
    alu_stages : int
        cycles per tensor-ALU micro-op: 1 (default), 2 (registered result) or 3 (also the
        32x32 multiplier split over two stages); 2 and 3 are for FPGA timing.
    lut_mults : int
        GEMM products built from LUT logic instead of hard multipliers (0 = none; see
        :class:`vta_hw.blocks.gemm.GemmPipe`); no effect on cycles or results, it trades
        MULT18X18D blocks for LUTs (one multiplier for about 117 LUT4-equivalents on the
        ECP5, as radix-4 digit planes).
    pipelined : bool
        FPGA timing, no effect on results: the GEMM's hard-multiplier products and (with
        ``alu_stages=3``) the ALU's multiplier pieces register their operands and product
        inside the multiplier (MULT18X18D registers on an ECP5), the ALU lane is split over
        its three issue cycles and its ACC read data registered after the SRAM
        (:class:`vta_hw.blocks.alu.AluPipe`: one cycle more per ALU instruction), the UOP
        SRAM read is registered and its address is formed from registers only (same
        cycles), the WGT write data takes its zero select from one copy per bus-wide slice
        (same cycles) and the engine's reset on launch comes from a register (one cycle
        more per run): the engine runs in its own clock domain, reset by that register
        alone, through a ``DCCA`` (global network) on an ECP5.

    With ``alu_stages`` 1 and not ``pipelined`` (the simulation core, ``vta rtl``) the fetch
    module joins an ALU MIN/MAX with an immediate and the next instruction, the same kind
    over the same loop (or a SHR, with an immediate or a vector operand, over rows visited
    once and up to two such clamps) into one compute command run as one pass over the ACC
    rows (a second pass for the clamps when a vector's rows may overlap the SHR's own)
    (:class:`vta_hw.blocks.fetch.FetchModule` ``fuse_clamp``; the same results, fewer ALU
    passes per requantisation epilogue; timing model: ``TimingParams.fuse_clamp``).

    Members
    -------
    csr_addr, csr_wdata, csr_we, csr_rdata : the register bus (:class:`vta_hw.blocks.csr.Reg`).
    rd_req_*, rd_data*, wr_req_*, wr_data*, wr_done : the memory port
        (:mod:`vta_hw.blocks.memport`), flat.
    done : ``Out(1)``  a run finished (FINISH or error); an interrupt line.

    Raises
    ------
    HwConfigError
        for configurations the generator does not support (bus wider than 128 bits, OUT tile
        narrower than the bus).
    """

    def __init__(self, cfg: VTAConfig, queue_depth: int = 512, token_bits: int = 16,
                 alu_stages: int = 1, lut_mults: int = 0, pipelined: bool = False):
        if not isinstance(cfg, VTAConfig):
            raise TypeError(f"cfg must be a VTAConfig, not {cfg!r}")
        if queue_depth < 2:
            raise HwConfigError(f"queue_depth must be at least 2, not {queue_depth}")
        self.cfg = cfg
        self.queue_depth = queue_depth
        self.token_bits = token_bits
        if alu_stages not in (1, 2, 3):
            raise HwConfigError(f"alu_stages must be 1, 2 or 3, not {alu_stages!r}")
        self.alu_stages = alu_stages
        macs = cfg.batch * cfg.block_in * cfg.block_out
        if isinstance(lut_mults, bool) or not isinstance(lut_mults, int) or \
                not 0 <= lut_mults <= macs:
            raise HwConfigError(f"lut_mults must be an integer in [0, {macs}] (the GEMM "
                                f"products), not {lut_mults!r}")
        self.lut_mults = lut_mults
        if not isinstance(pipelined, bool):
            raise HwConfigError(f"pipelined must be True or False, not {pipelined!r}")
        self.pipelined = pipelined
        # fetch's clamp fusion (FetchModule ``fuse_clamp``): the simulation core's
        # (``alu_stages`` 1, not pipelined), not the FPGA builds'
        self.fuse_clamp = alu_stages == 1 and not pipelined
        check_config(cfg)
        super().__init__({
            "csr_addr": In(CSR_ADDR_BITS), "csr_wdata": In(32), "csr_we": In(1),
            "csr_rdata": Out(32), "done": Out(1),
            **MemPortSignature(cfg.bus_width).members})

    @staticmethod
    def _head_bgn(e, f, insn, comp):
        """Compute's ``cmd_head_bgn``: the ``uop_bgn`` of the compute queue's head
        (``f.r_data``, a block RAM's output) from a register, so the UOP SRAM address in IDLE
        has no block RAM clock-to-out in front of it (FPGA timing; the seventeenth session's
        seed-2 path: ``cp_queue``'s DP16KD -> the head's ``uop_bgn`` -> the UOP SRAM).
        ``SyncFIFOBuffered`` (depth >= 2) loads a new head into ``r_data`` in the cycle after
        it reads its block RAM, which it does when the head is empty or popped.  Empty
        (``r_rdy`` low) with something to read means the entry was pushed into an empty
        queue in the cycle before, so its ``uop_bgn`` is the registered write data
        (``push_bgn``); popped means compute is in DECODE in the next cycle and back in IDLE
        two cycles later at the earliest, by when the register has caught up with
        ``r_data``.  So in every IDLE cycle with ``r_rdy`` the register equals the head's."""
        U = len(comp.cmd_head_bgn)
        lay = insn_layout(comp.cfg)
        bgn = data.View(lay, f.r_data[:INSN_BITS]).gemm.uop_bgn
        push = Signal(U, name="cp_push_bgn")
        head = Signal(U, name="cp_head_bgn")
        e.d.sync += [push.eq(data.View(lay, insn).gemm.uop_bgn),
                     head.eq(Mux(f.r_rdy, bgn, push))]
        e.d.comb += comp.cmd_head_bgn.eq(head)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.csr = csr = ControlStatus()
        m.d.comb += [csr.csr_addr.eq(self.csr_addr), csr.csr_wdata.eq(self.csr_wdata),
                     csr.csr_we.eq(self.csr_we), self.csr_rdata.eq(csr.csr_rdata),
                     self.done.eq(csr.done)]
        e = Module()
        launch = csr.launch
        if self.pipelined:
            # FPGA timing: the engine's reset comes from a register, not from the decode of
            # the register bus (one cycle more per run), and is that register alone
            launch = Signal(name="launch_q")
            m.d.sync += launch.eq(csr.launch)
            m.submodules.engine = DomainRenamer("engine")(e)
            self._engine_domain(m, platform, csr.launch)
        else:
            m.submodules.engine = ResetInserter(launch)(e)
        start = Signal()
        m.d.sync += start.eq(launch)

        e.submodules.fetch = fetch = FetchModule(cfg, predecode=self.pipelined,
                                                 fuse_clamp=self.fuse_clamp,
                                                 count_regs=self.pipelined)
        wgt_slices = cfg.block_out * cfg.block_in * cfg.wgt_width // cfg.bus_width
        e.submodules.load = load = LoadModule(
            cfg, zero_copies=wgt_slices if self.pipelined and wgt_slices > 1 else 0,
            dsp_products=self.pipelined, held_error=self.pipelined)
        e.submodules.compute = comp = ComputeModule(cfg, alu_stages=self.alu_stages,
                                                     lut_mults=self.lut_mults,
                                                     pipelined=self.pipelined,
                                                     fuse_clamp=self.fuse_clamp)
        e.submodules.store = store = StoreModule(cfg)
        m.d.comb += [fetch.start.eq(start), fetch.insn_addr.eq(csr.insn_addr),
                     fetch.insn_count.eq(csr.insn_count)]

        # command queues
        # (``pipelined``: compute's entries also carry ``predecode`` of the instruction, in the
        # block RAMs' spare bits, so compute has no logic between the queue and its registers)
        for q, mod in (("ld", load), ("cp", comp), ("st", store)):
            insn = getattr(fetch, f"{q}_insn")
            pre = comp.predecode(insn) if q == "cp" and self.pipelined else \
                fetch.cp_fuse if q == "cp" and self.fuse_clamp else Cat()
            f = fifo.SyncFIFOBuffered(width=INSN_BITS + 32 + len(pre), depth=self.queue_depth)
            e.submodules[f"{q}_queue"] = f
            if len(pre) and self.pipelined:
                e.d.comb += comp.cmd_pre.eq(f.r_data[INSN_BITS + 32:])
                self._head_bgn(e, f, insn, comp)
            elif len(pre):
                e.d.comb += comp.cmd_fuse.eq(f.r_data[INSN_BITS + 32:])
            e.d.comb += [f.w_data.eq(Cat(insn, getattr(fetch, f"{q}_index"), pre)),
                         f.w_en.eq(getattr(fetch, f"{q}_valid")),
                         getattr(fetch, f"{q}_ready").eq(f.w_rdy),
                         mod.cmd_valid.eq(f.r_rdy), f.r_en.eq(mod.cmd_ready & f.r_rdy),
                         mod.cmd_insn.eq(f.r_data[:INSN_BITS]),
                         mod.cmd_index.eq(f.r_data[INSN_BITS:])]

        # token queues
        tq = {}
        for name in ("l2g", "g2l", "g2s", "s2g"):
            tq[name] = e.submodules[name] = TokenQueue(
                self.token_bits, registered_avail=self.pipelined, late_count=self.pipelined)
        e.d.comb += [
            tq["l2g"].push.eq(load.l2g_push), comp.l2g_avail.eq(tq["l2g"].avail),
            tq["l2g"].pop.eq(comp.l2g_pop),
            tq["g2l"].push.eq(comp.g2l_push), load.g2l_avail.eq(tq["g2l"].avail),
            tq["g2l"].pop.eq(load.g2l_pop),
            tq["g2s"].push.eq(comp.g2s_push), store.g2s_avail.eq(tq["g2s"].avail),
            tq["g2s"].pop.eq(store.g2s_pop),
            tq["s2g"].push.eq(store.s2g_push), comp.s2g_avail.eq(tq["s2g"].avail),
            tq["s2g"].pop.eq(comp.s2g_pop)]

        # SRAMs shared between modules
        B = cfg.bus_width
        for name, bits, depth, writer, reader in (
                ("inp", load.inp_bits, cfg.inp_buff_depth, load, comp),
                ("wgt", load.wgt_bits, cfg.wgt_buff_depth, load, comp)):
            n_en = granules(bits, B)
            mem = memory.Memory(shape=unsigned(bits), depth=depth, init=[])
            e.submodules[f"{name}_mem"] = mem
            wp = mem.write_port(granularity=bits // n_en if n_en > 1 else None)
            rp = mem.read_port()
            e.d.comb += [wp.addr.eq(getattr(writer, f"{name}_wr_addr")),
                         wp.data.eq(getattr(writer, f"{name}_wr_data")),
                         wp.en.eq(getattr(writer, f"{name}_wr_en")),
                         rp.addr.eq(getattr(reader, f"{name}_rd_addr")),
                         getattr(reader, f"{name}_rd_data").eq(rp.data)]
        out_mem = memory.Memory(shape=unsigned(store.out_bits), depth=cfg.acc_buff_depth, init=[])
        e.submodules.out_mem = out_mem
        owp = out_mem.write_port(granularity=cfg.out_width)
        orp = out_mem.read_port()
        e.d.comb += [owp.addr.eq(comp.out_wr_addr), owp.data.eq(comp.out_wr_data),
                     owp.en.eq(comp.out_wr_en), orp.addr.eq(store.out_rd_addr),
                     orp.en.eq(store.out_rd_en), store.out_rd_data.eq(orp.data)]

        # memory port
        e.submodules.arbiter = arb = ReadArbiter(B, 3, registered_route=self.pipelined)
        wiring.connect(e, fetch.rd, arb.c0)
        wiring.connect(e, comp.rd, arb.c1)
        wiring.connect(e, load.rd, arb.c2)
        for n in arb.mem.signature.members:
            port = getattr(self, n)
            inner = getattr(arb.mem, n)
            if arb.mem.signature.members[n].flow == wiring.Out:
                e.d.comb += port.eq(inner)
            else:
                e.d.comb += inner.eq(port)
        for n in store.wr.signature.members:
            port = getattr(self, n)
            inner = getattr(store.wr, n)
            if store.wr.signature.members[n].flow == wiring.Out:
                e.d.comb += port.eq(inner)
            else:
                e.d.comb += inner.eq(port)

        # errors: the first one wins (fetch, compute, load, store, tokens)
        overflow = Signal()
        e.d.comb += overflow.eq(Cat(*[t.overflow for t in tq.values()]) != 0)
        m.d.comb += [csr.finish.eq(comp.finish), csr.acc_write.eq(comp.acc_write)]
        with m.If(fetch.error):
            m.d.comb += [csr.error.eq(1), csr.err_code.eq(fetch.err_code),
                         csr.err_index.eq(fetch.err_index)]
        for mod in (comp, load, store):
            with m.Elif(mod.error):
                m.d.comb += [csr.error.eq(1), csr.err_code.eq(mod.err_code),
                             csr.err_index.eq(mod.err_index)]
        with m.Elif(overflow):
            m.d.comb += [csr.error.eq(1), csr.err_code.eq(ErrorCode.TOKEN_OVERFLOW),
                         csr.err_index.eq(0xFFFFFFFF)]
        return m

    @staticmethod
    def _engine_domain(m: Module, platform, launch) -> None:
        """The ``pipelined`` engine's clock domain ``engine``: the ``sync`` clock, reset by
        one register, ``engine_rst``, which the ``sync`` reset sets and which holds
        ``launch`` a cycle later (so it equals ``launch_q`` except for one cycle more of reset
        after the board's reset).  With ``ResetInserter`` the engine's reset was ``rst |
        launch_q``, a LUT whose output fed the LSR of every resettable engine flip-flop,
        routed in the fabric across the die.  On an ECP5 the register drives a ``DCCA``, so
        nextpnr-ecp5 routes the reset on a global network (its ``route_globals`` routes every
        user of a DCCA output from the global wires); elsewhere the register is the reset."""
        m.domains.engine = ClockDomain("engine", local=True)
        eng_rst = Signal(init=1, name="engine_rst")
        m.d.sync += eng_rst.eq(launch)
        rst = eng_rst
        if is_ecp5(platform):
            rst = Signal(name="engine_rst_glb")
            m.submodules.engine_rst_dcca = Instance("DCCA", i_CLKI=eng_rst, i_CE=Const(1),
                                                    o_CLKO=rst)
        m.d.comb += [ClockSignal("engine").eq(ClockSignal("sync")),
                     ResetSignal("engine").eq(rst)]
