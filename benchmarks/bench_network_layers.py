"""ResNet-18 (224x224, seeded) per VTA layer on the timed simulator with explicit timing
parameters: cycles, GEMM micro-ops, utilisation, DRAM bytes read / written, the busy cycles
of each module, the stall counters above 2% of the layer, and the knobs.  Runs against any
checkout of this repository (``PYTHONPATH=<checkout>``), so that before/after comparisons
use the same measurement.

    python benchmarks/bench_network_layers.py default     # vta_sim TimingParams()
    python benchmarks/bench_network_layers.py icarus      # vta_hw/calibration/timing_icarus.json
    python benchmarks/bench_network_layers.py FILE.json   # a TimingParams JSON ("params" or flat)
    LOG_BLOCK=3 python benchmarks/bench_network_layers.py default   # 1x8x8, FPGA buffers
"""

import json
import os
import sys

from isa import VTAConfig
from vta_runtime import SimDevice
from vta_sim.timing import TimingParams
from compiler.graph.driver import compile_model
from compiler.graph.models import resnet18, sample_images


def params(which: str) -> TimingParams:
    if which == "default":
        return TimingParams()
    path = "vta_hw/calibration/timing_icarus.json" if which == "icarus" else which
    with open(path) as f:
        d = json.load(f)
    return TimingParams.from_dict(d.get("params", d))


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "default"
    img = int(sys.argv[2]) if len(sys.argv) > 2 else 224
    cfg = VTAConfig() if os.environ.get("LOG_BLOCK", "4") == "4" else VTAConfig(
        LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14, LOG_WGT_BUFF_SIZE=16,
        LOG_ACC_BUFF_SIZE=16)
    c = compile_model(resnet18(image=img), cfg,
                      calib={"input": sample_images(2, img, seed=11)[:, None]})
    x = sample_images(1, img, seed=2024, channels=3).reshape(
        c.program.graph.values["input"].shape)
    ex = c.executor(SimDevice(cfg, timed=params(which)))
    ex.run({"input": x})
    steps = {s.node.name: s for s in c.program.steps}
    total = 0
    print(f"{'node':10} {'cycles':>9} {'gemm':>8} {'util':>5} {'rd':>8} {'wr':>7} "
          f"{'dram/8':>8}  busy stalls knobs")
    for r in ex.records:
        if r["where"] != "vta":
            continue
        s = steps[r["node"]]
        st = s.kernel.last_run.stats if s.kernel.last_run is not None else {}
        cyc, g = r["cycles"], r.get("gemm_ops", 0)
        rd = sum((st.get("dram_read_bytes") or {}).values())
        wr = sum((st.get("dram_write_bytes") or {}).values())
        total += cyc
        stalls = {m: {q: v for q, v in d.items() if v > 0.02 * cyc}
                  for m, d in (st.get("stall_cycles") or {}).items()}
        stalls = {m: d for m, d in stalls.items() if d}
        print(f"{r['node']:10} {cyc:>9} {g:>8} {g / cyc:5.2f} {rd:>8} {wr:>7} "
              f"{(rd + wr) / cfg.bus_bytes:>8.0f}  {st.get('busy_cycles')} {stalls} "
              f"{getattr(s.kernel, 'knobs', None)}")
    print("total", total)


if __name__ == "__main__":
    main()
