"""Counters of one simulator run (the fsim profiler counters of spec §3.11, plus a few more)."""

from __future__ import annotations

import dataclasses

__all__ = ["Stats"]


@dataclasses.dataclass
class Stats:
    """Counters of one :meth:`Simulator.run`.

    The first seven are exactly the fsim profiler counters (spec §3.11):

    * ``gemm_ops``: ``iter_out * iter_in * (uop_end - uop_bgn)`` summed over non-reset GEMMs;
    * ``alu_ops``: the same for ALU instructions;
    * ``*_load_bytes``: ``x_size * y_size * tile bytes`` (pads not counted; ACC_8BIT counts the
      full ACC tile size, as fsim does);
    * ``out_store_bytes``: ``x_size * y_size * OUT tile bytes``.

    The others count instructions by kind; ``work`` is the simulated work that ``max_work``
    caps.  ``timing`` holds the cycle statistics when the simulator has a timing model.
    """

    gemm_ops: int = 0
    alu_ops: int = 0
    inp_load_bytes: int = 0
    wgt_load_bytes: int = 0
    acc_load_bytes: int = 0
    uop_load_bytes: int = 0
    out_store_bytes: int = 0
    insn_count: int = 0
    load_count: int = 0
    store_count: int = 0
    gemm_count: int = 0
    alu_count: int = 0
    nop_count: int = 0
    reset_ops: int = 0
    gemm_macs: int = 0
    work: int = 0
    timing: dict | None = None

    def as_dict(self) -> dict:
        """All counters as a JSON-ready dict (timing statistics merged in at the top level)."""
        d = dataclasses.asdict(self)
        timing = d.pop("timing")
        if timing:
            d.update(timing)
        return d

    def __getitem__(self, key):
        return self.as_dict()[key]
