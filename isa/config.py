"""VTA hardware configuration: the one source of every width, depth and opcode.

``VTAConfig`` holds the keys of the reference ``vta_config.json`` (spec §1.1) and derives every
constant of spec §1.2-1.3 from them.  It also computes the bit layout of the instruction and
micro-op formats for *this* configuration (spec §2.1 packing rule), and refuses configurations
whose fields do not fit in a 128-bit instruction or a 32-bit micro-op (spec §1.4).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import warnings
from dataclasses import dataclass
from functools import cached_property

__all__ = [
    "ConfigError", "Opcode", "MemType", "AluOp", "Stage", "VTAConfig", "FieldLayout",
    "INSN_BYTES", "UOP_BYTES", "ITER_BITS", "IMM_BITS",
]

INSN_BYTES = 16
UOP_BYTES = 4
ITER_BITS = 14
IMM_BITS = 16
SRAM_BITS = 16
DRAM_BITS = 32
SIZE_BITS = 16
PAD_BITS = 4


class ConfigDefaultsWarning(UserWarning):
    """A configuration file leaves keys unset; the warning names them and their defaults."""


class ConfigError(ValueError):
    """A configuration that is nonsense or cannot be encoded (spec §1.4).

    ``reason`` is the same fault as a sentence without the offending value ("LOG_BLOCK is
    outside 1 to 6"), for tools that count rejections over many points (DSE)."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message


class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(enum.IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5


class AluOp(enum.IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


class Stage(enum.IntEnum):
    """Pipeline stages as numbered by the compiler and runtime (spec §1.3)."""
    LOAD = 1
    COMPUTE = 2
    STORE = 3


@dataclass(frozen=True)
class FieldLayout:
    """Bit positions of one instruction format: ``name -> (lsb, width)`` over 128 bits."""
    fields: tuple[tuple[str, int, int], ...]

    def __getitem__(self, name: str) -> tuple[int, int]:
        for n, lsb, width in self.fields:
            if n == name:
                return lsb, width
        raise KeyError(name)

    def names(self) -> list[str]:
        return [n for n, _, _ in self.fields]

    def word_field(self, name: str) -> tuple[int, int, int]:
        """(64-bit word, shift within it, mask of its width) of field ``name``."""
        lsb, width = self[name]
        return lsb // 64, lsb % 64, (1 << width) - 1

    @staticmethod
    def pack(spec: list[tuple[str, int]], total_bits: int, what: str) -> "FieldLayout":
        """Place fields LSB-first in 64-bit words; a field that would straddle a word
        boundary starts at the next word (the C bitfield rule of spec §2.1)."""
        pos = 0
        out = []
        for name, width in spec:
            if width > 64:
                raise ConfigError(f"{what}: field {name!r} is {width} bits wide, more than 64")
            if pos // 64 != (pos + width - 1) // 64:
                pos = (pos // 64 + 1) * 64
            out.append((name, pos, width))
            pos += width
        if pos > total_bits:
            raise ConfigError(
                f"{what} needs {pos} bits with this configuration but has {total_bits}; "
                f"reduce the buffer sizes (spec §1.4)")
        return FieldLayout(tuple(out))


def _log2_exact(value: int, what: str) -> int:
    if value <= 0 or value & (value - 1):
        raise ConfigError(f"{what} must be a positive power of two, not {value}")
    return value.bit_length() - 1


_KEYS = ("TARGET", "HW_VER", "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH",
         "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
         "LOG_ACC_BUFF_SIZE")
_OPTIONAL_KEYS = ("LOG_BUS_WIDTH", "ACC_DEP_DISTANCE")


@dataclass(frozen=True)
class VTAConfig:
    """A VTA configuration.  Field names are the keys of ``vta_config.json``.

    Defaults are the reference default (1x16x16, int8/int8/int32, LOG buffer sizes
    15/15/18/17).  ``LOG_BUS_WIDTH`` (memory bus, 6 = 64 bits, as pkg_config derives for
    sim/pynq) and ``ACC_DEP_DISTANCE`` (the runtime's destination-hazard distance, 2 in the
    reference, apache/tvm#5471) are optional extra keys.

    Raises
    ------
    ConfigError
        if a value is out of range or the ISA cannot encode the configuration.
    """

    TARGET: str = "sim"
    HW_VER: str = "0.0.2"
    LOG_INP_WIDTH: int = 3
    LOG_WGT_WIDTH: int = 3
    LOG_ACC_WIDTH: int = 5
    LOG_BATCH: int = 0
    LOG_BLOCK: int = 4
    LOG_UOP_BUFF_SIZE: int = 15
    LOG_INP_BUFF_SIZE: int = 15
    LOG_WGT_BUFF_SIZE: int = 18
    LOG_ACC_BUFF_SIZE: int = 17
    LOG_BUS_WIDTH: int = 6
    ACC_DEP_DISTANCE: int = 2

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "int" or f.type is int:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise ConfigError(f"{f.name} must be an integer, not {v!r}")
            elif not isinstance(v, str):
                raise ConfigError(f"{f.name} must be a string, not {v!r}")

        def rng(name, lo, hi, why=""):
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ConfigError(f"{name} is {v}, but it must be between {lo} and {hi}{why}",
                                  reason=f"{name} is outside {lo} to {hi}{why}")

        rng("LOG_INP_WIDTH", 3, 4, " (8- or 16-bit inputs; sub-byte elements are not supported)")
        rng("LOG_WGT_WIDTH", 3, 4, " (8- or 16-bit weights; sub-byte elements are not supported)")
        rng("LOG_ACC_WIDTH", 4, 5, " (16- or 32-bit accumulators)")
        if self.LOG_ACC_WIDTH < max(self.LOG_INP_WIDTH, self.LOG_WGT_WIDTH):
            raise ConfigError("LOG_ACC_WIDTH must be at least LOG_INP_WIDTH and LOG_WGT_WIDTH")
        rng("LOG_BATCH", 0, 4)
        rng("LOG_BLOCK", 1, 6)
        rng("LOG_BUS_WIDTH", 3, 9, " (8- to 512-bit memory bus)")
        rng("ACC_DEP_DISTANCE", 0, 16)
        for name in ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
                     "LOG_ACC_BUFF_SIZE"):
            rng(name, 2, 30)
        for mem, tile in (("UOP", 4), ("INP", self.inp_elem_bytes), ("WGT", self.wgt_elem_bytes),
                          ("ACC", self.acc_elem_bytes)):
            size = 1 << getattr(self, f"LOG_{mem}_BUFF_SIZE")
            if tile > 4096:
                raise ConfigError(f"a {mem} tile is {tile} bytes; VTA requires tiles of at most "
                                  f"4096 bytes (VTA_PAGE_BYTES)")
            if size < tile:
                raise ConfigError(f"LOG_{mem}_BUFF_SIZE={getattr(self, f'LOG_{mem}_BUFF_SIZE')} "
                                  f"gives {size} bytes, less than one {tile}-byte {mem} tile")
            if size // tile > 1 << SRAM_BITS:
                raise ConfigError(f"the {mem} buffer has {size // tile} entries; the 16-bit "
                                  f"sram_base field addresses at most 65536")
        # Force the layouts now, so a configuration that cannot be encoded fails at once.
        self.gemm_layout, self.alu_layout, self.mem_layout, self.uop_layout  # noqa: B018

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_dict(cls, d: dict, where: str = "configuration") -> "VTAConfig":
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: expected a JSON object, not {type(d).__name__}")
        known = set(_KEYS) | set(_OPTIONAL_KEYS)
        # LOG_BLOCK_IN/OUT, LOG_OUT_* etc. are derived; tolerate them when consistent.
        kwargs = {}
        for k, v in d.items():
            if k in known:
                kwargs[k] = v
            elif k in ("LOG_BLOCK_IN", "LOG_BLOCK_OUT"):
                if d.get("LOG_BLOCK", v) != v:
                    raise ConfigError(f"{where}: {k}={v} differs from LOG_BLOCK; VTA requires "
                                      f"BLOCK_IN == BLOCK_OUT")
                kwargs.setdefault("LOG_BLOCK", v)
            else:
                raise ConfigError(f"{where}: unknown key {k!r}")
        try:
            return cls(**kwargs)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}", reason=e.reason) from None

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "VTAConfig":
        """The configuration in a ``vta_config.json``.  Keys the file does not set take
        their defaults, and a :class:`ConfigDefaultsWarning` names them (a file that sets
        nothing, ``{}``, would otherwise silently mean the default configuration)."""
        from .files import InputFileError, read_json
        try:
            d = read_json(path, "VTA configuration (JSON)")
        except InputFileError as e:
            raise ConfigError(str(e)) from None
        cfg = cls.from_dict(d, where=str(path))
        given = set(d) | ({"LOG_BLOCK"} if {"LOG_BLOCK_IN", "LOG_BLOCK_OUT"} & set(d) else set())
        missing = [k for k in _KEYS if k not in given]
        if missing:
            warnings.warn(ConfigDefaultsWarning(
                f"{path} does not set {', '.join(missing)}; using the defaults "
                f"({', '.join(f'{k}={getattr(cfg, k)}' for k in missing)})"), stacklevel=2)
        return cfg

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            from .safe_io import write_text_atomic
            write_text_atomic(path, text, what="configuration")
        return text

    def replace(self, **kw) -> "VTAConfig":
        return dataclasses.replace(self, **kw)

    # ------------------------------------------------------------- derived
    inp_width = property(lambda s: 1 << s.LOG_INP_WIDTH)
    wgt_width = property(lambda s: 1 << s.LOG_WGT_WIDTH)
    acc_width = property(lambda s: 1 << s.LOG_ACC_WIDTH)
    out_width = property(lambda s: 1 << s.LOG_INP_WIDTH)
    batch = property(lambda s: 1 << s.LOG_BATCH)
    block_in = property(lambda s: 1 << s.LOG_BLOCK)
    block_out = property(lambda s: 1 << s.LOG_BLOCK)
    bus_width = property(lambda s: 1 << s.LOG_BUS_WIDTH)
    bus_bytes = property(lambda s: (1 << s.LOG_BUS_WIDTH) // 8)
    inp_elem_bytes = property(lambda s: s.batch * s.block_in * s.inp_width // 8)
    wgt_elem_bytes = property(lambda s: s.block_out * s.block_in * s.wgt_width // 8)
    acc_elem_bytes = property(lambda s: s.batch * s.block_out * s.acc_width // 8)
    out_elem_bytes = property(lambda s: s.batch * s.block_out * s.out_width // 8)
    uop_buff_depth = property(lambda s: (1 << s.LOG_UOP_BUFF_SIZE) // UOP_BYTES)
    inp_buff_depth = property(lambda s: (1 << s.LOG_INP_BUFF_SIZE) // s.inp_elem_bytes)
    wgt_buff_depth = property(lambda s: (1 << s.LOG_WGT_BUFF_SIZE) // s.wgt_elem_bytes)
    acc_buff_depth = property(lambda s: (1 << s.LOG_ACC_BUFF_SIZE) // s.acc_elem_bytes)
    out_buff_depth = acc_buff_depth
    log_uop_buff_depth = property(lambda s: _log2_exact(s.uop_buff_depth, "UOP depth"))
    log_inp_buff_depth = property(lambda s: _log2_exact(s.inp_buff_depth, "INP depth"))
    log_wgt_buff_depth = property(lambda s: _log2_exact(s.wgt_buff_depth, "WGT depth"))
    log_acc_buff_depth = property(lambda s: _log2_exact(s.acc_buff_depth, "ACC depth"))
    macs_per_uop = property(lambda s: s.batch * s.block_in * s.block_out)

    @property
    def log_index_bits(self) -> tuple[int, int, int, int]:
        """Field widths U, A, I, W of spec §1.4 (uop, acc, inp, wgt SRAM index bits)."""
        # A depth of 1 still needs a (zero-valued) field of at least 1 bit.
        return (max(1, self.log_uop_buff_depth), max(1, self.log_acc_buff_depth),
                max(1, self.log_inp_buff_depth), max(1, self.log_wgt_buff_depth))

    def elem_bytes(self, mem_type: int) -> int:
        """DRAM bytes per ``dram_base`` / ``x_stride`` unit for a memory type (spec §3.4)."""
        mt = MemType(mem_type)
        return {MemType.UOP: UOP_BYTES, MemType.WGT: self.wgt_elem_bytes,
                MemType.INP: self.inp_elem_bytes, MemType.ACC: self.acc_elem_bytes,
                MemType.OUT: self.out_elem_bytes,
                MemType.ACC_8BIT: self.batch * self.block_out}[mt]

    def sram_depth(self, mem_type: int) -> int:
        mt = MemType(mem_type)
        return {MemType.UOP: self.uop_buff_depth, MemType.WGT: self.wgt_buff_depth,
                MemType.INP: self.inp_buff_depth, MemType.ACC: self.acc_buff_depth,
                MemType.OUT: self.acc_buff_depth, MemType.ACC_8BIT: self.acc_buff_depth}[mt]

    @property
    def bitstream(self) -> str:
        return (f"{self.batch}x{self.block_in}_i{self.inp_width}w{self.wgt_width}"
                f"a{self.acc_width}_{self.LOG_UOP_BUFF_SIZE}_{self.LOG_INP_BUFF_SIZE}_"
                f"{self.LOG_WGT_BUFF_SIZE}_{self.LOG_ACC_BUFF_SIZE}")

    @property
    def model(self) -> str:
        return f"{self.TARGET}_{self.bitstream}"

    # -------------------------------------------------------------- layouts
    _COMMON = [("opcode", 3), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1),
               ("push_next", 1)]

    @cached_property
    def mem_layout(self) -> FieldLayout:
        return FieldLayout.pack(self._COMMON + [
            ("memory_type", 3), ("sram_base", SRAM_BITS), ("dram_base", DRAM_BITS),
            ("y_size", SIZE_BITS), ("x_size", SIZE_BITS), ("x_stride", SIZE_BITS),
            ("y_pad_0", PAD_BITS), ("y_pad_1", PAD_BITS), ("x_pad_0", PAD_BITS),
            ("x_pad_1", PAD_BITS)], 128, "the LOAD/STORE instruction")

    def _compute_word0(self):
        u = self.log_index_bits[0]
        return self._COMMON + [("reset", 1), ("uop_bgn", u), ("uop_end", u + 1),
                               ("iter_out", ITER_BITS), ("iter_in", ITER_BITS)]

    @cached_property
    def gemm_layout(self) -> FieldLayout:
        _, a, i, w = self.log_index_bits
        return FieldLayout.pack(self._compute_word0() + [
            ("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", i),
            ("src_factor_in", i), ("wgt_factor_out", w), ("wgt_factor_in", w)],
            128, "the GEMM instruction")

    @cached_property
    def alu_layout(self) -> FieldLayout:
        _, a, _, _ = self.log_index_bits
        return FieldLayout.pack(self._compute_word0() + [
            ("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", a),
            ("src_factor_in", a), ("alu_opcode", 3), ("use_imm", 1), ("imm", IMM_BITS)],
            128, "the ALU instruction")

    @cached_property
    def uop_layout(self) -> FieldLayout:
        _, a, i, w = self.log_index_bits
        return FieldLayout.pack([("dst", a), ("src", max(a, i)), ("wgt", w)], 32, "the micro-op")

    @property
    def acc_dtype(self) -> str:
        return f"int{self.acc_width}"

    @property
    def inp_dtype(self) -> str:
        return f"int{self.inp_width}"

    @property
    def wgt_dtype(self) -> str:
        return f"int{self.wgt_width}"

    @property
    def out_dtype(self) -> str:
        return f"int{self.out_width}"
