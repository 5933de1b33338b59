"""The simulator's timing parameters for the PYNQ board (the reference VTA platform), and what
bounds a kernel given the simulator's per-module busy cycles (:func:`layer_bound`)."""

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


#: a kernel taking more than this times its busiest unit is bound by dependency stalls
STALL_SLACK = 1.15


def layer_bound(cycles: int, gemm: int, busy: dict, dram_bound: float) -> str:
    """What bounds a kernel: ``GEMM`` or ``ALU`` (the compute module is the busiest unit,
    mostly GEMM micro-ops or mostly the rest: epilogue ALU micro-ops, resets, LOADs into the
    accumulator, which VTA runs in the compute module), ``load``, ``store``, ``DRAM`` (the
    bytes at the bus width take longer than any module is busy) or ``stalls`` (more than
    :data:`STALL_SLACK` times the busiest unit: the modules wait on each other's tokens)."""
    compute = busy.get("compute", 0)
    units = {"compute": compute, "load": busy.get("load", 0), "store": busy.get("store", 0),
             "DRAM": dram_bound}
    top = max(units, key=units.get)
    if cycles > STALL_SLACK * max(units[top], 1):
        return "stalls"
    if top == "compute":
        return "GEMM" if gemm >= compute / 2 else "ALU"
    return top
