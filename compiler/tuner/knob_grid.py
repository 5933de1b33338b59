"""A grid of schedule-knob choices: what :class:`compiler.tuner.space.TunerSpace` (the GEMM
layers' space) and :class:`compiler.tuner.conv_pool_space.ConvPoolSpace` (the fused conv +
max pool's) share.

``dims`` maps knob name -> candidate values; a point is an int row of choice indices in
``dims`` order; ``len(space)`` counts points, valid or not.  A subclass says what its points
mean: :meth:`KnobGrid._accepts` (is a point's schedule buildable), and the errors of
:meth:`KnobGrid.point` for a knob outside the grid (:meth:`KnobGrid._not_a_knob`,
:meth:`KnobGrid._not_a_value`); every knob not in ``dims`` must keep its default.
"""

from __future__ import annotations

import math

import numpy as np

from ..vta.schedule import Knobs, ScheduleError


class KnobGrid:
    """Points of a knob grid (see the module docstring); subclasses call :meth:`_set_dims`."""

    def _set_dims(self, dims: dict) -> None:
        self.dims: dict[str, list] = dims
        self.names = list(dims)
        self.radix = np.array([len(v) for v in dims.values()], np.int64)
        self._valid: dict[bytes, bool] = {}

    def __len__(self) -> int:
        return int(math.prod(int(r) for r in self.radix))

    def knobs(self, p) -> Knobs:
        """The :class:`Knobs` of point ``p`` (a row of choice indices)."""
        return Knobs(**{n: self.dims[n][int(i)] for n, i in zip(self.names, p)})

    def point(self, k: Knobs) -> np.ndarray:
        """The point of knobs ``k``; ScheduleError if a knob outside ``dims`` is not at its
        default, or a value is not in the grid."""
        k = self._normalize(k)
        base = Knobs()
        for name in k.__dataclass_fields__:
            if name not in self.dims and getattr(k, name) != getattr(base, name):
                raise ScheduleError(self._not_a_knob(name, getattr(k, name),
                                                     getattr(base, name)))
        out = []
        for n in self.names:
            v = self._value(n, getattr(k, n))
            if v not in self.dims[n]:
                raise ScheduleError(self._not_a_value(n, getattr(k, n), v))
            out.append(self.dims[n].index(v))
        return np.array(out, np.int64)

    def valid(self, p) -> bool:
        """True if the schedule of point ``p`` is one this space accepts (cached per point)."""
        key = np.asarray(p, np.int64).tobytes()
        ok = self._valid.get(key)
        if ok is None:
            ok = self._valid[key] = bool(self._accepts(self.knobs(p)))
        return ok

    # ------------------------------------------------------------------ subclass hooks
    def _accepts(self, knobs: Knobs) -> bool:
        raise NotImplementedError

    def _normalize(self, k: Knobs) -> Knobs:
        """``k`` as the grid writes it (before :meth:`point` looks it up)."""
        return k

    def _value(self, name: str, value):
        """Knob ``name``'s ``value`` as the grid lists it."""
        return value

    def _not_a_knob(self, name: str, value, default) -> str:
        return f"knob {name}={value!r} is not in this space (it keeps {name}={default!r})"

    def _not_a_value(self, name: str, given, value) -> str:
        return f"knob {name}={given!r} is not in this space ({self.dims[name]!r})"


__all__ = ["KnobGrid"]
