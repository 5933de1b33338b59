"""Micro-op kernels: recording (``uop_loop_begin`` / ``uop_push`` / ``uop_loop_end``), the
reference invariants, and the per-call-site cache handle (spec §4.6).

A kernel is recorded once per (call site, signature) by running the generated ``finit``
function, then reused.  Recording enforces, with :class:`~vta_runtime.errors.KernelError`:

* at most two loops, all declared before the first uop; loop ends balance loop begins;
* one mode per kernel (0 = GEMM, 1 = ALU) and one ``reset_out``;
* ALU kernels: one ``alu_opcode``, ``use_imm`` and ``imm`` (``imm`` is kept as int16, as the
  reference stores it; like the reference, a kernel with an ``imm`` outside int16 is only
  accepted when it has a single uop, whose instruction carries the wrapped value);
* the destination-hazard check (``VerifyDep``): a uop's dst may not equal the dst of any of the
  previous ``dep_distance`` uops (``VTAConfig.ACC_DEP_DISTANCE``, 2 in the reference);
* every index, extent and factor fits its bit field, extents are >= 1, the kernel is not empty.

Finalising a kernel pre-computes its uop words and an instruction *template row* (the GEMM/ALU
fields of spec §4.6 "loop-to-field mapping"), so pushing a cached kernel costs one list copy.
"""

from __future__ import annotations

import numpy as np

from isa import COLUMNS, AluOp, Opcode, VTAConfig, encode_uops

from .errors import KernelError

__all__ = ["UopKernel", "KernelHandle", "signature_key", "GEMM_MODE", "ALU_MODE"]

GEMM_MODE, ALU_MODE = 0, 1
_COL = {c: i for i, c in enumerate(COLUMNS)}
_MAX_KEY = 100


def signature_key(signature) -> int:
    """The reference ``UopKernelMap`` key: 0 without a signature, else (int32 value + 1) mod 2^32.

    Accepts ``None``, an ``int`` or 4 bytes (a little-endian int).  The key must be below 100,
    so integer signatures range over -1..98 (-1 aliases "no signature", as in the reference).
    """
    if signature is None:
        return 0
    if isinstance(signature, (bytes, bytearray)):
        if len(signature) == 0:
            return 0
        if len(signature) != 4:
            raise KernelError(f"a kernel signature is nothing or one 4-byte int, "
                              f"not {len(signature)} bytes")
        signature = int.from_bytes(signature, "little", signed=True)
    if isinstance(signature, bool) or not isinstance(signature, (int, np.integer)):
        raise KernelError(f"kernel signature must be None or an int, not {signature!r}")
    key = (int(signature) + 1) & 0xFFFFFFFF
    if key >= _MAX_KEY:
        raise KernelError(f"kernel signature {int(signature)} gives cache key {key}; the "
                          f"reference runtime requires keys below {_MAX_KEY} "
                          f"(signatures -1..{_MAX_KEY - 2})")
    return key


_U32 = 1 << 32
_UOP_BITS: dict = {}
#: finished recordings by content (configuration, kernel-wide fields, loops, uops): a kernel
#: recorded again (a fresh handle, another layer with the same micro-kernel) reuses the uop
#: words and the instruction template instead of encoding them again
_FINALIZED: dict = {}
_FINALIZED_UOPS = [0]           # uops held by the keys of _FINALIZED
_FINALIZED_MAX_UOPS = 1 << 18   # oldest first out past this (a few tens of MB)


def _uop_bits(cfg: VTAConfig) -> tuple[int, int, int]:
    bits = _UOP_BITS.get(cfg)
    if bits is None:
        lay = cfg.uop_layout
        bits = _UOP_BITS[cfg] = (lay["dst"][1], lay["src"][1], lay["wgt"][1])
    return bits


def _uint(v, name: str, bits: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise KernelError(f"{what}: {name} must be an integer, not {v!r}")
    v = int(v)
    if not 0 <= v < (1 << bits):
        raise KernelError(f"{what}: {name} = {v} does not fit in {bits} bits")
    return v


class UopKernel:
    """One recorded micro-op kernel.

    Attributes
    ----------
    mode : int or None
        0 = GEMM, 1 = ALU (None until the first uop).
    uops : list of (dst, src, wgt)
    loops : list of (extent, dst_factor, src_factor, wgt_factor)
    reset, alu_opcode, use_imm, imm
        Kernel-wide fields (``imm`` already wrapped to int16).
    words : numpy.ndarray
        ``uint32`` uop words (after :meth:`finalize`).
    template : list of int
        Instruction row in :data:`isa.COLUMNS` order, without uop range and dependency flags.
    """

    __slots__ = ("config", "signature", "dep_distance", "mode", "reset", "alu_opcode",
                 "use_imm", "imm", "uops", "loops", "_depth", "words", "template", "size",
                 "name")

    def __init__(self, config: VTAConfig, signature=None, dep_distance: int | None = None,
                 name: str = "kernel"):
        self.config = config
        self.signature = signature
        self.dep_distance = config.ACC_DEP_DISTANCE if dep_distance is None else dep_distance
        self.mode = self.reset = self.alu_opcode = None
        self.use_imm, self.imm = 0, 0
        self.uops: list[tuple[int, int, int]] = []
        self.loops: list[tuple[int, int, int, int]] = []
        self._depth = 0
        self.words = None
        self.template = None
        self.size = 0
        self.name = name

    def __repr__(self):
        mode = {None: "empty", 0: "GEMM", 1: "ALU"}[self.mode]
        return f"<UopKernel {self.name} {mode} uops={len(self.uops)} loops={len(self.loops)}>"

    # ----------------------------------------------------------------- recording
    def loop_begin(self, extent, dst_factor, src_factor, wgt_factor=0) -> None:
        what = f"{self.name}: uop_loop_begin"
        if self.words is not None:
            raise KernelError(f"{what}: the kernel is already recorded")
        if self.uops:
            raise KernelError(f"{what}: loops must be declared before the first uop "
                              f"({len(self.uops)} uops already pushed)")
        if len(self.loops) >= 2:
            raise KernelError(f"{what}: a kernel has at most 2 loops")
        vals = (extent, dst_factor, src_factor, wgt_factor)
        if not all(type(v) is int and 0 <= v < _U32 for v in vals):
            vals = tuple(_uint(v, n, 32, what) for v, n in
                         ((extent, "extent"), (dst_factor, "dst_factor"),
                          (src_factor, "src_factor"), (wgt_factor, "wgt_factor")))
        if vals[0] < 1:
            raise KernelError(f"{what}: extent must be at least 1, not {vals[0]}")
        self.loops.append(vals)
        self._depth += 1

    def loop_end(self) -> None:
        if self._depth <= 0:
            raise KernelError(f"{self.name}: uop_loop_end without a matching uop_loop_begin")
        self._depth -= 1

    def push(self, mode, reset_out, dst, src, wgt=0, alu_opcode=0, use_imm=0, imm=0) -> None:
        """Append one uop (``VTAUopPush``), checking the kernel invariants."""
        i = len(self.uops)
        what = f"{self.name}: uop {i}"
        if self.words is not None:
            raise KernelError(f"{what}: the kernel is already recorded")
        if mode not in (GEMM_MODE, ALU_MODE):
            raise KernelError(f"{what}: mode must be 0 (GEMM) or 1 (ALU), not {mode!r}")
        if reset_out not in (0, 1):
            raise KernelError(f"{what}: reset_out must be 0 or 1, not {reset_out!r}")
        dbits, sbits, wbits = _uop_bits(self.config)
        if not (type(dst) is int and type(src) is int and type(wgt) is int and
                0 <= dst < 1 << dbits and 0 <= src < 1 << sbits and 0 <= wgt < 1 << wbits):
            dst = _uint(dst, "dst", dbits, what)
            src = _uint(src, "src", sbits, what)
            wgt = _uint(wgt, "wgt", wbits, what)
        d = self.dep_distance
        if d:
            for j in range(max(0, i - d), i):
                if self.uops[j][0] == dst:
                    raise KernelError(
                        f"{what}: dst {dst} was written by uop {j}, only {i - j} uop(s) "
                        f"earlier; the ACC read-after-write distance is {d} "
                        f"(ACC_DEP_DISTANCE, the reference VerifyDep check)")
        if self.mode is None:
            self.mode = int(mode)
        elif self.mode != mode:
            raise KernelError(f"{what}: mode {mode} differs from the kernel's mode {self.mode}; "
                              f"a kernel is all GEMM or all ALU")
        if self.reset is None:
            self.reset = int(reset_out)
        elif self.reset != reset_out:
            raise KernelError(f"{what}: reset_out {reset_out} differs from the kernel's "
                              f"{self.reset}")
        if mode == ALU_MODE:
            try:
                op = AluOp(alu_opcode)
            except ValueError:
                raise KernelError(f"{what}: unknown alu_opcode {alu_opcode!r}") from None
            if use_imm not in (0, 1):
                raise KernelError(f"{what}: use_imm must be 0 or 1, not {use_imm!r}")
            if isinstance(imm, bool) or not isinstance(imm, (int, np.integer)):
                raise KernelError(f"{what}: imm must be an integer, not {imm!r}")
            if not -0x8000 <= int(imm) <= 0x7FFF:
                # the reference stores the low 16 bits silently (40000 -> -25536): refuse
                raise KernelError(f"{what}: imm {int(imm)} does not fit the ALU's 16-bit "
                                  f"immediate [-32768, 32767]")
            imm16 = int(imm)
            if self.alu_opcode is None:
                self.alu_opcode, self.use_imm, self.imm = int(op), int(use_imm), imm16
            elif (self.alu_opcode, self.use_imm) != (int(op), int(use_imm)) or \
                    self.imm != int(imm):
                # the reference compares the stored int16 with the int32 argument, so an imm
                # outside int16 is only accepted on a kernel's first (or only) uop
                extra = "" if imm16 == int(imm) else (
                    f" (imm {int(imm)} does not fit int16: the reference stores {imm16} and "
                    f"rejects the kernel's second uop)")
                raise KernelError(
                    f"{what}: ALU kernels have one opcode/use_imm/imm; got "
                    f"({op.name}, {use_imm}, {int(imm)}) after "
                    f"({AluOp(self.alu_opcode).name}, {self.use_imm}, {self.imm}){extra}")
        self.uops.append((dst, src, wgt))

    # ----------------------------------------------------------------- finalising
    def finalize(self, expected_mode: int | None = None) -> "UopKernel":
        """Validate the finished recording and build :attr:`words` and :attr:`template`."""
        if self.words is not None:
            return self
        if self._depth:
            raise KernelError(f"{self.name}: {self._depth} uop loop(s) not closed with "
                              f"uop_loop_end")
        if not self.uops:
            raise KernelError(f"{self.name}: the kernel recorded no uops")
        if expected_mode is not None and self.mode != expected_mode:
            raise KernelError(f"{self.name}: a {'GEMM' if expected_mode == 0 else 'ALU'} push "
                              f"recorded {'GEMM' if self.mode == 0 else 'ALU'} uops")
        if len(self.uops) > self.config.uop_buff_depth:
            raise KernelError(f"{self.name}: {len(self.uops)} uops exceed the uop buffer "
                              f"({self.config.uop_buff_depth} entries)")
        cfg = self.config
        self.size = len(self.uops)
        key = (cfg, self.mode, self.reset, self.alu_opcode, self.use_imm, self.imm,
               tuple(self.loops), tuple(self.uops))
        hit = _FINALIZED.get(key)
        if hit is not None:         # the same recording seen before: same words and row
            self.words, row = hit
            self.template = list(row)
            return self
        u = np.array(self.uops, dtype=np.int64).reshape(-1, 3)
        self.words = encode_uops(u[:, 0], u[:, 1], u[:, 2], cfg)
        self.words.setflags(write=False)
        row = [0] * len(COLUMNS)
        row[_COL["reset"]] = self.reset
        loops = self.loops
        if self.mode == GEMM_MODE:
            row[_COL["opcode"]] = int(Opcode.GEMM)
            lay = cfg.gemm_layout
            out = loops[0] if loops else (1, 0, 0, 0)
            inn = loops[1] if len(loops) > 1 else (1, 0, 0, 0)
            fields = {"iter_out": out[0], "dst_factor_out": out[1], "src_factor_out": out[2],
                      "wgt_factor_out": out[3], "iter_in": inn[0], "dst_factor_in": inn[1],
                      "src_factor_in": inn[2], "wgt_factor_in": inn[3]}
        else:
            row[_COL["opcode"]] = int(Opcode.ALU)
            lay = cfg.alu_layout
            if len(loops) == 0:
                out, inn = (1, 0, 0, 0), (1, 0, 0, 0)
            elif len(loops) == 1:       # the reference maps a single ALU loop to the INNER slot
                out, inn = (1, 0, 0, 0), loops[0]
            else:
                out, inn = loops[0], loops[1]
            fields = {"iter_out": out[0], "dst_factor_out": out[1], "src_factor_out": out[2],
                      "iter_in": inn[0], "dst_factor_in": inn[1], "src_factor_in": inn[2],
                      "alu_opcode": self.alu_opcode, "use_imm": self.use_imm}
            row[_COL["imm"]] = self.imm
        for name, v in fields.items():
            width = lay[name][1]
            if v >= 1 << width:
                raise KernelError(f"{self.name}: {name} = {v} does not fit the {width}-bit "
                                  f"instruction field")
            row[_COL[name]] = int(v)
        self.template = row
        _FINALIZED[key] = (self.words, tuple(row))
        _FINALIZED_UOPS[0] += self.size
        while _FINALIZED_UOPS[0] > _FINALIZED_MAX_UOPS and len(_FINALIZED) > 1:
            _FINALIZED_UOPS[0] -= len(_FINALIZED.pop(next(iter(_FINALIZED)))[0])
        return self

    # ----------------------------------------------------------------- debug
    def dump(self) -> str:
        """The reference DUMP_UOP text (spec §6.1)."""
        lines = [f"There are {len(self.uops)} uops"]
        lines += [f"[{i:04d}]\t acc={d}, inp={s}, wgt={w}" for i, (d, s, w) in
                  enumerate(self.uops)]
        return "\n".join(lines) + "\n\n"


class KernelHandle:
    """Per-call-site kernel cache: the reference's static ``void*`` uop handle (spec §4.6).

    Create one per GEMM/ALU call site in generated code and pass it to every
    :meth:`CommandQueue.push_gemm_op` / :meth:`~CommandQueue.push_alu_op` of that site.
    Kernels are keyed by :func:`signature_key` and kept forever.
    """

    __slots__ = ("kernels", "name")

    def __init__(self, name: str | None = None):
        self.kernels: dict[int, UopKernel] = {}
        self.name = name

    def __repr__(self):
        return f"<KernelHandle {self.name or hex(id(self))} kernels={len(self.kernels)}>"

    def clear(self) -> None:
        """Forget every recorded kernel (they are re-recorded on the next push)."""
        self.kernels.clear()
