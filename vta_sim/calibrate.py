"""Fitting :class:`TimingParams` to measured cycle counts (e.g. from the RTL, vta_hw).

The timing model is cheap to evaluate (:func:`vta_sim.timing.cycles`), so a derivative-free
coordinate search over the integer parameters is enough.  Here the "measurements" come
from the model itself with a read latency of 40, and the fit recovers it::

    from vta_sim.calibrate import fit
    from vta_sim.randprog import random_program
    from vta_sim.timing import TimingParams, cycles
    truth = TimingParams(read_latency=40)
    programs = [random_program(rng=seed)[0] for seed in range(4)]
    samples = [(insns, cycles(insns, truth)) for insns in programs]
    params, rms = fit(samples, names=["read_latency"], rounds=8)   # rms relative error
    assert rms < 0.02 and abs(params.read_latency - 40) <= 4

Each sample is ``(insns, measured_cycles)`` or ``(insns, measured_cycles, serial)``.
"""

from __future__ import annotations

from isa import VTAConfig, decode_stream

from .timing import TimingParams, simulate_timing

__all__ = ["fit", "relative_errors"]


def _decoded(samples, config):
    cfg = config or VTAConfig()
    return [(s[0] if not isinstance(s[0], (bytes, bytearray, memoryview))
             else decode_stream(bytes(s[0]), cfg, strict=False),
             s[1], bool(s[2]) if len(s) > 2 else False) for s in samples]


def relative_errors(samples, params: TimingParams, config: VTAConfig | None = None) -> list:
    """``model / measured - 1`` for every sample (insns as bytes or a decoded InsnArray)."""
    return [simulate_timing(arr, params, serial=serial).cycles / measured - 1.0
            for arr, measured, serial in _decoded(samples, config)]


def fit(samples, names, start: TimingParams | None = None, config: VTAConfig | None = None,
        rounds: int = 40, max_value: int = 1 << 16, pairs: bool | None = None):
    """Coordinate search minimising the sum of squared relative errors.

    Parameters
    ----------
    samples : list of (insns, measured_cycles[, serial])
    names : list of str
        The integer TimingParams fields to fit; the others keep their ``start`` values.
    start : TimingParams
        Initial point (default: the defaults).
    rounds : int
        Passes over the parameters; each pass tries steps of +-1 and multiplicative steps.
    pairs : bool, optional
        Also try moving two parameters at once (valleys); default: when at most 6 names.

    Returns
    -------
    (TimingParams, float)
        The fitted parameters and their root-mean-square relative error.
    """
    params = start or TimingParams()
    for n in names:
        if not isinstance(getattr(params, n, None), int):
            raise ValueError(f"{n!r} is not an integer timing parameter")

    samples = _decoded(samples, config)
    if pairs is None:
        pairs = len(names) <= 6

    def cost(p):
        errs = relative_errors(samples, p, config)
        return sum(e * e for e in errs) / max(1, len(errs))

    best = cost(params)
    for _ in range(rounds):
        improved = False
        for n in names:
            v = getattr(params, n)
            cands = {v - 1, v + 1, v * 2, v // 2, int(v * 1.25), int(v * 0.8), v + 4, v - 4}
            for c in sorted(x for x in cands if 0 <= x <= max_value and x != v):
                try:
                    p = params.replace(**{n: c})
                except ValueError:
                    continue
                e = cost(p)
                if e < best - 1e-15:
                    params, best, improved = p, e, True
            # walk further in the winning direction
            while True:
                v2 = getattr(params, n)
                step = v2 - v
                if step == 0 or not 0 <= v2 + step <= max_value:
                    break
                try:
                    p = params.replace(**{n: v2 + step})
                except ValueError:
                    break
                e = cost(p)
                if e >= best - 1e-15:
                    break
                v, params, best = v2, p, e
        # diagonal moves: parameters often trade off against each other (a valley)
        for i, a in enumerate(names if pairs else ()):
            for b in names[i + 1:]:
                for da in (-2, -1, 1, 2):
                    for db in (-2, -1, 1, 2):
                        va, vb = getattr(params, a) + da, getattr(params, b) + db
                        if not (0 <= va <= max_value and 0 <= vb <= max_value):
                            continue
                        try:
                            p = params.replace(**{a: va, b: vb})
                        except ValueError:
                            continue
                        e = cost(p)
                        if e < best - 1e-15:
                            params, best, improved = p, e, True
        if not improved or best == 0:
            break
    return params, best ** 0.5
