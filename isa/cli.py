"""``vta asm`` and ``vta disasm``."""

from __future__ import annotations

import sys

from .asm import assemble, disassemble
from .config import VTAConfig
from .files import InputFileError, is_npz, read_bytes, read_dram_image, read_text
from .safe_io import check_output_path, write_bytes_atomic, write_text_atomic


def _config(args) -> VTAConfig:
    return VTAConfig.from_json(args.config) if args.config else VTAConfig()


def _stream(path: str) -> bytes:
    data = read_bytes(path, "instruction stream")
    if is_npz(data):
        raise InputFileError(
            f"{path} is a golden-vector .npz (a zip of insns, dram_in, dram_out), not an "
            f"instruction stream: check it with `vta vector {path}`, or extract the stream "
            f"with python -c \"import numpy as np; np.load('{path}')['insns'].tofile('insns.bin')\"")
    if not data:
        raise InputFileError(f"{path}: empty instruction stream (0 bytes): nothing to "
                             f"disassemble (a program is 16-byte instructions ending with FINISH)")
    return data


def _uops(path: str) -> bytes:
    data = read_bytes(path, "micro-op image")
    if not data or len(data) % 4:
        raise InputFileError(f"{path}: a micro-op image is whole 4-byte micro-ops, but it has "
                             f"{len(data)} bytes")
    return data


def cmd_disasm(args):
    cfg = _config(args)
    if args.output:
        check_output_path(args.output, what="disassembly (-o)")
    data = _stream(args.insns)
    uops = _uops(args.uops) if args.uops else None
    dram = read_dram_image(args.dram) if args.dram else None
    text = disassemble(data, cfg, uops=uops, dram=dram, index=not args.no_index)
    if args.output:
        write_text_atomic(args.output, text, what="disassembly (-o)")
    else:
        sys.stdout.write(text)


def cmd_asm(args):
    cfg = _config(args)
    check_output_path(args.output, what="instruction stream (-o)")
    text = read_text(args.source, "VTA assembly text file")
    data = assemble(text, cfg, path=args.source)
    if not data:
        raise InputFileError(f"{args.source}: no instructions (only blank lines and comments); "
                             f"a program ends with FINISH")
    write_bytes_atomic(args.output, data, what="instruction stream (-o)")
    print(f"{args.output}: {len(data) // 16} instructions")


def register(sub):
    p = sub.add_parser("disasm", help="print an instruction stream as text, one line each")
    p.add_argument("insns", help="instruction stream (16 bytes per instruction)")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.add_argument("--uops", help="uop buffer image (uint32 per SRAM index) to list the uops")
    p.add_argument("--dram", help="DRAM image: list the uops the stream's LOAD UOPs bring in")
    p.add_argument("--no-index", action="store_true", help="omit the '# N' index comments")
    p.add_argument("-o", "--output", help="write to a file instead of stdout")
    p.set_defaults(func=cmd_disasm)
    p = sub.add_parser("asm", help="assemble text into an instruction stream")
    p.add_argument("source", help="assembly text (the format vta disasm prints)")
    p.add_argument("-o", "--output", required=True, help="output instruction stream")
    p.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    p.set_defaults(func=cmd_asm)
