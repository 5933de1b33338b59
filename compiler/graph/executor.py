"""The graph executor: run a compiled :class:`~.partition.Program` on a device.

Activations produced by a VTA kernel stay in device memory as the input of the next VTA
kernel (no host round trip); they are copied to the host only when a CPU or host operator
reads them, and host data is copied to the device only when a VTA kernel reads it.
Weights and biases are uploaded once per device and stay resident.  Every step is timed:
VTA steps report the device's cycles (and seconds at ``clock_mhz``), CPU/host steps their
wall time; DRAM bytes are the device's bus traffic.  :meth:`Executor.trace` writes one
Chrome / Perfetto trace of the whole network (VTA and CPU on one timeline: VTA kernels at
their simulated duration, CPU operators at their measured one).

Example::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph import import_onnx
    from compiler.graph.models import small_cnn
    from compiler.graph.passes import float_pipeline
    from compiler.graph.quantize import quantize
    from compiler.graph.partition import compile_graph
    from compiler.graph.executor import Executor
    cfg = VTAConfig()
    fg = float_pipeline().run(import_onnx(small_cnn()))
    xs = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    prog = compile_graph(quantize(fg, [{"image": x} for x in xs]), cfg)
    ex = Executor(prog, SimDevice(cfg, timed=True))
    out = ex.run({"image": xs[0]})
    assert out["scores"].shape == (1, 10)
"""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np

from ..ops import registry
from .ir import GraphError
from .codegen import gc_paused
from .reference import run_node


class _DevValue:
    def __init__(self, buf, shape, dtype):
        self.buf, self.shape, self.dtype = buf, shape, dtype


def _feeds_of(kernel):
    """(user placeholder, DRAM tensor, host prep or None) for each kernel input."""
    wl = kernel.workload
    if hasattr(wl, "feeds"):
        return [(h.user, h.dram, h.prep) for h in wl.feeds()]
    return [(t, t, None) for t in kernel.inputs]


def _bytes(v) -> int:
    if isinstance(v, dict):
        return int(sum(v.values()))
    return int(v or 0)


def check_feeds(g, specs: dict, where: str = "", *, samples: bool = False) -> None:
    """The arrays ``specs`` ({name: anything with ``.shape`` and ``.dtype``: arrays, or the
    ``.npy`` headers of an ``.npz`` before it is loaded}) against the inputs of graph ``g``:
    one per graph input and no other, each of the input's shape (``samples``: or with a
    leading sample axis, ``(S, *shape)``, and any batch size) and numeric.  A
    :class:`GraphError` prefixed by ``where`` (e.g. "--inputs x.npz: ")."""
    names = ", ".join(g.inputs)
    for name in g.inputs:
        if name not in specs:
            raise GraphError(f"{where}no array named {name!r} for graph input {name!r} (the "
                             f"model's inputs: {names}; given: "
                             f"{', '.join(map(str, specs)) or 'nothing'})")
    extra = sorted(set(specs) - set(g.inputs), key=str)
    if extra:
        raise GraphError(f"{where}array {extra[0]!r} is not an input of the model (inputs: "
                         f"{names})")
    for name in g.inputs:
        want, got = tuple(g.values[name].shape), tuple(specs[name].shape)
        if samples and len(got) == len(want) + 1:      # a leading sample axis
            got = got[1:]
        bad = len(got) != len(want) or (
            any(w != d for w, d in zip(want[1:], got[1:])) if samples else got != want)
        if bad:
            raise GraphError(f"{where}input {name!r}: shape {got}, the model expects {want}")
        if np.dtype(specs[name].dtype).kind not in "fiub":
            raise GraphError(f"{where}input {name!r}: dtype {specs[name].dtype} is not "
                             f"numeric")


def _finite_free(name, steps) -> bool:
    """Whether graph input ``name`` is read only by CPU steps whose hand-written kernel
    gives every input its defined value (``nonfinite_ok``: the softmax kernels, a NaN row
    NaN, as onnxruntime), so that a NaN or an infinity in it needs no refusal (it is
    refused before a VTA or host operator: quantised, NaN has no int8 value)."""
    readers = [s for s in steps if name in s.node.inputs]
    return bool(readers) and all(
        s.kind == "cpu" and getattr(s.kernel, "module", None) is not None and getattr(
            getattr(s.kernel.out, "cpu_kernel", None), "nonfinite_ok", False)
        for s in readers)


class Executor:
    """Runs ``program`` on ``device`` (SimDevice, RtlDevice, BoardDevice)."""

    def __init__(self, program, device, clock_mhz: float = 100.0):
        self.p = program
        self.dev = device
        self.clock_mhz = clock_mhz
        self._params: dict = {}
        self.records: list[dict] = []
        if program is not None:         # (None: only the device paths, e.g. _run_vta)
            self._plan()

    def _plan(self) -> None:
        """What :meth:`run` needs per run, worked out once per program: each graph input's
        shape, dtype and whether a non-finite value must be refused (:func:`_finite_free`),
        each step's kind (a host step that is a view of device data), and the values
        whose last reader it is (freed after it unless they are graph outputs).  Before,
        every run counted the uses, looked each host op up and checked each feed in full:
        0.025 ms of fixed cost a run (BENCHMARKS.md, issue 21)."""
        g, steps = self.p.graph, self.p.steps
        self._inputs = [(name, tuple(g.values[name].shape), np.dtype(g.values[name].dtype),
                         not _finite_free(name, steps)) for name in g.inputs]
        last = {}
        for k, s in enumerate(steps):
            for i in s.node.inputs:
                last[i] = k
        frees = [[] for _ in steps]
        for i, k in last.items():
            frees[k].append(i)
        self._steps = []
        for s, fr in zip(steps, frees):
            kind = s.kind
            if kind not in ("vta", "cpu"):
                kind = "view" if getattr(registry.get(s.node.op), "view", False) else "host"
            self._steps.append((s, s.node, kind, fr))

    # ------------------------------------------------------------------ helpers
    def _param_buf(self, key, make):
        """The device buffer of param ``key``: ``make()`` (its host array, packed) is
        called and uploaded on the first use only."""
        b = self._params.get(key)
        if b is None:
            arr = make()
            b = self.dev.alloc(max(arr.nbytes, 1), name=str(key))
            b.copy_from(np.ascontiguousarray(arr))
            self._params[key] = b
        return b

    def close(self):
        for b in self._params.values():
            self.dev.free(b)
        self._params.clear()

    def _host(self, env, name, rec):
        v = env[name]
        if isinstance(v, _DevValue):
            arr = v.buf.copy_to(v.dtype, shape=v.shape)
            rec["to_host_bytes"] = rec.get("to_host_bytes", 0) + arr.nbytes
            env[name] = arr
            if not any(isinstance(o, _DevValue) and o.buf is v.buf for o in env.values()):
                self._free(v)
            return arr
        return v

    def _free(self, v):
        try:
            self.dev.free(v.buf)
        except Exception:
            pass

    # ------------------------------------------------------------------ run
    def run(self, feeds: dict) -> dict:
        """Run the network on ``feeds`` ({graph input name: float array}); returns
        {graph output name: array} and fills :attr:`records` (one dict per step).  A feed
        with a NaN or an infinity is refused (:class:`GraphError`) unless only kernels that
        define their output for every value read it (:func:`_finite_free`)."""
        g = self.p.graph
        env: dict = {}
        feeds = {k: np.asarray(v) for k, v in feeds.items()}
        if len(feeds) != len(self._inputs) or any(
                name not in feeds or feeds[name].shape != shape or
                feeds[name].dtype.kind not in "fiub" for name, shape, _, _ in self._inputs):
            check_feeds(g, feeds)           # the typed error saying what is wrong
        for name, _, dtype, finite in self._inputs:
            a = feeds[name]
            if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
                raise GraphError(f"input {name!r}: contains NaN or infinity "
                                 f"({int((~np.isfinite(a)).sum())} values)")
            # float32, or an integer input: no copy when it already is one, C-contiguous and
            # aligned (a feed unpickled from a buffer may not be; the steps only read their
            # inputs; an output that is a view of a feed is copied below)
            env[name] = a if a.dtype == dtype and a.flags.c_contiguous and \
                a.flags.aligned else np.require(a, dtype, ["C_CONTIGUOUS", "ALIGNED"])
        self.records = records = []
        outs = set(g.outputs)                   # (a caller may ask for more outputs)
        t_run = time.perf_counter()
        # the collector paused over the steps of a network (a single step: no gain, 2 us)
        with gc_paused() if len(self._steps) > 1 else contextlib.nullcontext():
            for s, n, kind, frees in self._steps:
                rec = {"node": n.name, "op": n.op, "where": s.kind, "seconds": 0.0, "cycles": 0,
                       "dram_bytes": 0}
                t0 = time.perf_counter()
                if kind == "cpu":
                    env[n.output] = s.kernel.run({
                        ph: src if k == "param" else self._host(env, src, rec)
                        for ph, (k, src) in s.binds})
                elif kind == "vta":
                    env[n.output] = self._run_vta(s, env, rec)
                elif kind == "view" and isinstance(env.get(n.inputs[0]), _DevValue):
                    v = env[n.inputs[0]]               # a reshape of device data is a view
                    env[n.output] = _DevValue(v.buf, tuple(g.values[n.output].shape), v.dtype)
                else:
                    ins = [g.params[i] if i in g.params else self._host(env, i, rec)
                           for i in n.inputs]
                    try:
                        env[n.output] = run_node(n, ins)
                    except GraphError:
                        raise
                    except (ArithmeticError, IndexError, KeyError, TypeError,
                            ValueError) as e:
                        raise GraphError(f"node {n.name!r} ({n.op}): its host step failed: "
                                         f"{type(e).__name__}: {e}") from e
                rec["wall"] = time.perf_counter() - t0
                if kind != "vta":
                    rec["seconds"] = rec["wall"]
                records.append(rec)
                for i in frees:                 # values this step reads last
                    if i in outs:
                        continue
                    v = env.pop(i, None)
                    if isinstance(v, _DevValue) and not any(
                            isinstance(o, _DevValue) and o.buf is v.buf for o in env.values()):
                        self._free(v)
        self.wall_seconds = time.perf_counter() - t_run
        out = {}
        for o in g.outputs:
            # an output no step computes is a constant of the model (a folded Shape, an
            # initializer listed as an output): a copy of the param
            out[o] = self._host(env, o, {}) if o in env else np.array(g.params[o])
            if any(np.may_share_memory(out[o], a) for a in feeds.values()):
                out[o] = out[o].copy()      # never hand back (a view of) the caller's input
        freed = set()
        for v in env.values():
            if isinstance(v, _DevValue) and id(v.buf) not in freed:
                freed.add(id(v.buf))
                self._free(v)
        return out

    def _run_vta(self, s, env, rec):
        from vta_runtime import CommandQueue

        from compiler.vta.codegen import run_stream
        from compiler.te.evaluate import to_numpy_dtype
        k = s.kernel
        if getattr(k.workload, "unpack", None) is not None:
            return self._run_vta_hosted(s, env, rec)
        bind = {ph: src for ph, src in s.binds}
        bufs, temp = {}, []
        for user, dram, prep in _feeds_of(k):
            kind, src = bind[user]
            if kind == "param":         # packed (and uploaded) on the first run only
                bufs[dram] = self._param_buf((s.node.name, user.name), lambda: np.asarray(
                    src if prep is None else prep(src), to_numpy_dtype(dram.dtype)))
                continue
            v = env[src]
            if prep is None and isinstance(v, _DevValue):
                bufs[dram] = v.buf                      # stays on the device
                continue
            arr = self._host(env, src, rec) if isinstance(v, _DevValue) else v
            if prep is not None:        # the kernel re-lays this input out on the host
                rec.setdefault("host_prep", []).append(src)
                arr = prep(arr)
            arr = np.ascontiguousarray(arr, to_numpy_dtype(dram.dtype))
            b = self.dev.alloc(max(arr.nbytes, 1), name=dram.name)
            b.copy_from(arr)
            rec["to_device_bytes"] = rec.get("to_device_bytes", 0) + arr.nbytes
            rec.setdefault("uploaded", []).append(src)
            temp.append(b)
            bufs[dram] = b
        for t, arr in getattr(k, "constants", {}).items():   # e.g. a GEMM-core add's identity
            bufs[t] = self._param_buf((s.node.name, t.name),
                                      lambda: np.asarray(arr, to_numpy_dtype(t.dtype)))
        out = k.out_tensor
        ndt = to_numpy_dtype(out.dtype)
        ob = self.dev.alloc(int(np.prod(out.shape)) * ndt.itemsize, name=s.node.output)
        bufs[out] = ob
        cq = CommandQueue(self.dev)
        try:
            run = run_stream(k.ops, cq, bufs, k.sites)
        finally:
            cq.close()
            for b in temp:
                self.dev.free(b)
        k.last_run = run
        st = dict(run.stats)
        rec["cycles"] = int(st.get("cycles", 0))
        rec["seconds"] = rec["cycles"] / (self.clock_mhz * 1e6)
        rec["dram_bytes"] = sum(_bytes(st.get(k)) for k in ("dram_read_bytes",
                                                             "dram_write_bytes"))
        rec["gemm_ops"] = int(st.get("gemm_ops", 0) or 0)
        busy = st.get("busy_cycles")
        if busy:
            from compiler.vta.timing import layer_bound
            bus = getattr(getattr(self.dev, "config", None), "bus_bytes", 8)
            rec["bound"] = layer_bound(rec["cycles"], rec["gemm_ops"], busy,
                                       rec["dram_bytes"] / bus)
        if out is not k.workload.out:       # an int32 result stored as byte planes
            from compiler.vta.pipeline import join_planes
            planes = ob.copy_to(ndt, shape=out.shape)
            self.dev.free(ob)
            rec["to_host_bytes"] = rec.get("to_host_bytes", 0) + planes.nbytes
            return join_planes(planes, k.workload.out.dtype)
        return _DevValue(ob, tuple(out.shape), ndt)

    def _run_vta_hosted(self, s, env, rec):
        """A kernel whose result the runtime reassembles on the host (an int32 output
        stored as byte planes): run through the kernel's own runner."""
        feeds = {}
        for ph, (kind, src) in s.binds:
            feeds[ph] = src if kind == "param" else self._host(env, src, rec)
        result, st = s.kernel.run(self.dev, feeds)
        rec["cycles"] = int(st.get("cycles", 0))
        rec["seconds"] = rec["cycles"] / (self.clock_mhz * 1e6)
        rec["dram_bytes"] = sum(_bytes(st.get(k)) for k in ("dram_read_bytes",
                                                             "dram_write_bytes"))
        rec["uploaded"] = [src for _, (kind, src) in s.binds if kind == "value"]
        return result

    # ------------------------------------------------------------------ reports
    def table(self) -> str:
        rows = [f"{'#':>3} {'node':24s} {'op':16s} {'where':5s} {'cycles':>10} "
                f"{'VTA ms':>9} {'CPU ms':>9} {'DRAM KiB':>9} {'util':>6}  bound",
                f"    (VTA ms: modelled, cycles at an assumed {self.clock_mhz:g} MHz clock; "
                f"CPU ms: measured wall time on this host)"]
        for k, r in enumerate(self.records):
            vta = r["where"] == "vta"
            cyc = f"{r['cycles']:10d}" if vta else f"{'-':>10}"
            util = f"{r.get('gemm_ops', 0) / r['cycles']:6.1%}" if vta and r["cycles"] else \
                f"{'-':>6}"
            ms = f"{r['seconds'] * 1e3:9.3f}"
            ms = f"{ms} {'-':>9}" if vta else f"{'-':>9} {ms}"
            rows.append(f"{k:3d} {r['node'][:24]:24s} {r['op']:16s} {r['where']:5s} {cyc} "
                        f"{ms} {r['dram_bytes'] / 1024:9.1f} {util}  "
                        f"{r.get('bound', '-')}")
        s = self.summary()
        rows.append(f"total: VTA {s['vta_cycles']} cycles = {s['vta_seconds'] * 1e3:.2f} ms "
                    f"modelled at an assumed {self.clock_mhz:g} MHz; CPU/host "
                    f"{s['cpu_seconds'] * 1e3:.2f} ms measured; "
                    f"VTA share {s['vta_share']:.0%}; wall {self.wall_seconds * 1e3:.0f} ms")
        rows.append(f"VTA cycles from: {self.timing_source()}")
        return "\n".join(rows)

    def timing_source(self) -> str:
        """Where the VTA cycle counts come from: the simulator's timing model (its preset and
        what it models, :meth:`vta_sim.TimingParams.describe`) or the device's own counter."""
        timing = getattr(getattr(self.dev, "sim", None), "timing", None)
        if timing is not None and hasattr(timing, "describe"):
            return f"timing model {timing.describe()}"
        name = getattr(self.dev, "name", type(self.dev).__name__)
        if name == "sim":
            return "none (functional simulation: no cycle counts)"
        preset = getattr(self.dev, "timing_preset", None)
        return f"the {name} device's cycle counter" + (
            f" (the timing preset modelling this core: {preset})" if preset else "")

    def summary(self) -> dict:
        vc = sum(r["cycles"] for r in self.records if r["where"] == "vta")
        vs = vc / (self.clock_mhz * 1e6)
        cs = sum(r["seconds"] for r in self.records if r["where"] != "vta")
        return {"vta_cycles": vc, "vta_seconds": vs, "cpu_seconds": cs,
                "vta_share": vs / (vs + cs) if vs + cs else 0.0,
                "dram_bytes": sum(r["dram_bytes"] for r in self.records),
                "wall_seconds": getattr(self, "wall_seconds", 0.0),
                "vta_ops": sum(r["where"] == "vta" for r in self.records),
                "cpu_ops": sum(r["where"] != "vta" for r in self.records)}

    def trace(self, path: str) -> None:
        """One Chrome/Perfetto trace JSON of the last run (chrome://tracing, ui.perfetto.dev)."""
        events = [{"name": "process_name", "ph": "M", "pid": 1,
                   "args": {"name": self.p.graph.name}},
                  {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "VTA"}},
                  {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "CPU"}}]
        t = 0.0
        for r in self.records:
            dur = r["seconds"] * 1e6
            events.append({"name": r["node"], "cat": r["op"], "ph": "X", "pid": 1,
                           "tid": 1 if r["where"] == "vta" else 2, "ts": t, "dur": dur,
                           "args": {k: v for k, v in r.items() if k not in ("node",)}})
            t += dur
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
