"""RTL cycles of probe programs on the core a timing preset models (issue 19): the samples
``benchmarks/bench_timing_refit.py --preset NAME --samples S.json`` fits the preset to.

The core and memory system of each preset are :data:`vta_sim.timing.PRESET_CORES`: the DRAM
model of the Verilator/Icarus runners (``vta_hw_rtl``: the fast Verilator path) or vta_hw's
on-chip DRAM (``vta_hw``, ``vta_hw_fpga``, ``vta_hw_fpga_pipelined``: Amaranth's simulator,
the only runner with that DRAM, about 1k cycles/s), with the core options ``alu_stages`` and
``pipelined``.  Programs (every output image checked byte for byte against vta_sim or the
vector's expected image):

* ``vectors``: the golden vectors (default 1x16x16 configuration);
* ``random``: random well-formed programs (vta_sim.randprog, 40 instructions);
* ``probes``: short programs of one unit each (:func:`probe_programs`), zero-padded input
  loads of many short rows among them (the loader's zero side);
* ``small_cnn_8``: every VTA layer of the compiled small_cnn on 8x8 images (as ``vta run``
  compiles it);
* ``pad_sweep`` (only with ``--groups ...,pad_sweep``): 288 INP loads, padded and not
  (:func:`pad_sweep_programs`);
* FPGA presets also ``fpga_probes`` and ``fpga_convs``: benchmarks/bench_fpga_timing.py's
  throughput probes and compiler-made convs in the board's 1x8x8 configuration.

Each sample is ``{"insns": hex, "cycles", "tag", "config"}`` (``config``: the VTAConfig's
fields, absent for the default).  A few minutes per preset on the Amaranth simulator.

    .venv/bin/python benchmarks/probe_preset_cycles.py --preset vta_hw --out /tmp/vta_hw.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from isa import VTAConfig  # noqa: E402


def _core_kw(core: dict) -> dict:
    """The core generator's options (vta_hw.blocks.core) of a PRESET_CORES entry, only
    those that differ from the default core."""
    kw = {"alu_stages": core["alu_stages"]} if core["alu_stages"] != 1 else {}
    if core["pipelined"]:
        kw["pipelined"] = True
    return kw


def run_on_core(programs, core: dict, cfg: VTAConfig) -> list[int]:
    """Cycles of ``programs`` (``(insns, dram)`` pairs; each dram updated in place) on the
    core ``core`` (a :data:`vta_sim.timing.PRESET_CORES` entry) in configuration ``cfg``."""
    kw = _core_kw(core)
    if core["dram"] == "model":
        from vta_hw.runners.rtlsim import run_rtl_batch
        return [r.cycles for r in run_rtl_batch(programs, cfg, simulator="verilator",
                                                latency=core["latency"], core_kw=kw or None)]
    from vta_hw.runners.amaranth_sim import run_amaranth
    return [run_amaranth(i, d, cfg, latency=core["latency"], **kw).cycles
            for i, d in programs]


def device_for(core: dict, cfg: VTAConfig, capacity: int = 1 << 22):
    """An :class:`vta_runtime.RtlDevice` running ``core``."""
    from vta_runtime import RtlDevice
    kw = _core_kw(core)
    sim = "verilator" if core["dram"] == "model" else "amaranth"
    return RtlDevice(cfg, simulator=sim, latency=core["latency"], capacity=capacity, **kw)


def _checked(tag, progs, core, cfg, samples):
    """Run ``progs`` (name, insns, dram, expected image or None: vta_sim's) and append the
    samples; raise if an image differs."""
    from vta_sim import simulate
    refs = []
    for _, insns, dram, exp in progs:
        if exp is None:
            exp = dram.copy()
            simulate(insns, exp, cfg)
        refs.append(exp)
    images = [(p[1], p[2].copy()) for p in progs]
    t0 = time.perf_counter()
    cycles = run_on_core(images, core, cfg)
    bad = [p[0] for p, (_, img), ref in zip(progs, images, refs)
           if not np.array_equal(img, ref)]
    if bad:
        raise SystemExit(f"{tag}: the RTL's images differ from the reference: {bad}")
    extra = {} if cfg == VTAConfig() else {"config": cfg.to_dict()}
    for p, c in zip(progs, cycles):
        samples.append({"insns": p[1].hex(), "cycles": int(c), "tag": tag, "name": p[0],
                        **extra})
    print(f"{tag}: {len(progs)} programs, {sum(cycles):,} cycles, "
          f"{time.perf_counter() - t0:.0f} s", flush=True)


def probe_programs(cfg: VTAConfig) -> list:
    """(name, insns, dram, None): one GEMM, one ALU, one STORE (of tiles an ALU zeroed) and
    zero-padded INP loads of several shapes (rows, width, stride, y_pad_0, y_pad_1, x_pad_0,
    x_pad_1)."""
    from isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode
    from isa import encode_program
    L = Opcode.LOAD
    uops = MemInsn(L, MemType.UOP, 0, 0, 1, 8, 8, 0, 0, 0, 0)
    progs = {
        "gemm_8x4x32": [uops, GemmInsn(0, 8, 4, 32, 8, 0, 1, 0, 0, 0), FinishInsn()],
        "alu_max_8x4x16": [uops, AluInsn(AluOp.MAX, 0, 8, 4, 16, 1, 0, 0, 1), FinishInsn()],
        # the 64 OUT tiles zeroed first (acc * 0): a STORE of tiles no instruction wrote
        # reads what the previous program left (the fast path's model persists)
        "store_4x16_zeroed": [
            uops, AluInsn(AluOp.MUL, 0, 1, 64, 1, 1, 0, 1, 0, 1, 0, push_next=1),
            MemInsn(Opcode.STORE, MemType.OUT, 0, 0, 4, 16, 20, 0, 0, 0, 0, pop_prev=1,
                    push_prev=1), FinishInsn(pop_next=1)],
    }
    for shape in [(64, 2, 3, 1, 0, 1, 1), (64, 2, 3, 0, 0, 0, 0), (16, 2, 3, 1, 0, 1, 1),
                  (16, 4, 4, 1, 1, 2, 2), (8, 1, 1, 0, 0, 1, 0), (4, 8, 8, 2, 2, 1, 1)]:
        progs["load_inp_pad_" + "_".join(map(str, shape))] = [
            MemInsn(L, MemType.INP, 0, 0, *shape, push_next=1), FinishInsn(pop_prev=1)]
    img = np.zeros(1 << 16, np.uint8)
    return [(k, encode_program(v, cfg), img.copy(), None) for k, v in progs.items()]


def pad_sweep_programs(cfg: VTAConfig) -> list:
    """(name, insns, dram, None): one INP load of each of 288 shapes, rows 1-64, 1-8 tiles
    a row, contiguous or strided, unpadded and five paddings (the zero side against the data
    bursts; opt-in group ``pad_sweep``, seconds on the fast path)."""
    from isa import FinishInsn, MemInsn, MemType, Opcode, encode_program
    img = np.zeros(1 << 16, np.uint8)
    out = []
    for y in (1, 2, 4, 8, 16, 64):
        for x in (1, 2, 4, 8):
            for stride in (x, x + 1):
                for pad in ((0, 0, 0, 0), (1, 1, 1, 1), (1, 0, 1, 1), (0, 0, 1, 0),
                            (2, 2, 2, 2), (0, 0, 3, 3)):
                    shape = (y, x, stride, *pad)
                    insns = encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, *shape,
                                                    push_next=1), FinishInsn(pop_prev=1)], cfg)
                    out.append(("pad_sweep_" + "_".join(map(str, shape)), insns, img.copy(),
                                None))
    return out


GROUPS = ("vectors", "random", "probes", "fpga", "small_cnn_8")
#: groups run only when named in ``--groups``
OPTIONAL_GROUPS = ("pad_sweep",)


def collect(preset: str, n_random: int = 12, network: bool = True,
            groups=GROUPS) -> list[dict]:
    from vta_sim import random_program
    from vta_sim.timing import PRESET_CORES
    if preset not in PRESET_CORES:
        raise SystemExit(f"--preset: one of {', '.join(PRESET_CORES)}, not {preset!r}")
    core = PRESET_CORES[preset]
    cfg = VTAConfig()
    samples: list[dict] = []
    vecs = []
    paths = sorted((ROOT / "tests" / "data" / "vectors").glob("*.npz"))
    for p in paths if "vectors" in groups else []:
        v = np.load(p, allow_pickle=False)
        vecs.append((p.stem, v["insns"].tobytes(), v["dram_in"].copy(), v["dram_out"]))
    if vecs:
        _checked("vectors", vecs, core, cfg, samples)
    if "probes" in groups:
        _checked("probes", probe_programs(cfg), core, cfg, samples)
    if "pad_sweep" in groups:
        _checked("pad_sweep", pad_sweep_programs(cfg), core, cfg, samples)
    rnd = []
    for k in range(n_random if "random" in groups else 0):
        insns, dram = random_program(cfg, 4000 + k, n_insns=40)
        rnd.append((f"random_{k:02d}", insns, dram, None))
    if rnd:
        _checked("random", rnd, core, cfg, samples)
    if core["dram"] == "onchip" and core["alu_stages"] == 3 and "fpga" in groups:
        from bench_fpga_timing import FPGA_CFG, conv_programs
        from bench_fpga_timing import probe_programs as fpga_probes
        _checked("fpga_probes", [(n, i, d, None) for n, _, i, d in fpga_probes()], core,
                 FPGA_CFG, samples)
        _checked("fpga_convs", [(n, i, d, None) for n, _, i, d in conv_programs()], core,
                 FPGA_CFG, samples)
    if network and "small_cnn_8" in groups:
        from bench_rtl_network import build
        dev = device_for(core, cfg)
        rec = []

        class Recording(type(dev)):
            def _execute(self, insn_phys, insn_count, wait_cycles):
                st = super()._execute(insn_phys, insn_count, wait_cycles)
                rec.append({"insns": self.insn_bytes(insn_phys, insn_count).hex(),
                            "cycles": int(st["cycles"]), "tag": "small_cnn_8"})
                return st
        dev.__class__ = Recording
        t0 = time.perf_counter()
        c, feeds = build("small_cnn", 8, cfg)
        ex = c.executor(dev)
        out = ex.run(feeds)
        from vta_runtime import SimDevice
        ref = c.executor(SimDevice(cfg)).run(feeds)
        for k in ref:
            if not np.array_equal(np.asarray(out[k]), np.asarray(ref[k])):
                raise SystemExit(f"small_cnn_8: output {k} differs from the simulator's")
        for s, node in zip(rec, [r["node"] for r in ex.records if r["where"] == "vta"]):
            s["name"] = node
        samples += rec
        print(f"small_cnn_8: {len(rec)} layers, {sum(s['cycles'] for s in rec):,} cycles, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    return samples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True, help="the timing preset whose core to run")
    ap.add_argument("--out", required=True, help="samples JSON to write")
    ap.add_argument("--random", type=int, default=12, help="random programs")
    ap.add_argument("--no-network", action="store_true", help="skip small_cnn's layers")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help=f"comma-separated program groups to run (of "
                         f"{', '.join(GROUPS + OPTIONAL_GROUPS)}; the last only when named); "
                         f"the samples of the other groups in an existing --out are kept")
    args = ap.parse_args(argv)
    groups = args.groups.split(",")
    unknown = set(groups) - set(GROUPS + OPTIONAL_GROUPS)
    if unknown:
        raise SystemExit(f"--groups: unknown {sorted(unknown)}")
    samples = collect(args.preset, args.random, not args.no_network, groups)
    out = Path(args.out)
    if out.exists() and set(groups) != set(GROUPS):
        old = json.loads(out.read_text())
        if old.get("preset") != args.preset:
            raise SystemExit(f"{out}: samples of {old.get('preset')!r}, not {args.preset!r}")
        mine = {s["tag"] for s in samples} | set(groups) | (
            {"fpga_probes", "fpga_convs"} if "fpga" in groups else set())
        samples = [s for s in old["samples"] if s["tag"] not in mine] + samples
    from vta_sim.timing import PRESET_CORES
    doc = {"preset": args.preset, "core": PRESET_CORES[args.preset],
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "samples": samples}
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {len(samples)} samples to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
