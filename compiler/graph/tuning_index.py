"""The best schedules of a tuning log (``vta tune``), looked up per VTA layer at code
generation."""

from __future__ import annotations

from .ir import GraphError


class TuningIndex:
    """The best records of a tuning log (``vta tune``), looked up per layer: first by the
    exact workload key, then by the same GEMM shape with any epilogue (a log tuned on the
    benchmark's layers covers the network's fused layers, whose epilogues differ); a record
    whose knobs do not fit the layer (its epilogue needs more SRAM) is skipped."""

    def __init__(self, log: str):
        import os
        if not os.path.isfile(log):
            raise GraphError(f"--tuning-log {log}: no such file")
        try:
            from compiler.tuner.records import best_by_workload, config_key, load
        except ImportError:
            raise GraphError(f"--tuning-log {log}: the tuner (compiler.tuner) is not "
                             f"available in this build") from None
        try:
            recs = load(log)
        except ValueError as e:                  # TuningLogError: names the line
            raise GraphError(f"--tuning-log {log}: {e}") from None
        self.config_key = config_key
        self.exact = best_by_workload(recs)
        self.loose: dict = {}
        for (wk, ck), r in self.exact.items():
            k = (_shape_key(wk), ck)
            if k not in self.loose or r.cycles < self.loose[k].cycles:
                self.loose[k] = r
        self.log = log

    def knobs(self, out, cfg):
        """(Knobs or None, how): how = "tuned", "tuned (other epilogue)" or "".  ``out``: a
        layer's TE output (a fused conv + max pool's carries its
        :class:`compiler.vta.conv_pool.ConvPoolWorkload` as ``out.conv_pool``, keyed by
        :func:`compiler.tuner.conv_pool_space.conv_pool_key`) or a recognised workload."""
        from compiler.te.errors import CompilerError
        from compiler.vta.workload import GemmWorkload, recognise
        from compiler.vta.schedule import Knobs
        from compiler.tuner.space import workload_key
        fused = getattr(out, "conv_pool", None)
        if fused is not None:
            from compiler.vta.conv_pool import plan
            wl = fused

            def fits(kn):
                plan(fused, cfg, kn)
        else:
            wl = out if isinstance(out, GemmWorkload) else recognise(out, cfg)  # or a built one

            def fits(kn):
                kn.check(wl)
        wk, ck = workload_key(wl), self.config_key(cfg)
        for table, key, how in ((self.exact, (wk, ck), "tuned"),
                                (self.loose, (_shape_key(wk), ck), "tuned (other epilogue)")):
            r = table.get(key)
            if r is not None:
                try:
                    kn = Knobs.from_dict(r.knobs)
                    fits(kn)
                    return kn, how
                except (ValueError, *CompilerError):
                    continue
        return None, ""


def _shape_key(wk: str) -> str:
    import re
    return re.sub(r",ep=[^,]*,", ",ep=*,", wk)
