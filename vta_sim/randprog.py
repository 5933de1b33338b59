"""Random well-formed VTA programs, for differential testing (simulator vs reference loop,
concurrent vs serial, simulator vs RTL).

A generated program is *well formed*: every instruction is valid for the configuration, every
index is in range, no SRAM element is read before it is written (strict mode passes), vector
SHR is never generated (its amounts come from data), tokens are balanced, every pop's
matching push is earlier in the stream (program order is a legal schedule), FINISH is last
and ordered after everything, and the program is **race-free**: any two conflicting accesses
(SRAM tiles, DRAM regions) on different modules are ordered by tokens.  So every legal
schedule gives the same DRAM image.

Tokens are inserted only where a conflict needs them (tracked with vector clocks), so
independent work on different modules genuinely overlaps.
"""

from __future__ import annotations

import numpy as np

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program, encode_uops)

__all__ = ["random_program"]

_L, _C, _S = 0, 1, 2   # modules
# queue from module a to module b -> (push flag on a, pop flag on b)
_EDGE = {(_L, _C): ("push_next", "pop_prev"), (_C, _L): ("push_prev", "pop_next"),
         (_C, _S): ("push_next", "pop_prev"), (_S, _C): ("push_prev", "pop_next")}


class _Insn:
    __slots__ = ("kind", "module", "fields", "flags", "reads", "writes")

    def __init__(self, kind, module, fields, reads=(), writes=()):
        self.kind, self.module, self.fields = kind, module, fields
        self.flags = {"pop_prev": 0, "pop_next": 0, "push_prev": 0, "push_next": 0}
        self.reads, self.writes = set(reads), set(writes)

    def record(self):
        f = dict(self.fields, **self.flags)
        if self.kind == "mem":
            return MemInsn(**f)
        if self.kind == "gemm":
            return GemmInsn(**f)
        if self.kind == "alu":
            return AluInsn(**f)
        return FinishInsn(**self.flags)


class _Builder:
    def __init__(self):
        self.insns: list[_Insn] = []
        self.clock: list[list[int]] = []          # per insn: instructions of each module
        self.by_module: list[list[int]] = [[], [], []]

    def _conflict(self, a: _Insn, b: _Insn) -> bool:
        return bool(a.writes & (b.reads | b.writes) or b.writes & a.reads)

    def _hb(self, n_clock, m: int) -> bool:
        """Does instruction m happen before an instruction with clock n_clock?"""
        mod = self.insns[m].module
        return n_clock[mod] > self.by_module[mod].index(m)

    def _push_from(self, a: int, b: int) -> int:
        """Make the latest instruction of module a (or a new NOP on a) push to b; return the
        index of the pushing instruction."""
        push, _ = _EDGE[(a, b)]
        if self.by_module[a]:
            last = self.by_module[a][-1]
            if not self.insns[last].flags[push]:
                self.insns[last].flags[push] = 1
                return last
        return self._emit(_nop(a), extra_push=push)

    def _emit(self, ins: _Insn, everything: bool = False, extra_push: str | None = None) -> int:
        m = ins.module
        clock = list(self.clock[self.by_module[m][-1]]) if self.by_module[m] else [0, 0, 0]
        clock[m] = len(self.by_module[m]) + 1
        for a in (_L, _C, _S):
            if a == m or not self.by_module[a]:
                continue
            need = None
            for j in reversed(self.by_module[a]):
                if self._hb(clock, j):
                    break
                if everything or self._conflict(self.insns[j], ins):
                    need = j
                    break
            if need is None:
                continue
            if (a, m) in _EDGE:
                p = self._push_from(a, m)
                ins.flags[_EDGE[(a, m)][1]] = 1
                clock = [max(x, y) for x, y in zip(clock, self.clock[p])]
            else:  # load <-> store: route through a compute NOP
                nop = _nop(_C)
                p1 = self._push_from(a, _C)
                nop.flags[_EDGE[(a, _C)][1]] = 1
                nop_idx = self._append(nop, extra=p1)
                nop.flags[_EDGE[(_C, m)][0]] = 1
                ins.flags[_EDGE[(_C, m)][1]] = 1
                clock = [max(x, y) for x, y in zip(clock, self.clock[nop_idx])]
        if extra_push:
            ins.flags[extra_push] = 1
        self.insns.append(ins)
        self.clock.append(clock)
        self.by_module[m].append(len(self.insns) - 1)
        return len(self.insns) - 1

    def _append(self, ins: _Insn, extra: int) -> int:
        """Append a compute NOP that pops from instruction ``extra``'s push."""
        m = ins.module
        clock = list(self.clock[self.by_module[m][-1]]) if self.by_module[m] else [0, 0, 0]
        clock[m] = len(self.by_module[m]) + 1
        clock = [max(x, y) for x, y in zip(clock, self.clock[extra])]
        self.insns.append(ins)
        self.clock.append(clock)
        self.by_module[m].append(len(self.insns) - 1)
        return len(self.insns) - 1


def _nop(module: int) -> _Insn:
    if module == _S:
        return _Insn("mem", _S, _mem(Opcode.STORE, MemType.UOP, 0, 0, 0, 0, 0))
    mt = MemType.INP if module == _L else MemType.UOP
    return _Insn("mem", module, _mem(Opcode.LOAD, mt, 0, 0, 0, 0, 0))


def _mem(opcode, mt, sram, dram, y, x, stride, yp0=0, yp1=0, xp0=0, xp1=0) -> dict:
    return dict(opcode=opcode, memory_type=mt, sram_base=sram, dram_base=dram, y_size=y,
                x_size=x, x_stride=stride, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0, x_pad_1=xp1)


def random_program(cfg: VTAConfig | None = None, rng: np.random.Generator | int | None = None,
                   n_insns: int = 30, *, window: int = 24, high: bool | None = None,
                   alu_mul: bool = True, acc8: bool = True,
                   hw_safe: bool = False) -> tuple[bytes, np.ndarray]:
    """A random well-formed program for ``cfg``.

    Parameters
    ----------
    cfg : VTAConfig
    rng : numpy Generator or seed
    n_insns : int
        Approximate number of random (non-synchronisation) instructions.
    window : int
        Tiles of each SRAM the program works in (uses ``window`` micro-ops too).
    high : bool, optional
        Put the working windows at the top of the buffers (exercises high index bits);
        random when None.
    alu_mul, acc8 : bool
        Whether to generate ALU MUL and LOAD ACC_8BIT (fsim-only features; the RTL lacks them).
    hw_safe : bool
        Only behaviour on which fsim and the hardware designs agree (spec §3.4-§3.10): no MUL,
        no ACC_8BIT, no zero-trip GEMM/ALU, no WGT padding, immediate ALU ops in place
        (micro-op src == dst), SHR immediates in [-15, 15], no ALU iteration reading a tile
        another iteration of the same instruction writes (no ALU bypass in Chisel), and
        STOREs only of tiles last written by a non-reset GEMM or an ALU op (hardware stores
        its OUT buffer, which LOAD ACC and reset GEMMs do not update).

    Returns
    -------
    (insns, dram) : (bytes, 1-D uint8 array)
        The instruction stream and the DRAM image before execution.
    """
    from isa import default_config
    cfg = cfg or default_config()
    rng = np.random.default_rng(rng)
    if hw_safe:
        alu_mul = acc8 = False
        if min(window, cfg.uop_buff_depth) < 2:
            raise ValueError("hw_safe programs need a window of at least 2 micro-ops")
    K = {"inp": min(window, cfg.inp_buff_depth), "wgt": min(window, cfg.wgt_buff_depth),
         "acc": min(window, cfg.acc_buff_depth), "uop": min(window, cfg.uop_buff_depth)}
    depth = {"inp": cfg.inp_buff_depth, "wgt": cfg.wgt_buff_depth, "acc": cfg.acc_buff_depth,
             "uop": cfg.uop_buff_depth}
    if high is None:
        high = bool(rng.integers(2))
    base = {k: (depth[k] - K[k] if high else 0) for k in K}
    # DRAM regions (byte offsets aligned to 256 so every element size divides them)
    E = {"uop": 4, "inp": cfg.inp_elem_bytes, "wgt": cfg.wgt_elem_bytes,
         "acc": cfg.acc_elem_bytes, "acc8": cfg.batch * cfg.block_out,
         "out": cfg.out_elem_bytes}
    n_tiles = {"uop": 4 * K["uop"], "inp": 4 * K["inp"], "wgt": 2 * K["wgt"],
               "acc": 2 * K["acc"], "acc8": 2 * K["acc"], "out": 4 * K["acc"]}
    off, pos = {}, 0
    for name in ("uop", "inp", "wgt", "acc", "acc8", "out"):
        pos = -(-pos // 4096) * 4096
        off[name] = pos
        pos += n_tiles[name] * E[name]
    dram = rng.integers(0, 256, pos + int(rng.integers(0, 64)), dtype=np.uint8)
    # micro-op pool: half GEMM-valid (dst acc, src inp, wgt wgt), half ALU-valid (src acc)
    nu = n_tiles["uop"]
    half = K["acc"] // 2 or 1
    dst = base["acc"] + rng.integers(0, half, nu)
    src_g = base["inp"] + rng.integers(0, max(1, K["inp"] // 2), nu)
    src_a = base["acc"] + rng.integers(0, half, nu)
    is_alu = rng.integers(0, 2, nu).astype(bool)
    if hw_safe:   # half of the ALU micro-ops in place, usable by immediate operations
        src_a = np.where(rng.integers(0, 2, nu).astype(bool), dst, src_a)
    src = np.where(is_alu, src_a, src_g)
    wgt = np.where(is_alu, 0, base["wgt"] + rng.integers(0, max(1, K["wgt"] // 2), nu))
    if hw_safe:   # the last pool entry: an in-place ALU micro-op on the first ACC tile
        dst[-1], src[-1], wgt[-1], is_alu[-1] = base["acc"], base["acc"], 0, True
    uops = encode_uops(dst, src, wgt, cfg)
    dram[off["uop"]:off["uop"] + 4 * nu] = uops.view(np.uint8)
    if cfg.acc_width == 32 and rng.integers(2):   # keep some accumulators small
        a = dram[off["acc"]:off["acc"] + n_tiles["acc"] * E["acc"]].view("<i4")
        a[::3] = rng.integers(-300, 300, a[::3].shape)

    b = _Builder()
    # SRAM models: uop contents (dst, src, wgt; -1 = unwritten) and written masks
    u_model = np.full((depth["uop"], 3), -1, np.int64)
    written = {k: np.zeros(depth[k], bool) for k in ("inp", "wgt", "acc")}
    out_valid = np.zeros(depth["acc"], bool)   # last written by a non-reset GEMM or an ALU

    def tiles(buf, idx):
        return {(buf, int(t)) for t in np.unique(idx)}

    def dram_reg(name):
        return {("dram", name)}

    def rand_2d(buf, mem_buf_tiles, src_region, allow_pad=True, store=False):
        """Random (sram_base, dram_base, y, x, stride, pads) fitting window and region."""
        for _ in range(20):
            x = int(rng.integers(1, 5))
            y = int(rng.integers(0 if rng.random() < 0.1 else 1, 4))
            pads = [int(rng.integers(0, 3)) if allow_pad and rng.random() < 0.4
                    and not (hw_safe and buf == "wgt") else 0
                    for _ in range(4)]
            rows, cols = pads[0] + y + pads[1], pads[2] + x + pads[3]
            if rows * cols == 0 or rows * cols > K[buf]:
                continue
            stride = int(rng.choice([x, x + int(rng.integers(1, 3)), max(0, x - 1), 0]))
            span = (y - 1) * stride + x if y else 0
            if span > n_tiles[src_region]:
                continue
            sram = base[buf] + int(rng.integers(0, K[buf] - rows * cols + 1))
            dbase = off[src_region] // E[src_region] + int(
                rng.integers(0, n_tiles[src_region] - span + 1))
            return sram, dbase, y, x, stride, pads, rows * cols
        return None

    def fill(buf, mt, region, module):
        """Initial full load of a window (so later reads are of written data)."""
        n = K[buf]
        ins = _Insn("mem", module, _mem(Opcode.LOAD, mt, base[buf], off[region] // E[region],
                                        1, n, n), reads=dram_reg(region),
                    writes=tiles(buf, base[buf] + np.arange(n)))
        b._emit(ins)
        written[buf][base[buf]:base[buf] + n] = True

    k_uop = K["uop"] - 1 if hw_safe else K["uop"]   # hw_safe keeps a copy uop in the last slot

    def load_uop():
        n = int(rng.integers(1, k_uop + 1))
        s0 = base["uop"] + int(rng.integers(0, k_uop - n + 1))
        d0 = int(rng.integers(0, nu - n + 1))
        ins = _Insn("mem", _C, _mem(Opcode.LOAD, MemType.UOP, s0, off["uop"] // 4 + d0, 1, n,
                                    n), reads=dram_reg("uop"),
                    writes={("uop", t) for t in range(s0, s0 + n)})
        b._emit(ins)
        u_model[s0:s0 + n] = np.stack([dst[d0:d0 + n], src[d0:d0 + n], wgt[d0:d0 + n]], 1)
        u_alu[s0:s0 + n] = is_alu[d0:d0 + n]

    u_alu = np.zeros(depth["uop"], bool)

    def gen_compute(kind):
        lo = base["uop"]
        loaded = np.flatnonzero(u_model[lo:lo + K["uop"], 0] >= 0) + lo
        if loaded.size == 0:
            return False
        for _ in range(20):
            u0 = int(rng.choice(loaded))
            ln = int(rng.integers(1, 5))
            seg = np.arange(u0, min(u0 + ln, lo + K["uop"]))
            if (u_model[seg, 0] < 0).any() or (u_alu[seg] != (kind == "alu")).any():
                continue
            hi = 7 if rng.random() < 0.3 else 4
            io, ii = int(rng.integers(1, hi)), int(rng.integers(1, hi))
            if rng.random() < 0.05 and not hw_safe:
                io = 0
            fac = [int(rng.integers(0, 3)) for _ in range(6)]
            yy, xx = np.meshgrid(np.arange(io), np.arange(ii), indexing="ij")
            yy, xx = yy.reshape(-1, 1), xx.reshape(-1, 1)
            d = (u_model[seg, 0] + yy * fac[0] + xx * fac[1]).reshape(-1)
            s = (u_model[seg, 1] + yy * fac[2] + xx * fac[3]).reshape(-1)
            w = (u_model[seg, 2] + yy * fac[4] + xx * fac[5]).reshape(-1)
            if d.size and (d.max() >= base["acc"] + K["acc"] or not written["acc"][d].all()):
                continue
            reads, writes = {("uop", int(t)) for t in seg}, tiles("acc", d)
            if kind == "gemm":
                reset = int(rng.random() < 0.2)
                if not reset and d.size:
                    if s.max() >= base["inp"] + K["inp"] or w.max() >= base["wgt"] + K["wgt"]:
                        continue
                    if not written["inp"][s].all() or not written["wgt"][w].all():
                        continue
                    reads |= tiles("inp", s) | tiles("wgt", w) | tiles("acc", d)
                f = dict(uop_bgn=int(seg[0]), uop_end=int(seg[-1]) + 1, iter_out=io,
                         iter_in=ii, dst_factor_out=fac[0], dst_factor_in=fac[1],
                         src_factor_out=fac[2], src_factor_in=fac[3], wgt_factor_out=fac[4],
                         wgt_factor_in=fac[5], reset=reset)
                b._emit(_Insn("gemm", _C, f, reads, writes))
                out_valid[d] = not reset
                return True
            ops = [AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR] + ([AluOp.MUL] if alu_mul
                                                                  else [])
            op = int(rng.choice(ops))
            use_imm = 1 if op == AluOp.SHR else int(rng.integers(2))
            if not use_imm:
                if d.size and (s.max() >= base["acc"] + K["acc"] or not written["acc"][s].all()):
                    continue
                reads |= tiles("acc", s)
            if hw_safe:
                if use_imm and (u_model[seg, 0] != u_model[seg, 1]).any():
                    continue
                if d.size and np.unique(d).size != d.size:
                    continue
                if not use_imm and d.size and np.isin(s[s != d], d).any():
                    continue
            w_ = cfg.acc_width - 1 if not hw_safe else min(15, cfg.acc_width // 2 - 1)
            imm = int(rng.integers(-w_, w_ + 1)) if op == AluOp.SHR else \
                int(rng.integers(-(1 << 15), 1 << 15))
            f = dict(alu_opcode=op, uop_bgn=int(seg[0]), uop_end=int(seg[-1]) + 1, iter_out=io,
                     iter_in=ii, dst_factor_out=fac[0], dst_factor_in=fac[1],
                     src_factor_out=fac[2] if not use_imm else fac[0],
                     src_factor_in=fac[3] if not use_imm else fac[1], use_imm=use_imm, imm=imm)
            b._emit(_Insn("alu", _C, f, reads | tiles("acc", d), writes))
            out_valid[d] = True
            return True
        return False

    # initial fills, in random module order
    fills = [("inp", MemType.INP, "inp", _L), ("wgt", MemType.WGT, "wgt", _L),
             ("acc", MemType.ACC, "acc", _C)]
    for k in rng.permutation(3):
        fill(*fills[k])
    load_uop()
    copy_slot = base["uop"] + K["uop"] - 1
    if hw_safe:
        b._emit(_Insn("mem", _C, _mem(Opcode.LOAD, MemType.UOP, copy_slot,
                                      off["uop"] // 4 + nu - 1, 1, 1, 1),
                      reads=dram_reg("uop"), writes={("uop", copy_slot)}))
        u_model[copy_slot] = (dst[-1], src[-1], wgt[-1])
        u_alu[copy_slot] = True

    def refresh_out():
        """ALU SHR 0 over the whole ACC window: every tile becomes a valid OUT tile."""
        acc_w = base["acc"] + np.arange(K["acc"])
        f = dict(alu_opcode=AluOp.SHR, uop_bgn=copy_slot, uop_end=copy_slot + 1,
                 iter_out=K["acc"], iter_in=1, dst_factor_out=1, dst_factor_in=0,
                 src_factor_out=1, src_factor_in=0, use_imm=1, imm=0)
        b._emit(_Insn("alu", _C, f, {("uop", copy_slot)} | tiles("acc", acc_w),
                      tiles("acc", acc_w)))
        out_valid[acc_w] = True

    for _ in range(n_insns):
        r = rng.random()
        if r < 0.12:
            buf, mt = ("inp", MemType.INP) if rng.random() < 0.6 else ("wgt", MemType.WGT)
            g = rand_2d(buf, None, buf)
            if g:
                sram, dbase, y, x, stride, pads, nt = g
                b._emit(_Insn("mem", _L, _mem(Opcode.LOAD, mt, sram, dbase, y, x, stride, *pads),
                              dram_reg(buf), tiles(buf, sram + np.arange(nt))))
                written[buf][sram:sram + nt] = True
        elif r < 0.2:
            use8 = acc8 and rng.random() < 0.4
            region = ("acc8" if rng.random() < 0.5 else "out") if use8 else "acc"
            if use8 and region == "out" and E["out"] != E["acc8"]:
                region = "acc8"
            g = rand_2d("acc", None, region)
            if g:
                sram, dbase, y, x, stride, pads, nt = g
                mt = MemType.ACC_8BIT if use8 else MemType.ACC
                b._emit(_Insn("mem", _C, _mem(Opcode.LOAD, mt, sram, dbase, y, x, stride, *pads),
                              dram_reg(region), tiles("acc", sram + np.arange(nt))))
                written["acc"][sram:sram + nt] = True
                out_valid[sram:sram + nt] = False
        elif r < 0.27:
            load_uop()
        elif r < 0.5:
            gen_compute("gemm")
        elif r < 0.72:
            gen_compute("alu")
        elif r < 0.9:
            g = rand_2d("acc", None, "out", allow_pad=False, store=True)
            if g:
                sram, dbase, y, x, stride, _, nt = g
                if hw_safe and not out_valid[sram:sram + y * x].all():
                    refresh_out()
            if g:
                b._emit(_Insn("mem", _S, _mem(Opcode.STORE, MemType.OUT, sram, dbase, y, x,
                                              stride),
                              tiles("acc", sram + np.arange(y * x)), dram_reg("out")))
        else:
            m = int(rng.integers(0, 3))
            nop = _nop(m)
            if m != _S and rng.random() < 0.5:   # padding on a NOP is ignored
                nop.fields["y_pad_0"] = int(rng.integers(0, 16))
            b._emit(nop)
    b._emit(_Insn("finish", _C, {}), everything=True)
    insns = encode_program([i.record() for i in b.insns], cfg)
    return insns, dram
