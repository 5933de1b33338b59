"""Bit-exact encoding and decoding of instructions and micro-ops for any valid configuration.

Single records go through :func:`encode` / :func:`decode`; whole streams through
:func:`decode_stream` / :func:`encode_stream`, which work column-wise with numpy on an
:class:`InsnArray` (a table with one integer column per field).
"""

from __future__ import annotations

import numpy as np

from .config import INSN_BYTES, AluOp, ConfigError, MemType, Opcode, VTAConfig
from .errors import IsaError
from .insn import DEP_FLAGS, AluInsn, FinishInsn, GemmInsn, Insn, MemInsn, Uop

__all__ = ["IsaError", "EncodeError", "DecodeError", "encode", "decode", "encode_uop",
           "decode_uop", "encode_uops", "decode_uops", "InsnArray", "decode_stream",
           "encode_stream", "encode_program", "decode_program", "COLUMNS", "default_config"]

_DEFAULT: VTAConfig | None = None


def default_config() -> VTAConfig:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = VTAConfig()
    return _DEFAULT


class EncodeError(IsaError):
    """A field value does not fit its bit field."""


class DecodeError(IsaError):
    """Bytes that are not a valid instruction or stream.  ``index`` is the instruction index."""

    def __init__(self, message: str, index: int | None = None, field: str | None = None):
        self.index, self.field = index, field
        where = f"instruction {index}: " if index is not None else ""
        super().__init__(where + message)


def _layout_for(opcode: int, cfg: VTAConfig):
    if opcode in (Opcode.LOAD, Opcode.STORE):
        return cfg.mem_layout
    if opcode == Opcode.ALU:
        return cfg.alu_layout
    return cfg.gemm_layout  # GEMM and FINISH (FINISH uses the GEMM layout, all zero)


# ----------------------------------------------------------------------------- single records

def _field_values(insn: Insn) -> dict:
    vals = insn.as_dict()
    if isinstance(insn, AluInsn):
        imm = vals["imm"]
        if not -(1 << 15) <= imm < (1 << 15):
            raise EncodeError(f"ALU imm {imm} is outside the signed 16-bit range")
        vals["imm"] = imm & 0xFFFF
    if isinstance(insn, FinishInsn):
        return {k: vals[k] for k in DEP_FLAGS} | {"opcode": Opcode.FINISH}
    vals["opcode"] = insn.opcode
    return vals


def encode(insn: Insn, config: VTAConfig | None = None) -> bytes:
    """Pack one instruction into its 16 little-endian bytes (reserved bits zero)."""
    cfg = config or default_config()
    layout = _layout_for(insn.opcode, cfg)
    vals = _field_values(insn)
    word = 0
    for name, lsb, width in layout.fields:
        v = vals.get(name, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            raise EncodeError(f"{type(insn).__name__}.{name} must be an integer, not {v!r}")
        if not 0 <= v < (1 << width):
            raise EncodeError(f"{type(insn).__name__}.{name} = {v} does not fit in {width} bits")
        word |= int(v) << lsb
    return word.to_bytes(INSN_BYTES, "little")


def _get(word: int, layout, name: str) -> int:
    lsb, width = layout[name]
    return (word >> lsb) & ((1 << width) - 1)


def decode(data: bytes, config: VTAConfig | None = None, index: int | None = None) -> Insn:
    """Unpack 16 bytes into an instruction record.  Reserved bits are ignored."""
    cfg = config or default_config()
    if len(data) != INSN_BYTES:
        raise DecodeError(f"an instruction is {INSN_BYTES} bytes, got {len(data)}", index)
    word = int.from_bytes(data, "little")
    op = word & 7
    flags = {f: (word >> (3 + k)) & 1 for k, f in enumerate(DEP_FLAGS)}
    if op in (Opcode.LOAD, Opcode.STORE):
        lay = cfg.mem_layout
        mt = _get(word, lay, "memory_type")
        try:
            mt = MemType(mt)
        except ValueError:
            raise DecodeError(f"unknown memory_type {mt}", index, "memory_type") from None
        kw = {n: _get(word, lay, n) for n in lay.names()[6:]}
        return MemInsn(Opcode(op), mt, **kw, **flags)
    if op == Opcode.GEMM:
        lay = cfg.gemm_layout
        kw = {n: _get(word, lay, n) for n in lay.names()[5:]}
        return GemmInsn(**kw, **flags)
    if op == Opcode.ALU:
        lay = cfg.alu_layout
        kw = {n: _get(word, lay, n) for n in lay.names()[5:]}
        try:
            kw["alu_opcode"] = AluOp(kw["alu_opcode"])
        except ValueError:
            raise DecodeError(f"unknown alu_opcode {kw['alu_opcode']}", index,
                              "alu_opcode") from None
        if kw["imm"] & 0x8000:
            kw["imm"] -= 1 << 16
        return AluInsn(**kw, **flags)
    if op == Opcode.FINISH:
        return FinishInsn(**flags)
    raise DecodeError(f"unknown opcode {op}", index, "opcode")


def encode_uop(uop: Uop, config: VTAConfig | None = None) -> int:
    """Pack a micro-op into its 32-bit integer value."""
    cfg = config or default_config()
    word = 0
    for name, lsb, width in cfg.uop_layout.fields:
        v = getattr(uop, name)
        if not 0 <= v < (1 << width):
            raise EncodeError(f"Uop.{name} = {v} does not fit in {width} bits")
        word |= v << lsb
    return word


def decode_uop(word: int, config: VTAConfig | None = None) -> Uop:
    cfg = config or default_config()
    return Uop(*((word >> lsb) & ((1 << w) - 1) for _, lsb, w in cfg.uop_layout.fields))


def decode_uops(data, config: VTAConfig | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised: bytes or a uint32 array -> (dst, src, wgt) int64 arrays."""
    cfg = config or default_config()
    if isinstance(data, (bytes, bytearray, memoryview)):
        if len(data) % 4:
            raise DecodeError(f"a micro-op stream must be a multiple of 4 bytes, got {len(data)}")
        data = np.frombuffer(data, dtype="<u4")
    w = np.asarray(data, dtype=np.int64)
    return tuple((w >> lsb) & ((1 << width) - 1) for _, lsb, width in cfg.uop_layout.fields)


def encode_uops(dst, src, wgt, config: VTAConfig | None = None) -> np.ndarray:
    """Vectorised inverse of :func:`decode_uops`; returns a little-endian uint32 array."""
    cfg = config or default_config()
    out = np.zeros(np.broadcast(dst, src, wgt).shape, dtype=np.int64)
    for (name, lsb, width), v in zip(cfg.uop_layout.fields, (dst, src, wgt)):
        v = np.asarray(v, dtype=np.int64)
        if v.size and (v.min() < 0 or v.max() >= (1 << width)):
            raise EncodeError(f"micro-op field {name} does not fit in {width} bits")
        out |= v << lsb
    return out.astype("<u4")


# ------------------------------------------------------------------------------ bulk streams

#: Columns of an :class:`InsnArray`.  A row uses only the columns of its format; others are 0.
COLUMNS = ("opcode", "pop_prev", "pop_next", "push_prev", "push_next", "memory_type",
           "sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1",
           "x_pad_0", "x_pad_1", "reset", "uop_bgn", "uop_end", "iter_out", "iter_in",
           "dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in",
           "wgt_factor_out", "wgt_factor_in", "alu_opcode", "use_imm", "imm")


class InsnArray:
    """A decoded instruction stream as columns of int64 numpy arrays (``arr.x_size[i]``).

    ``imm`` is sign-extended.  Index with an int to get a record, with a slice or mask to get
    a smaller table.
    """

    __slots__ = ("cols", "config")

    def __init__(self, cols: dict[str, np.ndarray], config: VTAConfig):
        self.cols, self.config = cols, config

    def __getattr__(self, name):
        try:
            return self.cols[name]
        except KeyError:
            raise AttributeError(name) from None

    def __len__(self):
        return len(self.cols["opcode"])

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.record(int(key))
        return InsnArray({k: v[key] for k, v in self.cols.items()}, self.config)

    def record(self, i: int) -> Insn:
        return decode(encode_stream(self[i:i + 1]), self.config, index=i)

    def records(self) -> list[Insn]:
        data = encode_stream(self)
        return [decode(data[16 * i:16 * i + 16], self.config, index=i) for i in range(len(self))]

    @classmethod
    def from_records(cls, insns, config: VTAConfig | None = None) -> "InsnArray":
        cfg = config or default_config()
        return decode_stream(b"".join(encode(i, cfg) for i in insns), cfg)


def _format_groups(op: np.ndarray, cfg: VTAConfig):
    """(row mask, fields) per instruction format present in ``op``; FINISH has only the common
    fields (opcode and flags)."""
    for mask, fields in (((op == Opcode.LOAD) | (op == Opcode.STORE), cfg.mem_layout.fields),
                         (op == Opcode.GEMM, cfg.gemm_layout.fields),
                         (op == Opcode.ALU, cfg.alu_layout.fields),
                         (op == Opcode.FINISH, cfg.gemm_layout.fields[:5])):
        if mask.any():
            yield mask, fields


def decode_stream(data, config: VTAConfig | None = None, strict: bool = True) -> InsnArray:
    """Decode a whole instruction stream (bytes or uint8 array) column-wise.

    With ``strict`` an unknown opcode, memory type or ALU opcode raises :class:`DecodeError`
    naming the first offending instruction.
    """
    cfg = config or default_config()
    if isinstance(data, np.ndarray):
        data = data.astype(np.uint8, copy=False).tobytes()
    n, rem = divmod(len(data), INSN_BYTES)
    if rem:
        raise DecodeError(f"the stream is {len(data)} bytes, not a multiple of {INSN_BYTES} "
                          f"(the last instruction is truncated)", n)
    words = np.frombuffer(data, dtype="<u8").reshape(n, 2).astype(np.uint64)
    w = (words[:, 0], words[:, 1])
    op = (w[0] & np.uint64(7)).astype(np.int64)
    cols = {c: np.zeros(n, dtype=np.int64) for c in COLUMNS}
    cols["opcode"] = op
    for mask, fields in _format_groups(op, cfg):
        for name, lsb, width in fields[1:]:
            word, shift = divmod(lsb, 64)
            v = ((w[word] >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)
            cols[name] = np.where(mask, v, cols[name])
    cols["imm"] = np.where(cols["imm"] >= 1 << 15, cols["imm"] - (1 << 16), cols["imm"])
    if strict and n:
        bad = np.flatnonzero(op > Opcode.ALU)
        if bad.size:
            i = int(bad[0])
            raise DecodeError(f"unknown opcode {int(op[i])}", i, "opcode")
        mem = (op == Opcode.LOAD) | (op == Opcode.STORE)
        bad = np.flatnonzero(mem & (cols["memory_type"] > MemType.ACC_8BIT))
        if bad.size:
            i = int(bad[0])
            raise DecodeError(f"unknown memory_type {int(cols['memory_type'][i])}", i,
                              "memory_type")
        bad = np.flatnonzero((op == Opcode.ALU) & (cols["alu_opcode"] > AluOp.MUL))
        if bad.size:
            i = int(bad[0])
            raise DecodeError(f"unknown alu_opcode {int(cols['alu_opcode'][i])}", i,
                              "alu_opcode")
    return InsnArray(cols, cfg)


def encode_stream(arr: InsnArray) -> bytes:
    """Vectorised inverse of :func:`decode_stream`."""
    cfg = arr.config
    n = len(arr)
    w = [np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)]
    op = arr.cols["opcode"]
    for mask, fields in _format_groups(op, cfg):
        for name, lsb, width in fields:
            v = arr.cols[name][mask]
            if name == "imm":
                if v.size and (v.min() < -(1 << 15) or v.max() >= 1 << 15):
                    raise EncodeError("ALU imm outside the signed 16-bit range")
                v = v & 0xFFFF
            elif v.size and (v.min() < 0 or v.max() >= 1 << width):
                i = int(np.flatnonzero(mask)[np.flatnonzero((v < 0) | (v >= 1 << width))[0]])
                raise EncodeError(f"instruction {i}: {name} = {int(arr.cols[name][i])} does not "
                                  f"fit in {width} bits")
            word, shift = divmod(lsb, 64)
            w[word][mask] |= v.astype(np.uint64) << np.uint64(shift)
    out = np.empty((n, 2), dtype="<u8")
    out[:, 0], out[:, 1] = w
    return out.tobytes()


def encode_program(insns, config: VTAConfig | None = None) -> bytes:
    """Encode a sequence of records into one instruction stream."""
    cfg = config or default_config()
    return b"".join(encode(i, cfg) for i in insns)


def decode_program(data: bytes, config: VTAConfig | None = None) -> list[Insn]:
    """Decode a whole stream into records (checks every instruction)."""
    cfg = config or default_config()
    decode_stream(data, cfg)  # validates length and opcodes with good messages
    return [decode(data[i:i + INSN_BYTES], cfg, index=i // INSN_BYTES)
            for i in range(0, len(data), INSN_BYTES)]


ConfigError = ConfigError  # re-exported for convenience
