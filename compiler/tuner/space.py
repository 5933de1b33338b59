"""Tuning tasks and the tuner's knob space.

A :class:`Task` is one workload to tune, written as plain data (``spec``: the operator and
its shape) so that it can be logged, sent to another process or another machine, and
rebuilt there; :func:`task_from_spec` and :meth:`Task.workload` turn it back into a
:class:`~compiler.vta.workload.GemmWorkload`.  ``Task.key`` names the workload in tuning logs
(shape, stride, padding and epilogue; not the tensor names).

:class:`TunerSpace` is the search space: a product of per-knob candidate lists (TVM's
template knobs and ours: tile sizes that cut an axis into nearly equal tiles, three loop
orders, fusion of the image loops, virtual threads and the loop they bind, where each cache
read is computed, double buffering).  A point is a row of integer choice indices, so whole
populations are handled as numpy arrays (mutation, features, dedup).  Validity is exact
(:meth:`compiler.tuner.hook.ConfigSpace.valid`: the template accepts the knobs and every buffer
fits its SRAM) and cached per point.

Example::

    import numpy as np
    from isa import VTAConfig
    from compiler.tuner import Task, TunerSpace
    task = Task.conv2d(1, 64, 28, 28, 64, 3, 1, 1)
    sp = TunerSpace(task.workload(VTAConfig()), VTAConfig())
    pts = sp.sample(np.random.default_rng(0), 4)
    print(len(sp), [sp.knobs(p).tiles() for p in pts])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from ..vta.schedule import AXES, Knobs, ScheduleError, extents
from .hook import ConfigSpace
from .knob_grid import KnobGrid
from ..vta.workload import GemmWorkload


class TaskError(ValueError):
    """A workload description that cannot be turned into a VTA workload (says which field)."""


#: Tile loop orders the tuner tries (outermost first): weights stay (co outermost), inputs
#: stay (co innermost), and TVM's VTA template order (b, h, co, w).
ORDERS = (("b", "co", "h", "w"), ("b", "h", "w", "co"), ("b", "h", "co", "w"))
#: Compute-at candidates of the cache reads: per reduction step, once, or at an outer loop.
AT_LEVELS = ("ci", "root", "b", "co", "h", "w", "h.w")
VTHREAD_AXES = ("co", "h", "w", "h.w")
DOUBLE_BUFFER = ((), ("data",), ("kernel",), ("data", "kernel"))
MAX_VTHREADS = 3

_CONV_FIELDS = {"batch": 1, "in_channels": None, "height": None, "width": None,
                "out_channels": None, "kernel": None, "stride": 1, "pad": 0, "shift": 8}
_DENSE_FIELDS = {"batch": 1, "in_features": None, "out_features": None, "shift": 8}


def balanced(n: int) -> list[int]:
    """Tile sizes that cut ``n`` into k nearly equal tiles (``ceil(n / k)`` for every k)."""
    return sorted({-(-n // k) for k in range(1, n + 1)})


@dataclass(frozen=True)
class Task:
    """One workload to tune: ``op`` ("conv2d" or "dense", each followed by VTA's benchmark
    epilogue: >> shift, + bias, clip [0, 127], int8) and its ``spec`` (plain numbers);
    ``name`` is a label (e.g. "C5") and not part of the key."""
    op: str
    spec: tuple
    name: str = ""
    wl: object = field(default=None, compare=False, repr=False)

    @staticmethod
    def from_workload(wl: GemmWorkload, name: str = "") -> "Task":
        """A task for an already recognised workload (e.g. a layer of an ONNX model,
        :func:`compiler.cli.tune.tasks_of`): it travels to measurement processes with its
        workload; its log records cannot be rebuilt without the model (no transfer)."""
        return Task("workload", (("key", workload_key(wl)),), name, wl)

    @staticmethod
    def conv2d(batch, in_channels, height, width, out_channels, kernel, stride=1, pad=0,
               shift=8, name="") -> "Task":
        return task_from_spec({"op": "conv2d", "batch": batch, "in_channels": in_channels,
                               "height": height, "width": width,
                               "out_channels": out_channels, "kernel": kernel,
                               "stride": stride, "pad": pad, "shift": shift, "name": name})

    @staticmethod
    def dense(batch, in_features, out_features, shift=8, name="") -> "Task":
        return task_from_spec({"op": "dense", "batch": batch, "in_features": in_features,
                               "out_features": out_features, "shift": shift, "name": name})

    def as_dict(self) -> dict:
        return {"op": self.op, **dict(self.spec), **({"name": self.name} if self.name else {})}

    @property
    def key(self) -> str:
        """The workload's name in tuning logs (operator and every shape parameter)."""
        d = dict(self.spec)
        return self.op + "(" + ",".join(f"{k}={d[k]}" for k in sorted(d)) + ")"

    def workload(self, cfg: VTAConfig) -> GemmWorkload:
        """The recognised workload for configuration ``cfg``."""
        return self.wl if self.wl is not None else _workload(self, cfg)

    def tensors(self, cfg: VTAConfig):
        """(inputs..., out) tensors of the workload for ``cfg``."""
        from .. import ops
        from ..te import placeholder
        d = dict(self.spec)
        if self.op == "conv2d":
            return ops.conv2d_resnet_block(cfg, d["batch"], d["in_channels"], d["height"],
                                           d["width"], d["out_channels"], d["kernel"],
                                           d["stride"], d["pad"], d["shift"])
        b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
        for what, v, blk in (("batch", d["batch"], b), ("in_features", d["in_features"], bi),
                             ("out_features", d["out_features"], bo)):
            if v % blk:
                raise TaskError(f"dense {what} {v} is not a multiple of the VTA block {blk}")
        x = placeholder((d["batch"] // b, d["in_features"] // bi, b, bi), "int8", "data")
        w = placeholder((d["out_features"] // bo, d["in_features"] // bi, bo, bi), "int8",
                        "kernel")
        bias = placeholder((d["out_features"] // bo, b, bo), cfg.acc_dtype, "bias")
        r = ops.clip_op(ops.bias_add(ops.shr(ops.dense(x, w, acc_dtype=cfg.acc_dtype),
                                             d["shift"]), bias), 0, 127)
        return x, w, bias, ops.cast_int8(r)


def workload_key(wl: GemmWorkload) -> str:
    """The name of a recognised workload in tuning logs: kind, sizes in VTA tiles and
    pixels, stride, padding, the epilogue's operations and the output width (tensor names
    are not part of it, so the same layer from any front end has the same key); a fused
    conv + max pool (:class:`compiler.vta.conv_pool.ConvPoolWorkload`) is named by
    :func:`compiler.tuner.conv_pool_space.conv_pool_key`."""
    if not isinstance(wl, GemmWorkload):
        from .conv_pool_space import conv_pool_key, is_conv_pool
        if is_conv_pool(wl):
            return conv_pool_key(wl)
    eps = "|".join(f"{st.opcode.name}{'-' if st.negate else ''}"
                   f"{('v' if not st.full else 'f') if st.vector is not None else st.imm}"
                   for st in wl.epilogue)
    pads = ".".join(map(str, wl.padding))
    return (f"{wl.kind}(nb={wl.nb},cb={wl.cb},h={wl.h},w={wl.w},ob={wl.ob},k={wl.kh}x{wl.kw},"
            f"s={wl.stride},p={pads},ep={eps},out={wl.out_bits})")


_WL_CACHE: dict = {}


def _workload(task: Task, cfg: VTAConfig) -> GemmWorkload:
    key = (task.key, json.dumps(cfg.to_dict(), sort_keys=True))
    wl = _WL_CACHE.get(key)
    if wl is None:
        from ..vta.workload import recognise
        from ..te.errors import CompilerError
        try:
            wl = recognise(task.tensors(cfg)[-1], cfg)
        except CompilerError as e:
            raise TaskError(f"workload {task.key}: {e}") from None
        if len(_WL_CACHE) > 64:
            _WL_CACHE.clear()
        _WL_CACHE[key] = wl
    return wl


def task_from_spec(d, where: str = "workload") -> Task:
    """A :class:`Task` from a dict such as ``{"op": "conv2d", "in_channels": 64, "height":
    56, "width": 56, "out_channels": 64, "kernel": 3, "stride": 1, "pad": 1}`` (defaults:
    batch 1, stride 1, pad 0, shift 8) or ``{"op": "dense", "in_features": 512,
    "out_features": 1024}``.  Errors name ``where`` and the field."""
    if not isinstance(d, dict):
        raise TaskError(f"{where}: expected a JSON object, not {type(d).__name__}")
    op = d.get("op")
    if op == "workload":
        raise TaskError(f"{where}: workload {d.get('key')!r} was extracted from a model; it "
                        f"cannot be rebuilt from its description alone")
    fields = {"conv2d": _CONV_FIELDS, "dense": _DENSE_FIELDS}.get(op)
    if fields is None:
        raise TaskError(f"{where}: field 'op' must be 'conv2d' or 'dense', not {op!r}")
    unknown = sorted(set(d) - set(fields) - {"op", "name"})
    if unknown:
        raise TaskError(f"{where}: unknown field(s) {unknown} for {op} (known: "
                        f"{sorted(fields)})")
    spec = {}
    for k, default in fields.items():
        v = d.get(k, default)
        if v is None:
            raise TaskError(f"{where}: field {k!r} is missing")
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k in ("pad", "shift")
                                                                 else 1):
            raise TaskError(f"{where}: field {k!r} must be a "
                            f"{'non-negative' if k in ('pad', 'shift') else 'positive'} "
                            f"integer, not {v!r}")
        spec[k] = v
    name = d.get("name", "")
    if not isinstance(name, str):
        raise TaskError(f"{where}: field 'name' must be a string, not {name!r}")
    return Task(op, tuple(sorted(spec.items())), name)


class TunerSpace(KnobGrid):
    """The tuner's knob space for one workload (see module docstring).

    ``dims`` maps knob name -> candidate values; a point is an int array of choice indices
    in ``dims`` order.  ``len(space)`` counts points, valid or not.  ``restrict`` narrows
    knobs to subsets of their values (e.g. ``{"order": [("b", "co", "h", "w")]}``)."""

    def __init__(self, wl: GemmWorkload, cfg: VTAConfig, max_vthreads: int = MAX_VTHREADS,
                 restrict: dict | None = None):
        self.wl, self.cfg = wl, cfg
        ext = extents(wl)
        self.dims: dict[str, list] = {f"tile_{a}": balanced(ext[a])
                                      for a in ("b", "co", "h", "w", "ci")}
        self.dims["order"] = list(ORDERS)
        self.dims["fuse"] = [(), (("h", "w"),)]
        self.dims["vthreads"] = list(range(1, max_vthreads + 1))
        self.dims["vthread_axis"] = list(VTHREAD_AXES)
        self.dims["inp_at"] = list(AT_LEVELS)
        self.dims["wgt_at"] = list(AT_LEVELS)
        self.dims["double_buffer"] = list(DOUBLE_BUFFER)
        for name, values in (restrict or {}).items():      # a smaller space (tests, studies)
            if name not in self.dims:
                raise ScheduleError(f"restrict: no knob {name!r} (knobs: {list(self.dims)})")
            bad = [v for v in values if v not in self.dims[name]]
            if bad or not values:
                raise ScheduleError(f"restrict: {name} values {bad or values!r} are not in "
                                    f"the space ({self.dims[name]!r})")
            self.dims[name] = list(values)
        self._set_dims(self.dims)
        self._check = ConfigSpace(wl, cfg)

    # ------------------------------------------------------------------ points
    def _accepts(self, knobs: Knobs) -> bool:
        """A schedule the template accepts and whose buffers fit."""
        return self._check.valid(knobs)

    def _normalize(self, k: Knobs) -> Knobs:
        return k.normalized() if k.split_outer == () else k

    def _value(self, name: str, value):
        return tuple(value) if name == "order" else value

    def _not_a_knob(self, name: str, value, default) -> str:
        return (f"knob {name}={value!r} is not in the tuner's space (it keeps "
                f"{name}={default!r})")

    def _not_a_value(self, name: str, given, value) -> str:
        return f"knob {name}={value!r} is not in the tuner's space"

    def valid_many(self, pts: np.ndarray) -> np.ndarray:
        return np.fromiter((self.valid(p) for p in pts), bool, len(pts))

    def random_points(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` uniform random points (valid or not)."""
        return (rng.random((n, len(self.radix))) * self.radix).astype(np.int64)

    def sample(self, rng: np.random.Generator, n: int, exclude=(), max_tries: int = 200000
               ) -> np.ndarray:
        """Up to ``n`` distinct valid points, uniformly by rejection, none in ``exclude``
        (a set of ``point.tobytes()``)."""
        out, seen = [], set(exclude)
        tries = 0
        while len(out) < n and tries < max_tries:
            batch = self.random_points(rng, max(64, 4 * (n - len(out))))
            tries += len(batch)
            for p in batch:
                b = p.tobytes()
                if b in seen:
                    continue
                seen.add(b)
                if self.valid(p):
                    out.append(p)
                    if len(out) == n:
                        break
        return np.array(out, np.int64).reshape(-1, len(self.radix))

    def mutate(self, rng: np.random.Generator, pts: np.ndarray) -> np.ndarray:
        """Each point with one knob changed to another of its values (a neighbour)."""
        pts = np.array(pts, np.int64, copy=True)
        n = len(pts)
        which = rng.integers(0, len(self.radix), n)
        r = self.radix[which]
        step = 1 + (rng.random(n) * np.maximum(r - 1, 1)).astype(np.int64)
        pts[np.arange(n), which] = np.where(r > 1, (pts[np.arange(n), which] + step) % r,
                                            pts[np.arange(n), which])
        return pts

    def index_of(self, pts: np.ndarray) -> np.ndarray:
        """Mixed-radix index of each point (grid order)."""
        pts = np.atleast_2d(pts)
        out = np.zeros(len(pts), np.int64)
        for j, r in enumerate(self.radix):
            out = out * r + pts[:, j]
        return out

    def from_index(self, idx) -> np.ndarray:
        idx = np.atleast_1d(np.asarray(idx, np.int64)).copy()
        out = np.zeros((len(idx), len(self.radix)), np.int64)
        for j in range(len(self.radix) - 1, -1, -1):
            idx, out[:, j] = np.divmod(idx, self.radix[j])
        return out


__all__ = ["Task", "TaskError", "TunerSpace", "task_from_spec", "balanced", "workload_key", "ORDERS",
           "AT_LEVELS", "VTHREAD_AXES", "DOUBLE_BUFFER"]
