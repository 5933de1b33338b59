"""The VTA instruction set: configuration, instructions, micro-ops, encoding and assembly.

Everything else in the stack imports from here; this package imports nothing of the stack.

- :mod:`isa.config`: :class:`VTAConfig` (``vta_config.json``), derived constants, bit layouts.
- :mod:`isa.insn`: immutable instruction and micro-op records.
- :mod:`isa.encoding`: bit-exact encode/decode, single and bulk (numpy).
- :mod:`isa.asm`: the text assembly language (``vta asm`` / ``vta disasm``).
- :mod:`isa.safe_io`, :mod:`isa.safe_archive`: atomic writes, bounded reads, no symlink
  escapes, bounded JSON, zip members and ``.npz`` (used by every package).
"""

from .asm import AsmError, assemble, describe, disassemble, parse_line
from .config import (INSN_BYTES, UOP_BYTES, AluOp, ConfigDefaultsWarning, ConfigError, MemType,
                     Opcode, Stage, VTAConfig)
from .encoding import (COLUMNS, DecodeError, EncodeError, InsnArray, IsaError, decode,
                       decode_program, decode_stream, decode_uop, decode_uops, default_config,
                       encode, encode_program, encode_stream, encode_uop, encode_uops)
from .files import InputFileError, is_npz, read_bytes, read_dram_image, read_json, read_text
from .safe_archive import inspect_npz, load_npz, open_zip, read_zip_member
from .safe_io import (FileTooLargeError, NotRegularFileError, OutputPathError, UnsafePathError,
                      atomic_path, atomic_write, check_output_path, expect_json, load_json,
                      open_in_folder, open_regular, parse_json, read_bytes_capped,
                      read_folder_file,
                      write_bytes_atomic, write_json_atomic, write_text_atomic)
from .insn import DEP_FLAGS, AluInsn, FinishInsn, GemmInsn, Insn, MemInsn, Uop, insn_stage

__all__ = [
    # config
    "VTAConfig", "ConfigError", "ConfigDefaultsWarning", "Opcode", "MemType", "AluOp", "Stage", "INSN_BYTES", "UOP_BYTES",
    # records
    "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Insn", "Uop", "insn_stage", "DEP_FLAGS",
    # encoding
    "IsaError", "EncodeError", "DecodeError", "encode", "decode", "encode_program",
    "decode_program", "encode_uop", "decode_uop", "encode_uops", "decode_uops", "InsnArray",
    "decode_stream", "encode_stream", "COLUMNS", "default_config",
    # user files
    "InputFileError", "is_npz", "read_bytes", "read_dram_image", "read_text", "read_json",
    # safe I/O
    "FileTooLargeError", "NotRegularFileError", "OutputPathError", "UnsafePathError",
    "atomic_path", "atomic_write", "check_output_path", "expect_json", "load_json",
    "open_in_folder", "open_regular", "parse_json", "read_bytes_capped", "read_folder_file",
    "write_bytes_atomic",
    "write_json_atomic", "write_text_atomic", "inspect_npz", "load_npz", "open_zip",
    "read_zip_member",
    # assembly
    "AsmError", "describe", "parse_line", "assemble", "disassemble",
]
