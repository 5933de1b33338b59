"""Whether two trees of vta_sim time programs identically: every observable of
:func:`vta_sim.simulate_timing` (per-instruction start/end/issue cycles, busy and stall
statistics, DRAM bursts, token flows, the fetch log, the summary) digested per program.

Three steps, each run with ``PYTHONPATH`` at the tree it exercises::

    # 1. the instruction streams (and the tokens before each) a network hands the simulator
    python benchmarks/bench_tsim_identity.py capture resnet18 R18.pkl   # or a corpus model
    # 2. per tree: digests of every stream under every timing preset and a few variants,
    #    and of random programs (concurrent and serial, recorded or not)
    PYTHONPATH=BEFORE python benchmarks/bench_tsim_identity.py digest R18.pkl,EFF.pkl A.pkl
    PYTHONPATH=AFTER  python benchmarks/bench_tsim_identity.py digest R18.pkl,EFF.pkl B.pkl
    # 3. compare
    python benchmarks/bench_tsim_identity.py compare A.pkl B.pkl
    # the timing model alone on the captures: CPU s, best of 3 (record=False, as Simulator)
    PYTHONPATH=TREE python benchmarks/bench_tsim_identity.py time R18.pkl,EFF.pkl

``digest`` also prints the total cycles of each capture under each timing model.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
from pathlib import Path

import numpy as np



def capture(name: str, out: str) -> None:
    from bench_tsim_speed import _compile
    from isa import VTAConfig
    from vta_runtime import SimDevice
    c, feeds = _compile(name)
    dev = SimDevice(VTAConfig(), timed=True)
    ex = c.executor(dev)
    ex.run(feeds)
    rec, real = [], dev.sim.run

    def recording(insns, dram):
        tok = list(dev.sim.tokens)
        st = real(insns, dram)
        rec.append((bytes(insns), tok, int(st.timing["cycles"])))
        return st
    dev.sim.run = recording
    try:
        ex.run(feeds)
    finally:
        dev.sim.run = real
    print(f"{name}: {len(rec)} streams, {sum(len(r[0]) // 16 for r in rec)} instructions, "
          f"{sum(r[2] for r in rec):,} cycles")
    with open(out, "wb") as f:
        pickle.dump(rec, f)


def _norm(x):
    if isinstance(x, dict):
        return sorted((_norm(k), _norm(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return [_norm(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def _digest(r):
    h = hashlib.sha256()
    for a in (r.start, r.end, r.issue, r.module):
        h.update(np.ascontiguousarray(a, np.int64).tobytes())
    h.update(repr(_norm((r.cycles, r.busy, r.stalls, r.dram_read, r.dram_written, r.gemm_ops,
                         r.last_insn, r.bus_bytes, list(r.bursts), list(r.flows),
                         list(r.fetch), r.summary()))).encode())
    return h.hexdigest()[:16], int(r.cycles)


def _params():
    from vta_sim.timing import PRESETS, TimingParams
    d = TimingParams()
    return [("default", d)] + [(n, TimingParams.preset(n)) for n in PRESETS] + [
        ("tsim unlimited", TimingParams.preset("tsim").replace(max_outstanding_reads=None)),
        ("tsim unpipelined", TimingParams.preset("tsim").replace(read_pipelined=False)),
        ("decode after pops", d.replace(dispatch_before_pop=False, token_latency=0,
                                        fetch_overlap=False)),
        ("bus arbiter", d.replace(read_in_order=False)),
        ("in-order unlimited", d.replace(max_outstanding_reads=None, read_free_cycles=0)),
        ("in-order one slot", d.replace(max_outstanding_reads=1, read_latency=3,
                                        read_burst_gap=1)),
        ("pad before/after", d.replace(pad_zero_side=False)),
        ("no pad overlap", d.replace(load_pad_overlap=False, burst_per_row=False)),
        ("small queues", d.replace(cmd_queue_depth=4, token_capacity=2, read_burst_gap=2,
                                   burst_boundary_bytes=64, max_burst_beats=4))]


def _timed(arr, p, **kw):
    from vta_sim.timing import simulate_timing
    try:
        return _digest(simulate_timing(arr, p, **kw))
    except Exception as e:          # a deadlock must be the same deadlock
        return repr(e)


def digest(caps: list[str], out: str, seeds: int = 60) -> None:
    from isa import VTAConfig, decode_stream
    from vta_sim.randprog import random_program
    cfg, res = VTAConfig(), {}
    for cap in caps:
        with open(cap, "rb") as f:
            rec = pickle.load(f)
        arrs = [(decode_stream(ins, cfg, strict=False), tok) for ins, tok, _ in rec]
        for pn, p in _params():
            total = 0
            for k, (a, tok) in enumerate(arrs):
                res[(Path(cap).name, pn, k)] = d = _timed(a, p, initial_tokens=tok)
                total += d[1] if isinstance(d, tuple) else 0
            print(f"{Path(cap).name} | {pn} | {total:,}")
    for seed in range(seeds):
        insns, _ = random_program(None, seed, 40 + seed % 50)
        a = decode_stream(insns, cfg, strict=False)
        for pn, p in _params():
            for serial in (False, True):
                for record in (True, False):
                    res[("random", seed, pn, serial, record)] = _timed(a, p, serial=serial,
                                                                       record=record)
    with open(out, "wb") as f:
        pickle.dump(res, f)
    print(f"{len(res)} cases")


def compare(a: str, b: str) -> int:
    with open(a, "rb") as f:
        x = pickle.load(f)
    with open(b, "rb") as f:
        y = pickle.load(f)
    if x.keys() != y.keys():
        print("the case lists differ")
        return 1
    bad = [k for k in x if x[k] != y[k]]
    print(f"{len(x)} cases, {len(bad)} differ")
    for k in bad[:10]:
        print(k, x[k], y[k])
    return 1 if bad else 0


def time_alone(caps: list[str], repeat: int = 3) -> None:
    import time
    from isa import VTAConfig, decode_stream
    from vta_sim.timing import TimingParams, simulate_timing
    p = TimingParams()
    for cap in caps:
        with open(cap, "rb") as f:
            rec = pickle.load(f)
        arrs = [(decode_stream(ins, VTAConfig(), strict=False), tok) for ins, tok, _ in rec]
        cpu = []
        for _ in range(repeat):
            p0 = time.process_time()
            for a, tok in arrs:
                simulate_timing(a, p, initial_tokens=tok, record=False)
            cpu.append(time.process_time() - p0)
        print(f"{Path(cap).name}: timing model alone {min(cpu):.3f} s CPU (best of {repeat})")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 3 and argv[0] == "capture":
        capture(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "digest":
        digest(argv[1].split(","), argv[2])
    elif len(argv) == 2 and argv[0] == "time":
        time_alone(argv[1].split(","))
    elif len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], argv[2])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
