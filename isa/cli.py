"""``vta asm`` and ``vta disasm``."""

from __future__ import annotations

import sys

from .asm import assemble, disassemble
from .config import VTAConfig
from .files import InputFileError, is_npz, read_bytes, read_dram_image, read_text


def _config(args) -> VTAConfig:
    return VTAConfig.from_json(args.config) if args.config else VTAConfig()


def _stream(path: str) -> bytes:
    data = read_bytes(path, "instruction stream")
    if is_npz(data):
        raise InputFileError(
            f"{path} is a golden-vector .npz (a zip of insns, dram_in, dram_out), not an "
            f"instruction stream: check it with `vta vector {path}`, or extract the stream "
            f"with python -c \"import numpy as np; np.load('{path}')['insns'].tofile('insns.bin')\"")
    return data


def cmd_disasm(args):
    cfg = _config(args)
    data = _stream(args.insns)
    uops = read_bytes(args.uops, "micro-op image") if args.uops else None
    dram = read_dram_image(args.dram) if args.dram else None
    text = disassemble(data, cfg, uops=uops, dram=dram, index=not args.no_index)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def cmd_asm(args):
    cfg = _config(args)
    text = read_text(args.source, "VTA assembly text file")
    data = assemble(text, cfg, path=args.source)
    if not data:
        raise InputFileError(f"{args.source}: no instructions (only blank lines and comments); "
                             f"a program ends with FINISH")
    with open(args.output, "wb") as f:
        f.write(data)
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
