"""Text assembly for VTA instruction streams.

One instruction per line, in the format the reference tooling prints (``describe``)::

    LOAD INP sram=0 dram=2 y=1 x=51 stride=51 pad=(0,0,2,0) dep=0000
    LOAD-NOP(INP) dep[pp pn Pp Pn]=0001
    GEMM RESET uop=[27,29) it=(7,8) dst=(4,2) src=(3,1) wgt=(0,0) dep=0000
    ALU SHR imm=-3 uop=[0,1) it=(1,8) dst=(0,1) src=(0,1) dep=0000
    FINISH dep=0000

``pad`` is (y_pad_0, y_pad_1, x_pad_0, x_pad_1); ``it`` and the factors are (outer, inner);
``dep`` is pop_prev, pop_next, push_prev, push_next.  Fields that the reference format does
not show but an instruction may still carry (a vector ALU op's unused ``imm`` bits, the ALU
``reset`` bit, fields of a NOP) are written as extra ``key=value`` words so that the text
round-trips to the same bytes.  ``#`` starts a comment.
"""

from __future__ import annotations

import re

from .config import AluOp, MemType, Opcode, VTAConfig
from .encoding import DecodeError, IsaError, decode_program, decode_uops, encode_program
from .insn import DEP_FLAGS, AluInsn, FinishInsn, GemmInsn, Insn, MemInsn

__all__ = ["AsmError", "describe", "parse_line", "assemble", "disassemble"]


_MNEMONICS = ("LOAD", "STORE", "GEMM", "ALU", "FINISH")


class AsmError(IsaError):
    """A line of assembly that cannot be parsed.  Carries ``path`` and ``line``."""

    def __init__(self, message: str, path: str = "<text>", line: int | None = None):
        self.path, self.line = path, line
        super().__init__(f"{path}:{line}: {message}" if line is not None else message)


_MEM_EXTRA = ("sram_base", "dram_base", "y_size", "x_stride", "y_pad_0", "y_pad_1", "x_pad_0",
              "x_pad_1")


def describe(insn: Insn, exact: bool = False) -> str:
    """One readable line for an instruction, in the reference tooling's format.

    With ``exact``, bits that format does not show (a vector ALU op's unused ``imm``, the ALU
    ``reset`` bit, NOP fields) are appended as ``key=value`` words, so that :func:`parse_line`
    gives back the same bytes."""
    if isinstance(insn, MemInsn):
        kind = "LOAD" if insn.opcode == Opcode.LOAD else "STORE"
        if insn.x_size == 0:
            text = f"{kind}-NOP({insn.memory_type.name}) dep[pp pn Pp Pn]={insn.deps}"
            extra = [f"{k}={getattr(insn, k)}" for k in _MEM_EXTRA if exact and getattr(insn, k)]
            return " ".join([text] + extra)
        return (f"{kind} {insn.memory_type.name} sram={insn.sram_base} dram={insn.dram_base} "
                f"y={insn.y_size} x={insn.x_size} stride={insn.x_stride} "
                f"pad=({insn.y_pad_0},{insn.y_pad_1},{insn.x_pad_0},{insn.x_pad_1}) "
                f"dep={insn.deps}")
    if isinstance(insn, GemmInsn):
        return (f"GEMM{' RESET' if insn.reset else ''} uop=[{insn.uop_bgn},{insn.uop_end}) "
                f"it=({insn.iter_out},{insn.iter_in}) "
                f"dst=({insn.dst_factor_out},{insn.dst_factor_in}) "
                f"src=({insn.src_factor_out},{insn.src_factor_in}) "
                f"wgt=({insn.wgt_factor_out},{insn.wgt_factor_in}) dep={insn.deps}")
    if isinstance(insn, AluInsn):
        imm = f" imm={insn.imm}" if insn.use_imm else ""
        text = (f"ALU {insn.alu_opcode.name}{imm} uop=[{insn.uop_bgn},{insn.uop_end}) "
                f"it=({insn.iter_out},{insn.iter_in}) "
                f"dst=({insn.dst_factor_out},{insn.dst_factor_in}) "
                f"src=({insn.src_factor_out},{insn.src_factor_in}) dep={insn.deps}")
        if exact and not insn.use_imm and insn.imm:
            text += f" unused_imm={insn.imm}"
        if exact and insn.reset:
            text += " reset=1"
        return text
    if isinstance(insn, FinishInsn):
        return f"FINISH dep={insn.deps}"
    raise TypeError(f"not an instruction: {insn!r}")


_INT = r"-?(?:0x[0-9a-fA-F]+|[0-9]+)"          # ASCII digits only (int() takes others)
_TOKEN = re.compile(r"dep(?:\[pp pn Pp Pn\])?=([01]{4})(?!\w)"
                    r"|(\w+)=(\(|\[)?\s*(" + _INT + r"(?:\s*,\s*" + _INT + r")*)\s*[)\]]?",
                    re.ASCII)


def _ints(text: str) -> list[int]:
    return [int(t, 0) for t in re.split(r"\s*,\s*", text.strip())]


def _unparsed_word(tail: str) -> str | None:
    """The whitespace-delimited word around the first text no token of :data:`_TOKEN`
    covers (``imm=1.5``, not just ``.5``), or None when the tokens cover ``tail``."""
    pos, gaps = 0, []
    for tok in _TOKEN.finditer(tail):
        gaps.append((pos, tok.start()))
        pos = tok.end()
    gaps.append((pos, len(tail)))
    for a, b in gaps:
        i = next((k for k in range(a, b) if not tail[k].isspace()), None)
        if i is not None:
            left = max(tail.rfind(" ", 0, i), tail.rfind("\t", 0, i)) + 1
            right = min((k for k in (tail.find(" ", i), tail.find("\t", i)) if k >= 0),
                        default=len(tail))
            return tail[left:right]
    return None


def parse_line(line: str, path: str = "<text>", lineno: int | None = None) -> Insn | None:
    """Parse one line of assembly; returns None for blank and comment lines."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return None

    def err(msg):
        return AsmError(msg, path, lineno)

    head, _, rest = text.partition(" ")
    if head not in _MNEMONICS and not re.fullmatch(r"(LOAD|STORE)-NOP\(\w+\)", head):
        raise err(f"unknown instruction {head!r} (expected one of {', '.join(_MNEMONICS)})")
    words = {}
    tail = rest
    # the mnemonic may have a second word (memory type, ALU op, RESET)
    m = re.match(r"([A-Z_0-9]+)(?=\s|$)", tail)
    sub = None
    if m and "=" not in m.group(0):
        sub = m.group(1)
        tail = tail[m.end():]
    for tok in _TOKEN.finditer(tail):
        key = "dep" if tok.group(1) is not None else tok.group(2)
        if key in words:
            raise err(f"field {key!r} given twice")
        if key == "dep":
            if tok.group(1) is None:
                raise err(f"dep takes four 0/1 digits, not {tok.group(4)!r}")
            words["dep"] = [int(c) for c in tok.group(1)]
            continue
        try:
            words[key] = _ints(tok.group(4))
        except ValueError:
            raise err(f"bad number in {tok.group(0)!r}") from None
    bad = _unparsed_word(tail)
    if bad is not None:
        raise err(f"cannot parse {bad!r}: fields are key=integer (decimal or 0x hex), "
                  f"pad=(a,b,c,d), uop=[begin,end), dep= four 0/1 digits")
    dep = dict(zip(DEP_FLAGS, words.pop("dep", [0, 0, 0, 0])))

    def take(key, n=1, default=None):
        if key not in words:
            if default is None:
                raise err(f"{head} needs {key}=")
            return default
        v = words.pop(key)
        if len(v) != n:
            raise err(f"{key} takes {n} value(s), got {len(v)}")
        return v if n > 1 else v[0]

    def done(insn):
        if words:
            raise err(f"unexpected field(s) for {head}: {', '.join(sorted(words))}")
        return insn

    nop = re.fullmatch(r"(LOAD|STORE)-NOP\((\w+)\)", head)
    if nop or head in ("LOAD", "STORE"):
        kind, mt_name = (nop.group(1), nop.group(2)) if nop else (head, sub)
        if mt_name is None:
            raise err(f"{kind} needs a memory type")
        mt = MemType[mt_name] if mt_name in MemType.__members__ else None
        if mt is None:
            try:
                mt = MemType(int(mt_name))
            except ValueError:
                raise err(f"unknown memory type {mt_name!r}") from None
        opcode = Opcode.LOAD if kind == "LOAD" else Opcode.STORE
        if nop:
            kw = {k: take(k, 1, 0) for k in _MEM_EXTRA}
            return done(MemInsn(opcode, mt, x_size=0, **kw, **dep))
        pads = take("pad", 4, [0, 0, 0, 0])
        return done(MemInsn(opcode, mt, take("sram"), take("dram"), take("y"), take("x"),
                            take("stride"), *pads, **dep))
    if head == "GEMM":
        if sub not in (None, "RESET"):
            raise err(f"unexpected {sub!r} after GEMM")
        b, e = take("uop", 2)
        it, d, s, w = take("it", 2), take("dst", 2), take("src", 2), take("wgt", 2)
        return done(GemmInsn(b, e, *it, *d, *s, *w, reset=int(sub == "RESET"), **dep))
    if head == "ALU":
        if sub not in AluOp.__members__:
            raise err(f"unknown ALU operation {sub!r}")
        use_imm = "imm" in words
        imm = take("imm", 1, 0) if use_imm else take("unused_imm", 1, 0)
        b, e = take("uop", 2)
        it, d, s = take("it", 2), take("dst", 2), take("src", 2)
        return done(AluInsn(AluOp[sub], b, e, *it, *d, *s, use_imm=int(use_imm), imm=imm,
                            reset=take("reset", 1, 0), **dep))
    if head == "FINISH":
        if sub is not None:
            raise err(f"unexpected {sub!r} after FINISH")
        return done(FinishInsn(**dep))
    raise err(f"unknown instruction {head!r}")


def assemble(text: str, config: VTAConfig | None = None, path: str = "<text>") -> bytes:
    """Assemble a program text into instruction bytes."""
    insns = []
    for n, line in enumerate(text.splitlines(), 1):
        insn = parse_line(line, path, n)
        if insn is not None:
            insns.append((n, insn))
    out = []
    for n, insn in insns:
        try:
            out.append(encode_program([insn], config))
        except IsaError as e:
            raise AsmError(str(e), path, n) from None
    return b"".join(out)


def disassemble(data: bytes, config: VTAConfig | None = None, uops=None,
                dram: bytes | None = None, index: bool = True) -> str:
    """Disassemble a stream, one line per instruction.

    ``uops``: the uop SRAM contents (bytes or uint32 array, indexed by SRAM index), or
    ``dram``: the DRAM image, from which the LOAD UOPs of the stream are followed.  With either,
    every GEMM/ALU line is followed by comment lines listing the micro-ops it runs.
    """
    import numpy as np

    cfg = config or VTAConfig()
    insns = decode_program(data, cfg)
    sram = None
    if uops is not None:
        if isinstance(uops, (bytes, bytearray)) and len(uops) % 4:
            raise DecodeError(f"a micro-op image is whole 4-byte micro-ops, not {len(uops)} "
                              f"bytes")
        sram = np.frombuffer(bytes(uops), "<u4").copy() if isinstance(uops, (bytes, bytearray)) \
            else np.asarray(uops, dtype=np.uint32).copy()
    elif dram is not None:
        sram = np.zeros(cfg.uop_buff_depth, dtype=np.uint32)
    lines = []
    for i, insn in enumerate(insns):
        text = describe(insn, exact=True)
        lines.append((f"{text:<100s} # {i}" if index else text).rstrip())
        if dram is not None and isinstance(insn, MemInsn) and insn.opcode == Opcode.LOAD \
                and insn.memory_type == MemType.UOP and insn.x_size:
            d = np.frombuffer(dram, dtype=np.uint8)
            row = insn.x_pad_0 + insn.x_size + insn.x_pad_1
            # only the rows and columns that land inside the uop SRAM (a huge LOAD is bounded)
            rows = min(insn.y_pad_0 + insn.y_size + insn.y_pad_1,
                       max(0, -(-(len(sram) - insn.sram_base) // row)))
            for y in range(rows):
                for x in range(min(row, max(0, len(sram) - insn.sram_base - y * row))):
                    idx = insn.sram_base + y * row + x
                    ry, rx = y - insn.y_pad_0, x - insn.x_pad_0
                    val = 0
                    if 0 <= ry < insn.y_size and 0 <= rx < insn.x_size:
                        a = 4 * (insn.dram_base + ry * insn.x_stride + rx)
                        val = int.from_bytes(d[a:a + 4].tobytes(), "little") if a + 4 <= len(d) \
                            else 0
                    if idx < len(sram):
                        sram[idx] = val
        if sram is not None and isinstance(insn, (GemmInsn, AluInsn)):
            hi = min(insn.uop_end, len(sram))
            dst, src, wgt = decode_uops(sram[insn.uop_bgn:hi], cfg)
            for k in range(len(dst)):
                extra = f" wgt={wgt[k]}" if isinstance(insn, GemmInsn) else ""
                lines.append(f"    # uop[{insn.uop_bgn + k}] dst={dst[k]} src={src[k]}{extra}")
    return "\n".join(lines) + "\n"
