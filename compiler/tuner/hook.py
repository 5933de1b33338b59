"""The tuner hook: the knob space of a workload and a measurement on the timed simulator.

:func:`space` returns a :class:`ConfigSpace`: every knob of :class:`~compiler.vta.schedule.Knobs`
with its candidate values (plain data, AutoTVM's ``ConfigSpace``).  A point is addressed by
an index (mixed radix over the knobs, so a tuner can enumerate, sample or mutate indices)
and may be invalid (loops that cannot be fused, a region hoisted above fused threads, a
buffer that overflows the SRAM): :meth:`ConfigSpace.valid` says so without compiling.
:meth:`ConfigSpace.features` is a numeric vector per point for a learned cost model.

:func:`measure` compiles a point and runs it on the timed simulator with random inputs,
returning cycles (``inf`` for a schedule that cannot be built), DRAM bytes and, on request,
whether the result matched the tensor-expression evaluator.

Example::

    import numpy as np
    import compiler
    from isa import VTAConfig
    cfg = VTAConfig()
    data, kernel, bias, out = compiler.ops.conv2d_resnet_block(cfg, 1, 32, 14, 14, 32, 3, 1, 1)
    sp = compiler.space(out, cfg)
    for k in sp.sample(np.random.default_rng(0), 2):
        print(k, compiler.measure(out, k, cfg)["cycles"])
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np

from isa import MemType, VTAConfig

from ..vta.schedule import AXES, Knobs, ScheduleError, extents
from ..vta.workload import GemmWorkload, recognise

SPLIT_FACTORS = (2, 3, 4)
#: orders of the tensorized GEMM nest in the space (the reduction outside the output
#: tiles, so consecutive micro-ops write different accumulators, as the default does)
INNER_ORDERS = ((), ("ky", "kx", "ci", "b", "co", "y", "x"),
                ("ci", "ky", "kx", "y", "x", "b", "co"))
MAX_LOOPS = len(AXES) + 2          # outer tile loops with one of them split (twice)


def _workload(out, cfg: VTAConfig) -> GemmWorkload:
    return out if isinstance(out, GemmWorkload) else recognise(out, cfg)


class ConfigSpace:
    """Candidate values per knob for one workload (see module docstring)."""

    def __init__(self, wl: GemmWorkload, cfg: VTAConfig, max_vthreads: int = 3,
                 orders=None):
        self.wl, self.cfg = wl, cfg
        ext = extents(wl)
        self.dims: dict[str, list] = {
            f"tile_{a}": list(range(1, ext[a] + 1)) for a in ("b", "co", "h", "w", "ci")}
        self.dims["order"] = list(orders or itertools.permutations(AXES))
        self.dims["fuse"] = [(), (("h", "w"),)]
        self.dims["split_outer"] = [()] + [((a, f),) for a in AXES for f in SPLIT_FACTORS] \
            + [((a, 2), (a, 2)) for a in AXES]            # a tile loop split twice
        self.dims["vthreads"] = list(range(1, max_vthreads + 1))
        # loops are named by position in the point's own loop list (most points then exist)
        self.dims["vthread_loop"] = list(range(MAX_LOOPS))
        self.dims["inp_at"] = ["ci", "root"] + list(range(MAX_LOOPS))
        self.dims["wgt_at"] = ["ci", "root"] + list(range(MAX_LOOPS))
        self.dims["double_buffer"] = [(), ("data",), ("kernel",), ("data", "kernel")]
        # a second loop bound to 2 virtual threads (None: one vthread loop), and the order
        # of the tensorized GEMM nest (): the default)
        self.dims["vthread_loop2"] = [None] + list(range(MAX_LOOPS))
        self.dims["inner_order"] = list(INNER_ORDERS)
        self.dims["ci_split"] = [1] + list(SPLIT_FACTORS)    # reduction loop split again
        self._radix = [len(v) for v in self.dims.values()]

    def __len__(self) -> int:
        return math.prod(self._radix)

    def get(self, index: int) -> Knobs:
        """The point with this index (possibly invalid)."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} outside the space of {len(self)} points")
        vals = {}
        for (name, values), r in zip(reversed(self.dims.items()), reversed(self._radix)):
            index, i = divmod(index, r)
            vals[name] = values[i]
        pos = vals.pop("vthread_loop")
        pos2 = vals.pop("vthread_loop2", None)
        k = Knobs(**{**vals, "inp_at": "ci", "wgt_at": "ci"})
        names = k.loop_names()

        def name(p):                     # a position past the last loop names no loop
            return names[p] if p < len(names) else f"#{p}"
        vax = name(pos) if k.vthreads > 1 else ("co" if pos == 0 else f"#{pos}")
        at = {f: (v if isinstance(v, str) else name(v)) for f, v in
              (("inp_at", vals["inp_at"]), ("wgt_at", vals["wgt_at"]))}
        if pos2 is not None:             # a second thread loop: 2 more threads
            k = k.replace(vthreads=k.vthreads * 2,
                          vthread_axes=((vax, k.vthreads), (name(pos2), 2)))
        return k.replace(vthread_axis=vax, **at)

    def index(self, k: Knobs) -> int:
        out = 0
        split = {n: a for a, _ in k.split_outer for n in k.split_loops(a)}
        order = tuple(dict.fromkeys(split.get(n, n) for n in k.order))
        names = k.loop_names()

        def pos(v):
            if v in ("ci", "root"):
                return v
            return names.index(v) if v in names else int(v[1:]) if v[:1] == "#" else v
        for name, values in self.dims.items():
            v = {"order": lambda: order,
                 "vthreads": lambda: k.vthread_axes[0][1] if k.vthread_axes else k.vthreads,
                 "vthread_loop2": lambda: pos(k.vthread_axes[1][0]) if k.vthread_axes
                 else None,
                 "vthread_loop": lambda: pos(k.vthread_axis) if (
                     k.vthread_axes[0][1] if k.vthread_axes else k.vthreads) > 1 or
                 k.vthread_axis[:1] == "#" else 0,
                 "inp_at": lambda: pos(k.inp_at), "wgt_at": lambda: pos(k.wgt_at)}.get(
                name, lambda: getattr(k, name))()
            if v not in values:
                raise ScheduleError(f"knob {name}={v!r} is not in this space")
            out = out * len(values) + values.index(v)
        return out

    def valid(self, k: Knobs) -> bool:
        """True if ``k`` describes a schedule of the workload that fits the SRAM."""
        if k.vthreads == 1 and k.vthread_axis != "co":
            return False                    # one canonical point for "no virtual threads"
        try:
            k.check(self.wl)
            use = buffer_usage(self.wl, k, self.cfg)
        except ScheduleError:
            return False
        return all(n <= self.cfg.sram_depth(m) for m, n in use.items())

    def sample(self, rng: np.random.Generator, n: int, max_tries: int = 100000) -> list[Knobs]:
        """``n`` distinct valid points drawn uniformly by rejection."""
        out, seen = [], set()
        for _ in range(max_tries):
            if len(out) == n:
                break
            i = int(rng.integers(len(self)))
            if i in seen:
                continue
            seen.add(i)
            k = self.get(i)
            if self.valid(k):
                out.append(k)
        return out

    def features(self, k: Knobs) -> np.ndarray:
        """Numeric features of a point: log2 tile sizes and tile counts, loop positions,
        fusion, threads, hoisting levels and SRAM use (for a learned cost model)."""
        nt = k.n_tiles(self.wl)
        f = [math.log2(t) for t in k.tiles().values()] + [math.log2(n) for n in nt.values()]
        order = [n.split("_")[0] for n in k.loop_order()]
        f += [float(order.index(a)) for a in AXES]
        f += [float(dict(k.split_outer).get(a, 1)) for a in AXES]
        names = k.loop_names()

        def level(at):                   # -1 root, loop position, len(loops) for ci
            return -1.0 if at == "root" else float(len(names) if at == "ci" else
                                                   names.index(at) if at in names else -2)
        f += [float(bool(k.fuse)), float(k.vthreads),
              level(k.vthread_axis) if k.vthreads > 1 else -1.0]
        f += [level(k.inp_at), level(k.wgt_at),
              float("data" in k.double_buffer), float("kernel" in k.double_buffer)]
        try:
            k.check(self.wl)            # an invalid point has no buffers to measure
            use = buffer_usage(self.wl, k, self.cfg)
            f += [use[m] / self.cfg.sram_depth(m) for m in (MemType.INP, MemType.WGT,
                                                            MemType.ACC)]
        except ScheduleError:
            f += [-1.0] * 3
        return np.asarray(f, dtype=np.float64)


def space(out, cfg: VTAConfig | None = None, **kw) -> ConfigSpace:
    """The knob space of the workload ending in tensor ``out`` (or a GemmWorkload)."""
    cfg = cfg or VTAConfig()
    return ConfigSpace(_workload(out, cfg), cfg, **kw)


def buffer_usage(wl: GemmWorkload, k: Knobs, cfg: VTAConfig) -> dict:
    """SRAM tiles per scope a schedule needs (without building it), as
    :func:`compiler.vta.lower.lower` allocates them: an int8 residual the GEMM core adds
    (``gemm_residual``) sits in the INP SRAM, a slot per virtual thread, with its identity
    weight tile in WGT; every other epilogue operand in ACC."""
    from ..vta.lower import _Lowering
    L = _Lowering(wl, k, cfg)
    acc = L.acc.tiles * L.acc.slots
    inp, wgt = L.inp.tiles * L.inp.slots, L.wgt.tiles * L.wgt.slots
    rkey = None
    if L.rg is not None:
        rkey = L.rg.key
        inp += L.rbuf.tiles * L.rbuf.slots
        wgt += L.ibuf.tiles * L.ibuf.slots
    for st in {s.key: s for s in wl.epilogue if s.vector is not None}.values():
        if st.key != rkey:
            acc += L.g["acc"] * k.vthreads if st.full else st.resident_tiles
    return {MemType.INP: inp, MemType.WGT: wgt, MemType.ACC: acc}


def random_inputs(wl: GemmWorkload, inputs, rng: np.random.Generator) -> dict:
    """Random arrays for the kernel's inputs (int8 full range; wider vectors small)."""
    from ..te.evaluate import to_numpy_dtype
    out = {}
    for t in inputs:
        dt = to_numpy_dtype(t.dtype)
        lo, hi = (-128, 128) if dt.itemsize == 1 else (-2000, 2000)
        out[t] = rng.integers(lo, hi, t.shape).astype(dt)
    return out


def default_timing():
    """The timing model the tuner measures under unless told otherwise: the simulator's
    default (:class:`vta_sim.TimingParams`, this project's RTL), the one ``vta run``,
    ``vta bench`` and the graph executor time a network with, so a layer's tuned cycles are
    the cycles it takes in the network."""
    from vta_sim.timing import TimingParams
    return TimingParams()


def timing_id(timing=None, device: str = "sim") -> str:
    """The name a tuning record gives the model its cycles come from: the preset's name
    (``vta_hw_rtl``, ``tsim``, ...), ``custom-HASH`` for other parameters, ``rtl`` for the
    RTL's own counter."""
    if device == "rtl":
        return "rtl"
    tp = timing if timing is not None else default_timing()
    name = tp.name
    if name != "custom":
        return name
    import hashlib
    import json
    h = hashlib.sha1(json.dumps(tp.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
    return f"custom-{h}"


def timing_only_simulator(cfg: VTAConfig, timing):
    """A :class:`vta_sim.Simulator` with its functional datapath off: the stream is decoded,
    checked and timed, tokens are counted, but no data moves and nothing is computed.  The
    timing model never reads data, so cycles (and DRAM byte counts) equal a full run's."""
    import vta_sim

    class TimingOnlySimulator(vta_sim.Simulator):
        def _execute(self, i):
            return None
    return TimingOnlySimulator(cfg, leftover_tokens="keep", timing=timing)


def measure(out, knobs: Knobs, cfg: VTAConfig | None = None, timing=None, seed: int = 0,
            check: bool = False) -> dict:
    """Compile ``knobs`` and run them once on the timed simulator.

    Returns ``{"cycles", "dram_bytes", "gemm_ops", "compile_seconds", "correct", "error"}``;
    ``cycles`` is ``inf`` (and ``error`` the message) when the schedule cannot be built.
    ``correct`` is None unless ``check`` (compare against the tensor-expression evaluator);
    without ``check`` the simulator runs timing-only (its functional datapath off: the
    cycles and DRAM bytes are those of a full run, see :mod:`compiler.tuner.measure`).
    """
    from vta_runtime import SimDevice

    from ..vta.pipeline import build
    cfg = cfg or VTAConfig()
    wl = _workload(out, cfg)
    t0 = time.perf_counter()
    try:
        ck = build(wl, cfg, knobs)
    except ScheduleError as e:
        return {"cycles": math.inf, "dram_bytes": 0, "gemm_ops": 0, "correct": None,
                "compile_seconds": time.perf_counter() - t0, "error": str(e)}
    feeds = random_inputs(wl, ck.inputs, np.random.default_rng(seed))
    timing = timing or default_timing()
    dev = SimDevice(cfg, timed=timing)
    if not check:       # the timing model never reads data: same cycles, less time
        dev.sim = timing_only_simulator(cfg, timing)
    got, stats = ck.run(dev, feeds)
    t = dict(stats.get("timing") or {}, **stats)
    cycles = next(int(t[c]) for c in ("cycles", "total_cycles", "cycle_count") if c in t)
    correct = None
    if check:
        from ..te.evaluate import run as te_run
        correct = bool(np.array_equal(got, te_run(wl.user_out or wl.out, feeds)))
    dram = sum(int(stats.get(key, 0)) for key in ("inp_load_bytes", "wgt_load_bytes",
                                                   "acc_load_bytes", "uop_load_bytes",
                                                   "out_store_bytes"))
    return {"cycles": cycles, "dram_bytes": dram, "gemm_ops": int(stats["gemm_ops"]),
            "compile_seconds": ck.compile_seconds, "correct": correct, "error": None}


__all__ = ["ConfigSpace", "space", "measure", "buffer_usage", "random_inputs",
           "timing_only_simulator", "default_timing", "timing_id",
           "SPLIT_FACTORS", "MAX_LOOPS"]
