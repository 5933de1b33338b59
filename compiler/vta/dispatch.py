"""Which knobs :func:`compiler.build` uses for a workload when it is given none: the best
record of the tuning logs made active by :func:`compiler.tuner.apply_history_best`.

This module imports nothing from the compiler, so that :mod:`compiler.vta.pipeline` can consult
it without depending on the tuner (the context holds any object with a
``knobs_for(workload, cfg)`` method: :class:`compiler.tuner.HistoryBest`).
"""

from __future__ import annotations

import contextvars

CONTEXT: contextvars.ContextVar = contextvars.ContextVar("vta_tuning_history", default=None)


def dispatch_knobs(wl, cfg):
    """The knobs the active context gives ``wl`` (None outside any context, or for a
    workload its logs do not cover)."""
    ctx = CONTEXT.get()
    return None if ctx is None else ctx.knobs_for(wl, cfg)


__all__ = ["CONTEXT", "dispatch_knobs"]
