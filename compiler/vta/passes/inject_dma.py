"""DMA inference (TVM ``InjectDMAIntrin``): turn each box copy into 2-D LOAD/STORE patterns.

The tensor's tile dimensions are walked from the innermost: trailing dimensions the box
covers completely (statically: full extent from origin 0) merge into one contiguous run
``x``; the next dimension out is the row dimension ``y`` (``x_stride`` = its pitch in
tiles); any dimensions further out are issued as separate DMAs.  Loads may zero-pad the row
and column dimensions where the box leaves the tensor (computed per iteration at emission);
stores may not pad.

Raises
------
DmaError
    for a copy that cannot be expressed (padding on a merged or outer dimension, a store
    that needs padding).
"""

from __future__ import annotations

from ...te.ir import Copy, DmaInsn, transform
from ..schedule import ScheduleError
from ...te import Const


class DmaError(ScheduleError):
    """A copy that has no 2-D DMA form."""


def _full(c: Copy, d: int) -> bool:
    o = c.origin[d]
    return (c.box[d] == c.tensor.shape[d] and isinstance(o, Const) and o.value == 0
            and c.step_of(d) == 1)


def plan(c: Copy) -> DmaInsn:
    nd = len(c.box)
    cols = nd - 1
    while cols > 0 and _full(c, cols):
        cols -= 1          # dims cols+1.. are full: they merge into the x run of dim `cols`
    rows = cols - 1
    outer = tuple((d, c.box[d]) for d in range(max(rows, 0)))
    if c.step_of(cols) != 1 or any(c.step_of(d) != 1 for d, _ in outer):
        raise DmaError(f"copy of {c.tensor.name}: only the row dimension of a DMA can skip "
                       f"elements (x runs are contiguous)")
    if c.direction == "store" and c.pad:
        raise DmaError(f"store to {c.tensor.name}: stores cannot pad")
    return DmaInsn(c.stage, c.direction, c, rows, cols, outer)


def inject_dma(stmt):
    return transform(stmt, lambda s: plan(s) if isinstance(s, Copy) else s)
