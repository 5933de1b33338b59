"""Registers the 1x8x8 FPGA build's critical paths asked for (BENCHMARKS.md, twelfth session):
each test fails on the tree before its change.  Behaviour and cycles are checked elsewhere
(tests/test_hw_blocks.py, the golden vectors)."""

import functools
import re

from amaranth.back import rtlil

from isa import VTAConfig


@functools.lru_cache(maxsize=None)
def _core_text(pipelined: bool) -> str:
    """The RTLIL of the FPGA builds' core (queue depth 8, three ALU stages), converted once."""
    from vta_hw.blocks.core import VTACore
    return rtlil.convert(VTACore(VTAConfig(), queue_depth=8, alu_stages=3, pipelined=pipelined))


@functools.lru_cache(maxsize=None)
def _piped_compute_text() -> str:
    """The RTLIL of the ``pipelined`` compute module, converted once."""
    from vta_hw.blocks.compute import ComputeModule
    return rtlil.convert(ComputeModule(VTAConfig(), alu_stages=3, pipelined=True))


def _registers(text: str) -> set[str]:
    """Names of the wires a flip-flop cell drives in Amaranth's RTLIL."""
    return set(re.findall(r"connect \\Q \\(\S+)", text))


def _memrd_en(text: str, memid: str) -> list[str]:
    """The ``EN`` connection of every read port of memory ``memid``."""
    out = []
    for cell in re.findall(r"cell \$memrd_v2 .*?\n  end", text, re.S):
        if f'parameter \\MEMID "\\\\{memid}"' in cell:
            out += re.findall(r"connect \\EN (\S+)", cell)
    return out


def test_onchip_dram_read_port_has_no_enable_and_registered_issue_terms():
    """The DRAM stand-in's block RAMs are always read (no enable net from the issue logic
    to every block RAM's CE); ``due`` and ``rleft != 0`` are registers, not a subtractor
    and a 24-bit compare in front of the issue."""
    from vta_hw.blocks.dram import OnChipDram
    text = rtlil.convert(OnChipDram(64, 64, 4))
    assert _memrd_en(text, "mem") == ["1'1"]
    assert {"due", "rleft_nz"} <= _registers(text)


def test_onchip_dram_read_address_is_a_select_between_registers():
    """The DRAM stand-in's issue condition is a register (``go``) but the host port's
    ``ext_en``, so the block RAM's read address is a select, by ``go``, ``ext_en`` and the
    request queue's ready flag, between registers (``raddr``, ``raddr_p1``, the queue
    head's address, ``ext_addr``): no ``due``, ``rleft_nz``, read-queue level or read in
    flight in front of the address pins (s21_fmax's f84a879 seeds 1 / 2: ``rleft_nz`` /
    the bridge's ``ext_en`` -> the issue -> ``raddr_next``'s select -> the block RAM's
    address)."""
    from vta_hw.blocks.dram import OnChipDram
    for depth in (64, 8192):
        top = _module(rtlil.convert(OnChipDram(64, depth, 8)), "top")
        addr, = [re.search(r"connect \\ADDR (\S+)", c).group(1)
                 for c in re.findall(r"cell \$memrd_v2 .*?\n  end", top, re.S)
                 if 'MEMID "\\\\mem"' in c]
        cone = _cone(top, addr)
        regs = {"\\" + r for r in _registers(top)}
        assert {"\\go", "\\raddr", "\\raddr_p1"} <= cone & regs
        fifo = {w for w in cone if re.fullmatch(r"\\r_(data|rdy)\$\d+", w)}
        assert len(fifo) == 2                       # the request queue's head and flag
        assert cone - fifo == {"\\go", "\\raddr", "\\raddr_p1", "\\rbusy",
                               "\\rleft_one", "\\ext_en", "\\ext_addr"}


def test_onchip_dram_master_ready_reaches_the_issue_register_through_gates_only():
    """The master's ``rd_data_ready`` (the loaders' ready logic) reaches the DRAM stand-in's
    ``go`` through and/or gates only: the read queue's next room is formed from equality
    flags of its level and the read in flight, not a compare or adder after ``deq``
    (s22_fmax's 1435d97 seed 1: the loader's ``dat_more`` -> ``rd_data_ready`` -> a CCU2C
    compare -> ``go``, 89.29 MHz)."""
    from vta_hw.blocks.dram import OnChipDram
    top = _module(rtlil.convert(OnChipDram(64, 8192, 8)), "top")
    regs, kinds = _comb_reach(top, "\\port__rd_data_ready")
    assert regs == {"\\go"}
    assert kinds <= {"$and", "$or", "$not", "$mux", "process", "alias"}


def test_onchip_dram_write_ready_comes_from_registered_count_flags():
    """The DRAM stand-in's ``wr_data_ready`` takes ``wleft != 0`` from a register
    (``wleft_nz``), and the last beat is ``wleft_one``, not a 24-bit compare (s21_fmax's
    c51248c seed 1: ``wleft`` -> ``wr_data_ready`` -> the store's beat -> the OUT SRAM's read
    enable)."""
    from vta_hw.blocks.dram import OnChipDram
    assert {"wleft_nz", "wleft_one"} <= _registers(rtlil.convert(OnChipDram(64, 64, 4)))


def test_fetch_request_room_flag_is_a_register():
    """Fetch keeps ``lim - occ`` as one register (``slack``) and ``occ <= lim`` as a flag
    (``room``), each loaded from a small add of registers, and precomputes the burst after
    the next one (``n_after``, ``nz_after``), so the read arbiter's grant starts from
    flip-flops (s19_fmax's cd6ce3a seeds 1/2/3: the ``occ <= lim`` carry chain -> the
    arbiter -> the loader) and no 32-bit chain feeds ``room`` (s20_fmax's fcc42ec)."""
    from vta_hw.blocks.fetch import FetchModule
    regs = _registers(rtlil.convert(FetchModule(VTAConfig(), burst=4)))
    assert {"room", "slack", "n", "req_nz", "n_after", "nz_after"} <= regs
    assert not {"pending", "occ", "lim", "to_req"} & regs


def test_store_size_product_is_registered_before_the_sram_base_sum():
    """The store module registers ``y_size * x_size`` in SIZE and adds ``sram_base`` in
    DEP, so the multiplier and the 33-bit adder are not in one cycle."""
    from vta_hw.blocks.store import StoreModule
    regs = _registers(rtlil.convert(StoreModule(VTAConfig())))
    assert "tiles" in regs
    assert "end" not in regs


def test_store_dep_decides_from_registered_checks_and_one_compare():
    """SIZE registers DEP's checks but the range one (``pre_fail``/``pre_code``) and
    ``depth - sram_base`` (``room``), so DEP's range check is ``tiles`` against ``room``:
    no adder takes ``tiles`` (the fourteenth session's seed-2 path: store's ``insn`` ->
    ``sram_base + tiles`` -> the range compare -> the error priority -> ``err_code``)."""
    from vta_hw.blocks.store import StoreModule
    text = rtlil.convert(StoreModule(VTAConfig()))
    assert {"room", "base_over", "pre_fail", "pre_code", "empty"} <= _registers(text)
    adds = re.findall(r"cell \$add \S+\n(.*?)\n  end", text, re.S)
    assert adds and not [a for a in adds if "\\tiles" in a]


def _cmd_insn_users(text: str) -> set[str]:
    """Types of the cells of the top module that take a slice of ``cmd_insn`` as an input."""
    top = text.split("\nmodule ")[1]
    cells = re.findall(r"cell (\$\w+) \S+\n(.*?)\n  end", top, re.S)
    return {typ for typ, body in cells if re.search(r"connect \\[ABS] .*\\cmd_insn \[", body)}


def test_pipelined_compute_has_only_selects_behind_its_command_queue():
    """The ``pipelined`` compute module takes ``uop_bgn + 1``, ``uop_bgn + 1 == uop_end`` and
    DECODE's ``runs_loop`` from the queue (``cmd_pre``, computed where fetch pushes the
    instruction), so the queue's block RAM output feeds selects and registers only: no adder
    or compare (the thirteenth session's critical path on all three seeds: the queue's
    block RAM -> ``uop_bgn + 1 == uop_end`` -> ``uop_single1``).  Since the UOP SRAM
    address takes the head's ``uop_bgn`` from a register (``cmd_head_bgn``), ``cmd_insn``
    feeds registers only."""
    assert _cmd_insn_users(_piped_compute_text()) <= {"$mux"}


def test_pipelined_compute_queue_carries_the_predecode_in_the_block_rams_spare_bits():
    """The compute queue of the ``pipelined`` core is ``predecode`` wider than the others,
    and for the FPGA builds' configurations that fits the spare bits of the 36-bit-wide
    block RAMs the 160-bit entries take anyway (no block RAM more)."""
    from vta_hw.blocks.compute import pre_layout
    from vta_hw.board.builds import build_config
    text = _core_text(True)
    widths = {q: int(re.search(rf"module \\top\.engine\.{q}_queue\n(?:.*\n)*?\s*"
                               rf"memory width (\d+)", text).group(1))
              for q in ("ld", "cp", "st")}
    extra = pre_layout(VTAConfig()).size
    assert widths == {"ld": 160, "st": 160, "cp": 160 + extra}
    for name in ("1x8x8-85f-pipelined", "1x16x16-85f-pipelined"):
        cfg, _ = build_config(name)
        assert -(-(160 + pre_layout(cfg).size) // 36) == -(-160 // 36), name


def test_pipelined_compute_decodes_from_registers():
    """DECODE's checks (illegal memory type or ALU opcode, the micro-op range, an empty loop
    or load) come from the queue too and are registered with the instruction (``insn_pre``),
    so the ``pipelined`` compute module has no magnitude compare at all (router2's path of
    the thirteenth session: the instruction register -> DECODE's checks -> a token counter);
    the plain one computes them in DECODE."""
    from vta_hw.blocks.compute import ComputeModule

    def top_cells(text):
        return set(re.findall(r"cell (\$\w+) ", text.split("\nmodule ")[1]))
    cfg = VTAConfig()
    plain = rtlil.convert(ComputeModule(cfg))
    assert {"$le", "$gt"} <= top_cells(plain)
    piped = _piped_compute_text()
    assert not top_cells(piped) & {"$le", "$lt", "$ge", "$gt", "$sub"}
    assert "insn_pre" in _registers(piped)


def test_the_bridge_registers_its_fifo_read_data_before_using_it():
    """The UART bridge's receive FIFO reads from a block RAM without an output register, so
    its read data drives one register (``rx_byte``) and nothing else: no command decode or
    byte shift behind the block RAM (the thirteenth session's critical path on seeds 1
    and 3: ``rx_fifo``'s DP16KD -> the shift into the bridge's write data)."""
    from vta_hw.board.uart import HostBridge
    top = rtlil.convert(HostBridge(64, 8192, mem_latency=2)).split("\nmodule ")[1]
    uses = re.findall(r"assign (\$\d+) \[7:0\] \\r_data \[7:0\]", top)
    assert len(uses) == 1 and len(re.findall(r"\\r_data \[", top)) == 2   # its port + the one
    d = re.search(r"connect \\D (\S+) .*\n.*\n\s*connect \\Q \\rx_byte\n", top).group(1)
    assert d == uses[0]


def test_the_bridge_registers_the_dram_read_data_before_its_answer_select():
    """The on-chip DRAM's block RAM read data (``mem_rdata``) drives one register
    (``mem_rdata_q``) and nothing else in the bridge (the fourteenth session's seed-3 path:
    the DRAM's DP16KD -> the answer select -> ``out``)."""
    from vta_hw.board.uart import HostBridge
    top = rtlil.convert(HostBridge(64, 8192, mem_latency=2)).split("\nmodule ")[1]
    assert re.findall(r"connect \\D (\S+).*\n.*\n\s*connect \\Q \\mem_rdata_q\n", top) \
        == ["\\mem_rdata"]
    assert len(re.findall(r"\\mem_rdata\b(?!_q)", top)) == 2    # its port + the register


def test_pipelined_gemm_registers_the_first_level_of_its_adder_trees():
    """The ``pipelined`` GEMM registers each lane's pairwise product sums (``pair_*``) and
    sums the rest a stage later (``dot3`` and ``dot4`` are gone: the products come a stage
    later too, after the INP/WGT read data's fabric registers ``inp_f``/``wgt_f``), so a
    multiplier's output register drives one adder and a register (the fourteenth session's
    seed-1 path: a product -> three adds -> ``dot3``) and a block RAM's output drives one
    register (the fifteenth session's seed-2 path: the WGT SRAM -> a MULT18X18D's input
    register); the plain core keeps its s2b tree."""
    from vta_hw.blocks.gemm import GemmPipe
    cfg = VTAConfig()
    piped = _registers(rtlil.convert(GemmPipe(cfg, pipelined=True)))
    n = cfg.batch * cfg.block_out
    assert {f"pair_{i}_{j}" for i in range(n) for j in range(cfg.block_in // 2)} <= piped
    assert "dot3" not in piped and "dot4" not in piped and "dot5" in piped
    assert {"inp_f", "wgt_f"} <= piped     # the read data registered before the multipliers
    plain = _registers(rtlil.convert(GemmPipe(cfg)))
    assert "dot3" in plain and not [r for r in plain if r.startswith("pair_")]


def test_pipelined_core_token_queues_give_avail_from_a_register():
    """The ``pipelined`` core's token queues drive ``avail`` from a flip-flop,
    not from their counter's OR-reduction (the fifteenth session's seed-3 path: the ``l2g``
    count -> compute's token check -> the UOP SRAM address); the plain core's do not."""
    for piped in (True, False):
        text = _core_text(piped)
        mods = {q: text.split(f"module \\top.engine.{q}\n")[1].split("\nend\n")[0]
                for q in ("l2g", "g2l", "g2s", "s2g")}
        for q, body in mods.items():
            assert ("avail" in _registers(body)) == piped, (q, piped)


# ---------------------------------------------------------------- a module's wire graph
# (wire granularity: a slice stands for its whole wire, which can only widen a cone)

_TOK = re.compile(r"(\\[^\s\[\]{}]+|\$\d+)")
_FF = ("$dff", "$adff", "$sdff", "$dffe", "$adffe", "$sdffe", "$aldff")


def _module(text: str, name: str) -> str:
    """The RTLIL body of module ``name`` (``top``, ``top.loader``, ...)."""
    return re.search(rf"\nmodule \\{re.escape(name)}\n(.*?)\nend\n", text, re.S).group(1)


def _graph(mod: str):
    """``(edges, ffs)``: ``edges[src]`` = ``{(dst, kind)}`` for every combinational step
    from wire ``src`` to wire ``dst`` (``kind`` the cell type, or ``process``); ``ffs[q]`` =
    the wires of flip-flop ``q``'s D input.  Memory read ports and submodules are not
    stepped through (their outputs are sources)."""
    edges, ffs = {}, {}
    for typ, body in re.findall(r"\n  cell (\S+) \S+\n(.*?)\n  end", mod, re.S):
        ports = {p: set(_TOK.findall(rhs)) for p, rhs in
                 re.findall(r"connect \\(\w+) (.*)", body)}
        if typ in _FF:
            for q in ports["Q"]:
                ffs.setdefault(q, set()).update(ports["D"])
        elif typ.startswith("$") and "Y" in ports:
            for p, ws in ports.items():
                if p != "Y":
                    for w in ws:
                        edges.setdefault(w, set()).update((y, typ) for y in ports["Y"])
    for body in re.findall(r"\n  process \S+\n(.*?)\n  end\n", mod + "\n", re.S):
        outs = {_TOK.findall(lhs)[0] for lhs in re.findall(r"assign (\S+ ?(?:\[[\d:]+\])?) ",
                                                             body)}
        ins = set()
        for line in body.splitlines():
            line = line.strip()
            if line.startswith("assign "):
                ins.update(_TOK.findall(line)[1:])
            elif line.startswith("switch "):
                ins.update(_TOK.findall(line))
        for w in ins:
            edges.setdefault(w, set()).update((o, "process") for o in outs)
    for line in re.findall(r"(?m)^connect (.*)$", mod):       # aliases: rhs -> lhs
        toks = _TOK.findall(line)
        for w in toks[1:]:
            edges.setdefault(w, set()).add((toks[0], "alias"))
    return edges, ffs


def _alias_of(mod: str, name: str) -> str:
    """The wire the module-level ``connect \\name ...`` makes ``name`` an alias of."""
    return _TOK.findall(re.search(rf"(?m)^connect \\{re.escape(name)} (.*)$", mod)
                        .group(1))[0]


def _cone(mod: str, wire: str) -> set[str]:
    """The flip-flops (their Q wires), memory read data and inputs the combinational cone of
    ``wire`` starts from (``wire`` itself when a flip-flop drives it)."""
    edges, ffs = _graph(mod)
    back = {}
    for s, outs in edges.items():
        for d, _ in outs:
            back.setdefault(d, set()).add(s)
    seen, todo, srcs = set(), [wire], set()
    while todo:
        w = todo.pop()
        if w in seen:
            continue
        seen.add(w)
        if w in ffs or w not in back:
            srcs.add(w)
        else:
            todo += back[w]
    return srcs


def _comb_reach(mod: str, wire: str) -> tuple[set[str], set[str]]:
    """``(flip-flops, cell types)``: the flip-flops whose D input ``wire`` reaches through
    combinational logic, and the types of the cells on the way."""
    edges, ffs = _graph(mod)
    d_of = {}
    for q, ds in ffs.items():
        for d in ds:
            d_of.setdefault(d, set()).add(q)
    seen, todo, regs, kinds = set(), [wire], set(), set()
    while todo:
        w = todo.pop()
        if w in seen:
            continue
        seen.add(w)
        regs |= d_of.get(w, set())
        for d, kind in edges.get(w, ()):
            kinds.add(kind)
            todo.append(d)
    return regs, kinds


def test_pipelined_compute_forms_its_error_outputs_from_registers_in_error():
    """``err_code`` / ``err_index`` are formed in ERROR from registers that hold still from
    DECODE on (the FSM state, ``insn_pre``, ``index``): no path from DECODE's checks, the
    loader's range check (``loader.total``) or the units' into them or into the enables of
    36 flip-flops (the fifteenth session's seed-1 path: ``loader.total`` -> the fail chain ->
    ``err_index``'s CE)."""
    top = _module(_piped_compute_text(), "top")
    regs = _registers(top)
    assert "err_code" not in regs and "err_index" not in regs
    assert _cone(top, "\\err_index") == {"\\fsm_state", "\\index"}
    assert _cone(top, "\\err_code") == {"\\fsm_state", "\\insn_pre"}
    assert {"\\fsm_state", "\\index", "\\insn_pre"} <= {"\\" + r for r in regs}


def test_uop_loop_counts_down_with_registered_last_flags():
    """The micro-op loop's counters count down, and whether an index is at its last
    iteration is a register (``in_last`` / ``out_last``) updated with them, so the next
    state of the counters takes a flag, not ``i_in + 1 == iter_in`` (the fifteenth
    session's seed-3 path: ``i_in`` -> its carry chain and compare -> ``i_out``'s CE)."""
    from vta_hw.blocks.uoploop import UopLoop
    for ahead in (False, True):
        mod = _module(rtlil.convert(UopLoop(VTAConfig(), ahead=ahead)), "top")
        regs = _registers(mod)
        assert {"in_last", "out_last", "in_left", "out_left"} <= regs
        assert not {"i_in", "i_out"} & regs
        # a compare of a counter feeds its flag only (nothing else in the cycle after it)
        cmps = [(re.findall(r"connect \\[AB] (\S+)", c), re.search(r"connect \\Y (\S+)",
                                                                  c).group(1))
                for c in re.findall(r"cell \$eq .*?\n  end", mod, re.S)]
        hit = [y for ins, y in cmps if {"\\in_left", "\\out_left"} & set(ins)]
        assert len(hit) == 2
        for y in hit:
            assert _comb_reach(mod, y)[0] in ({"\\in_last"}, {"\\out_last"}), y


def test_onchip_dram_registers_the_block_ram_data_before_the_read_queue():
    """The DRAM stand-in's block RAM read data drives one register (``rd_q``) and the host
    port's output, and the read queue's write data is that register (the fifteenth
    session's seed-2 path on 658e65c: the DRAM's DP16KD -> a select -> ``rdq``'s LUT RAM);
    ``read_reg=False`` keeps the old path (the behaviour test compares the two)."""
    from vta_hw.blocks.dram import OnChipDram
    for depth in (64, 8192):
        top = _module(rtlil.convert(OnChipDram(64, depth, 8)), "top")
        data, = [re.search(r"connect \\DATA (\S+)", c).group(1)
                 for c in re.findall(r"cell \$memrd_v2 .*?\n  end", top, re.S)
                 if 'MEMID "\\\\mem"' in c]
        q = _alias_of(top, "rd_q")
        edges, ffs = _graph(top)
        assert ffs[q] == {data}
        assert _comb_reach(top, data) == ({q}, {"alias"})   # the register and ext_rdata
        assert re.search(rf"connect \\w_port__data {re.escape(q)} ", top)
    old = _module(rtlil.convert(OnChipDram(64, 64, 8, read_reg=False)), "top")
    assert not re.search(r"(?m)^connect \\rd_q ", old)


def test_loader_size_products_land_in_registers_of_their_own():
    """Each of the tile loader's size products (``rowlen * nrows``, ``yp0 * rowlen``,
    ``yp1 * rowlen``) goes straight into a register of its own (``total``, ``ylead``,
    ``ytail``), with no adder after the multiplier in that cycle; the pads are added a
    cycle later (the seed-1 path after the error outputs were registered: ``rowlen`` -> a
    MULT18X18D without registers -> the adder -> ``tail``)."""
    from vta_hw.blocks.loader import TileLoader
    mod = _module(rtlil.convert(TileLoader(64, [16, 4], [512, 512])), "top")
    muls = {re.search(r"connect \\B (\S+)", c).group(1) + "*" +
            re.search(r"connect \\A (\S+)", c).group(1): re.search(r"connect \\Y (\S+)",
                                                                   c).group(1)
            for c in re.findall(r"cell \$mul .*?\n  end", mod, re.S) if "\\rowlen" in c}
    assert set(muls) == {"\\nrows*\\rowlen", "\\rowlen*\\yp0", "\\rowlen*\\yp1"}
    want = {"\\nrows*\\rowlen": "\\total", "\\rowlen*\\yp0": "\\ylead",
            "\\rowlen*\\yp1": "\\ytail"}
    for k, y in muls.items():
        assert _comb_reach(mod, y) == ({want[k]}, {"process"}), k


def test_pipelined_uop_sram_address_has_no_block_ram_or_loop_select_in_front():
    """The ``pipelined`` compute module addresses the UOP SRAM from registers through a few
    selects: in IDLE the queue head's ``uop_bgn`` from a register the core keeps
    (``cmd_head_bgn``), not the queue's block RAM output (``cmd_insn``); while the loop
    runs the loop's ``u_ahead_run``, itself a register (``u_addr``), not the select on the
    loop's phase, flags and counters (the seventeenth session's paths into the UOP SRAM's
    address pins: seed 2 ``cp_queue``'s DP16KD -> the head's ``uop_bgn``, seed 1 ``phase``
    -> ``phase == gap`` -> the look-ahead select)."""
    from vta_hw.blocks.uoploop import UopLoop
    cfg = VTAConfig()
    top = _module(_piped_compute_text(), "top")
    addr, = [re.search(r"connect \\ADDR (\S+)", c).group(1)
             for c in re.findall(r"cell \$memrd_v2 .*?\n  end", top, re.S)
             if 'MEMID "\\\\uop_mem"' in c]
    cone = _cone(top, addr)
    assert "\\cmd_head_bgn" in cone and "\\cmd_insn" not in cone
    assert cone <= {"\\cmd_head_bgn", "\\insn", "\\insn_pre", "\\fsm_state", "\\l2g_avail",
                    "\\s2g_avail", "\\u_ahead_run"} | {w for w in cone if "busy" in w}
    loop = _module(rtlil.convert(UopLoop(cfg, ahead=True)), "top")
    assert "u_ahead_run" in _registers(loop)         # ``u_addr``'s flip-flop drives it
    assert _cone(loop, "\\u_ahead_run") == {"\\u_ahead_run"}
    # the core: ``cmd_head_bgn`` is a register (``cp_head_bgn``, which drives the port)
    regs = _registers(_module(_core_text(True), "top.engine"))
    assert "cp_push_bgn" in regs and {"cp_head_bgn", "cmd_head_bgn"} & regs


def test_pipelined_alu_sums_the_product_pieces_through_one_carry_chain():
    """The ``pipelined`` ALU's MUL result ``q0 + (q1 + q2) << h`` is ``q0``'s low half and
    ``q0_hi + q1 + q2`` through a carry-save step and one ``h``-bit adder: no adder takes a
    product piece's register directly (the eighteenth session's seed-1 path: ``mul_lh_3``
    -> ``q1 + q2`` -> ``q0 + ...`` -> the op select -> ``r6``)."""
    from vta_hw.blocks.alu import AluPipe
    cfg = VTAConfig()
    top = _module(rtlil.convert(AluPipe(cfg, stages=3, pipelined=True)), "top")
    regs = _registers(top)
    n = cfg.batch * cfg.block_out
    pieces = {f"\\mul_{k}_{i}" for k in ("lo", "hl", "lh") for i in range(n)}
    assert {p[1:] for p in pieces} <= regs
    adds = re.findall(r"cell \$add \S+\n(.*?)\n  end", top, re.S)
    assert adds and not [a for a in adds if set(_TOK.findall(a)) & pieces]


def test_store_counts_rows_down_with_a_registered_last_flag():
    """Store's row counter counts down (``y_left``) with ``y_left == 0`` of the current row
    a register (``y_last``) updated with it, so RESP's ``s2g`` push takes a flag, not
    ``y + 1 == y_size`` (the eighteenth session's seed-3 path: store's ``y`` -> its carry
    chain and compare -> the ``s2g`` push -> the token counter)."""
    from vta_hw.blocks.store import StoreModule
    mod = _module(rtlil.convert(StoreModule(VTAConfig())), "top")
    regs = _registers(mod)
    assert {"y_left", "y_last"} <= regs and "y" not in regs
    assert _cone(mod, "\\s2g_push") <= {"\\fsm_state", "\\insn", "\\y_last",
                                         "\\empty", "\\g2s_avail", "\\wr__wr_done",
                                         "\\pre_fail", "\\x_nonzero", "\\base_over",
                                         "\\tiles", "\\room"}
