"""The simulator's timing parameters for the PYNQ board (the reference VTA platform)."""

from __future__ import annotations


def pynq_timing():
    """The simulator's timing parameters for a Pynq-like memory system (64-bit bus)."""
    import vta_sim
    tp = getattr(vta_sim, "TimingParams", None)
    if tp is None:
        from vta_sim.timing import TimingParams as tp  # noqa: N813
    for name in ("pynq", "pynq_like", "PYNQ"):
        f = getattr(tp, name, None)
        if callable(f):
            return f()
    # Pynq (spec 5.2/5.4): 64-bit AXI, 256-beat (2 KiB) bursts, 128-instruction fetch bursts,
    # a Zynq-like DRAM latency.
    return tp(bus_bytes=8, max_burst_beats=256, fetch_burst_insns=128, read_latency=64)
