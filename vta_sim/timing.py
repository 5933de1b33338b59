"""Cycle-approximate timing of a VTA program (issue 3; structure of spec §5.2, the Chisel RTL).

The model is a discrete-event simulation at the granularity of instructions and DRAM bursts
(never elements), independent of the data but for the micro-ops of a fused vector chain (the
functional run reports them), so it runs next to the functional core or alone
(:func:`simulate_timing`, :func:`cycles`):

* **fetch** reads the stream ``fetch_burst_insns`` instructions at a time over the shared
  DRAM read channel (client ``fetch``), then drains it one instruction per
  ``fetch_drain_cycles``, each from ``fetch_queue_cycles`` after its last beat, into the
  load/compute/store command queues (``cmd_queue_depth`` entries each).  A full queue
  blocks the drain (head-of-line blocking).  With ``fetch_overlap`` the next burst is
  requested as soon as the last one has arrived and a two-burst buffer has room for it;
  with the in-order DRAM (``read_in_order``) a burst's instructions stream in as their
  beats arrive (vta_hw), else the whole burst first.
* **load, compute, store** each take the head of their command queue when idle, once every
  token it pops is available (pops when it starts, pushes when it completes; a push into a
  full token queue, ``token_capacity``, waits; pushed tokens become visible
  ``token_latency`` cycles later).  ``dispatch_cycles`` per instruction are the module
  taking it from its queue: with ``dispatch_before_pop`` (vta_hw) they come before the
  token check, from the previous instruction's completion or the instruction's arrival, so
  a module waiting on a token starts ``token_latency`` cycles after the push; otherwise
  after the pops; the store module decodes ``store_decode_cycles`` longer (vta_hw: IDLE ->
  SIZE -> DEP).  Then each instruction costs its own time (vta_hw: from its decode to the
  cycle it completes, whatever comes next):

  - NOP (LOAD/STORE with x_size 0): ``nop_cycles``; FINISH: ``finish_cycles``;
  - GEMM: ``gemm_start_cycles + N * gemm_cycles_per_uop`` (N = uop-iterations, reset too);
  - ALU: ``alu_start_cycles + N * (alu_cycles_per_uop_imm | alu_cycles_per_uop_vec)``;
  - LOAD (UOP/INP/WGT/ACC/ACC_8BIT): ``load_setup_cycles``, then one read request per burst
    (a burst per row with ``burst_per_row``; rows split at ``max_burst_beats`` and at aligned
    burst boundaries), completing when the last burst has arrived plus
    ``load_write_cycles``.  Zero padding (``pad_cycles_per_tile`` per tile) is written with
    ``load_pad_overlap`` (vta_hw) in the cycles without a data beat, so the load lasts at
    least setup + pad + data cycles (with ``pad_zero_side``, vta_hw's loader: the zero side
    run against the load's own data bursts, a padding tile per cycle without a data beat, a
    counter reload of ``pad_row_cycles`` per data row in any cycle); otherwise the
    ``y_pad_0`` rows before the requests and the rest after the data.  With
    ``load_elem_per_cycle`` a burst of elements narrower than the bus (micro-ops on a 64-bit
    bus) holds the read channel one cycle per element;
  - STORE: ``store_setup_cycles`` + per burst ``write_burst_overhead`` + data beats +
    ``store_cycles_per_tile`` per tile (one write channel, one burst at a time).
* **DRAM read channel**, one data bus of ``bus_bytes`` per cycle, two disciplines:

  - ``read_in_order`` (vta_hw's ReadArbiter and DRAM): a request is accepted into one
    in-order queue, one per cycle, while fewer than ``max_outstanding_reads`` accepted
    bursts have not delivered their data (a slot frees ``read_free_cycles`` after its
    burst's last beat; the earliest in ``read_priority`` among the clients waiting wins;
    vta_hw: fetch, then the compute module's uop/acc, then the load module's inp/wgt); its
    data starts ``read_latency`` cycles after the acceptance or
    after the previous burst's data (plus ``read_burst_gap``), whichever is later.  A
    request therefore waits behind every burst accepted before it, e.g. a one-micro-op LOAD
    UOP behind a whole weight row;
  - otherwise (Chisel VME): a burst is ready ``read_latency`` cycles after its request
    (requests queued behind others overlap their latency), then occupies the bus for its
    beats plus ``read_burst_gap``; when several clients have a ready burst the one earliest
    in ``read_priority`` wins (fetch, uop, inp, wgt, acc); at most
    ``max_outstanding_reads`` bursts are in flight (a burst is accepted only when the one
    that many bursts earlier has delivered its data).

``serial=True`` makes every instruction wait until the previous one (in stream order) has
completed: the reference runtime's force-serial mode.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from isa import Opcode, VTAConfig, decode_stream

from .errors import InputError
from .timing_engine import CLIENTS, Engine, expand_reads
from .timing_names import LazyNames

__all__ = ["TimingParams", "TimingResult", "simulate_timing", "cycles", "CLIENTS", "PRESETS",
           "PRESET_CORES", "preset_for_core"]

#: vta_hw's read arbiter order: fetch, the compute module (micro-ops, accumulators), the
#: load module (inputs, weights)
VTA_HW_PRIORITY = ("fetch", "uop", "acc", "inp", "wgt")



#: The Chisel design under TVM's tsim (spec §5.2): the defaults of this model until issue 19.
#: Every field is given, so the preset does not move when the defaults are re-fitted.
_TSIM = dict(read_latency=16, read_burst_gap=1, read_pipelined=True, max_outstanding_reads=16,
             max_burst_beats=16, burst_boundary_bytes=None, write_burst_overhead=4,
             fetch_burst_insns=None, fetch_drain_cycles=1, fetch_overlap=False,
             cmd_queue_depth=512, token_capacity=255, token_latency=1, dispatch_cycles=1,
             nop_cycles=1, finish_cycles=1, gemm_start_cycles=7, gemm_cycles_per_uop=1,
             alu_start_cycles=6, alu_cycles_per_uop_imm=1, alu_cycles_per_uop_vec=2,
             load_setup_cycles=2, load_write_cycles=1, load_elem_per_cycle=False,
             pad_cycles_per_tile=1, store_setup_cycles=2, store_cycles_per_tile=1,
             burst_per_row=False, read_in_order=False, load_pad_overlap=False,
             dispatch_before_pop=False, read_priority=CLIENTS, store_decode_cycles=0,
             read_free_cycles=0, pad_zero_side=False, fuse_clamp=False, fetch_queue_cycles=0)

#: This project's RTL (vta_hw) as the default models it (the ``vta_hw_rtl`` preset at issue
#: 19's re-fit), every field given: the structure and costs the ``vta_hw`` and ``vta_hw_fpga``
#: presets start from and override only where their cores and DRAM differ, so they do not
#: move when the defaults are re-fitted.
_VTA_HW_RTL = dict(read_latency=16, read_burst_gap=0, read_pipelined=True,
                   max_outstanding_reads=4, read_in_order=True, read_free_cycles=1,
                   max_burst_beats=1 << 24,
                   burst_boundary_bytes=None, read_priority=VTA_HW_PRIORITY,
                   write_burst_overhead=6, burst_per_row=True, fetch_burst_insns=8,
                   fetch_drain_cycles=1, fetch_overlap=True, fetch_queue_cycles=2,
                   cmd_queue_depth=512, token_capacity=65535, token_latency=1,
                   dispatch_cycles=2,
                   dispatch_before_pop=True, store_decode_cycles=1, nop_cycles=0,
                   finish_cycles=1, gemm_start_cycles=8, gemm_cycles_per_uop=1,
                   alu_start_cycles=4, alu_cycles_per_uop_imm=1, alu_cycles_per_uop_vec=1,
                   load_setup_cycles=4, load_write_cycles=2, load_elem_per_cycle=True,
                   pad_cycles_per_tile=1, load_pad_overlap=True, store_setup_cycles=0,
                   store_cycles_per_tile=0, pad_row_cycles=1, launch_cycles=0,
                   pad_zero_side=True, fuse_clamp=True)

#: The costs ``benchmarks/bench_timing_refit.py --preset vta_hw`` fitted (2026-11-27) on the
#: vta_hw core in Amaranth's simulator with the on-chip DRAM of latency 4
#: (``vta_hw/calibration/timing_amaranth.json``).
_VTA_HW_COSTS = dict(read_latency=4, write_burst_overhead=4, nop_cycles=1, alu_start_cycles=3,
                     load_setup_cycles=5, load_write_cycles=1, pad_row_cycles=1,
                     read_free_cycles=0, pad_zero_side=False, finish_cycles=2,
                     fetch_queue_cycles=0)
#: The costs ``bench_timing_refit.py --preset vta_hw_fpga`` fitted (2026-11-27) on the FPGA
#: core (``alu_stages=3``: 3 cycles per ALU micro-op; on-chip DRAM of latency 8;
#: ``vta_hw/calibration/timing_fpga.json``).
_VTA_HW_FPGA_COSTS = dict(read_latency=9, write_burst_overhead=4, fetch_drain_cycles=5,
                          dispatch_cycles=1, store_decode_cycles=3, gemm_start_cycles=10,
                          alu_start_cycles=5, alu_cycles_per_uop_imm=3,
                          alu_cycles_per_uop_vec=3, load_setup_cycles=2, pad_row_cycles=1,
                          launch_cycles=1, read_free_cycles=0, pad_zero_side=False,
                          finish_cycles=2, fuse_clamp=False, fetch_queue_cycles=0)


@dataclasses.dataclass(frozen=True)
class TimingParams:
    """Every number of the timing model.

    The defaults model this project's own hardware: the vta_hw RTL with the cocotb DRAM model
    of read latency 16 (``vta rtl``, Icarus or Verilator): its structure (in-order DRAM,
    decode before the token check, 8-instruction fetch bursts, padding under the data) and
    its costs, as set by ``benchmarks/bench_timing_refit.py``
    (``vta_hw/calibration/timing_icarus.json``; a test keeps the two equal).  Other memory
    systems are named presets (:meth:`preset`, :data:`PRESETS`): ``tsim`` is TVM's Chisel
    design under tsim, the defaults before issue 19.  :attr:`name`
    and :meth:`describe` say which model a TimingParams is.

    All values are cycles unless named otherwise.  ``bus_bytes=None`` takes the bus width of
    the VTAConfig (LOG_BUS_WIDTH; 8 bytes by default).
    """

    # memory system
    bus_bytes: int | None = None          #: data bus width in bytes (None: from the config)
    read_latency: int = 16                #: request -> first beat
    read_burst_gap: int = 0               #: idle bus cycles after each read burst
    read_pipelined: bool = True           #: queued requests overlap their latency (AXI ids);
    #: False: one burst in flight, each pays read_latency after the channel frees
    max_outstanding_reads: int | None = 4  #: bursts in flight at most (None: unlimited)
    read_in_order: bool = True            #: the DRAM queues each burst when it is accepted
    #: (at most max_outstanding_reads accepted and not yet delivered, one acceptance per
    #: cycle, read_priority among the requests waiting) and serves bursts in acceptance
    #: order, so a request waits behind every burst accepted before it (vta_hw's ReadArbiter
    #: and DRAM); False: the read bus is arbitrated each time it frees (Chisel VME)
    read_free_cycles: int = 1             #: with ``read_in_order``: cycles after a burst's
    #: last beat before its slot among the max_outstanding_reads takes another request
    #: (vta_hw_rtl: 1, the arbiter's count of bursts in flight drops the cycle after the last
    #: beat; short bursts, e.g. rows of 1-2 INP tiles, are bound by this round trip)
    max_burst_beats: int = 1 << 24        #: longest burst (vta_hw: a row is one burst of up
    #: to 2**24 beats, its 24-bit length)
    burst_boundary_bytes: int | None = None  #: bursts never cross this (None: max burst size)
    read_priority: tuple = VTA_HW_PRIORITY  #: fixed read arbitration order, highest first
    #: (vta_hw: fetch, the compute module's uop/acc, the load module's inp/wgt)
    write_burst_overhead: int = 6         #: write command + B-response handshake per burst
    burst_per_row: bool = True            #: a LOAD/STORE issues one burst per row even when
    #: its rows are contiguous in DRAM (stride == width; vta_hw), instead of one for them all
    # fetch and queues
    fetch_burst_insns: int | None = 8     #: instructions per fetch (None: one max burst)
    fetch_drain_cycles: int = 1           #: cycles per instruction pushed to a command queue
    fetch_overlap: bool = True            #: request the next fetch burst while draining
    #: (a two-burst buffer; vta_hw) instead of after the drain (Chisel)
    fetch_queue_cycles: int = 2           #: cycles from an instruction's last beat until
    #: it can be drained into its command queue (vta_hw: the fetch buffer's and the command
    #: queue's registers; issue 19's tiny layers, where a request made two cycles early won
    #: the read arbiter over fetch's next burst)
    cmd_queue_depth: int = 512            #: entries of each command queue (instQueueEntries)
    token_capacity: int = 65535           #: largest count of a token queue (Chisel: 255)
    token_latency: int = 1                #: push -> token visible to the consumer
    # modules
    dispatch_cycles: int = 2              #: per instruction: the controller's idle state
    dispatch_before_pop: bool = True      #: a module takes and decodes its next instruction
    #: (dispatch_cycles after the previous one completed or it reached the queue) before it
    #: pops its tokens, so a token pushed while it waits starts it token_latency cycles later
    #: (vta_hw's IDLE -> DEP/DECODE); False: dispatch_cycles are paid after the pops
    store_decode_cycles: int = 1          #: the store module's decode cycles beyond
    #: dispatch_cycles (vta_hw: IDLE -> SIZE -> DEP, one state more than load and compute)
    nop_cycles: int = 0                   #: x_size = 0 "sync" state (vta_hw: completes in
    #: its decode cycle)
    finish_cycles: int = 1                #: FINISH (vta_hw_rtl: 3 from the padded-load
    #: re-fit, which took the 2 cycles every short program was short of, until those 2
    #: cycles went where they are, ``fetch_queue_cycles``; BENCHMARKS.md)
    gemm_start_cycles: int = 8            #: pipeline start + drain of a GEMM (vta_hw: the
    #: micro-op SRAM stage, 6 pipeline stages, the completing cycle)
    gemm_cycles_per_uop: int = 1
    alu_start_cycles: int = 4             #: vta_hw: the micro-op SRAM stage, 2 ALU stages,
    #: the completing cycle (issue 21: one more than the fit before, which a NOP or LOAD UOP
    #: costing one too many hid; back-to-back ALU instructions showed it)
    alu_cycles_per_uop_imm: int = 1
    alu_cycles_per_uop_vec: int = 1       #: Chisel: 2 (two SRAM reads per micro-op)
    load_setup_cycles: int = 4            #: LOAD command decode before the first request
    load_write_cycles: int = 2            #: last beat -> SRAM written
    load_elem_per_cycle: bool = True      #: a LOAD writes at most one SRAM element per cycle:
    #: a burst of elements narrower than the bus takes a cycle per element (vta_hw's loader)
    pad_cycles_per_tile: int = 1          #: writing one zero-padding tile
    load_pad_overlap: bool = True         #: zero padding is written in the cycles without a
    #: data beat, from the first request on (vta_hw's loader), not before and after the data
    store_setup_cycles: int = 0
    store_cycles_per_tile: int = 0        #: SRAM read per OUT tile (besides its data beats)
    pad_row_cycles: int = 1               #: with ``load_pad_overlap``: cycles the zero side
    #: spends per padding run (``y_size + 1`` runs) of a LOAD with padding, besides its
    #: tiles (vta_hw's zero side reloads its counter between runs; visible behind a
    #: low-latency on-chip DRAM, hidden behind the cocotb model's 16 cycles)
    pad_zero_side: bool = True            #: with ``load_pad_overlap`` and ``read_in_order``:
    #: the zero side is run against the load's data bursts (a padding tile in a cycle
    #: without a data beat, a row's counter reload of ``pad_row_cycles`` in any cycle;
    #: vta_hw's loader), instead of the bound setup + pad + data + (rows + 1) *
    #: pad_row_cycles
    fuse_clamp: bool = True               #: fetch joins an ALU MIN/MAX with an immediate
    #: and the next, the same over the same loop (a clamp), or a SHR with an immediate over
    #: rows visited once and up to two clamps, into one compute command, one pass (vta_hw's
    #: core with ``alu_stages`` 1; timing_plan.clamp_pairs)
    launch_cycles: int = 0                #: cycles from the launch to the first fetch
    #: request (vta_hw with ``pipelined=True``: the engine's reset comes from a register)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("read_pipelined", "fetch_overlap", "load_elem_per_cycle",
                          "burst_per_row", "read_in_order", "load_pad_overlap",
                          "dispatch_before_pop", "pad_zero_side", "fuse_clamp"):
                if not isinstance(v, bool):
                    raise ValueError(f"timing parameter {f.name} must be true or false, not "
                                     f"{v!r}")
            elif f.name == "read_priority":
                if sorted(v) != sorted(CLIENTS):
                    raise ValueError(f"read_priority must order exactly {CLIENTS}, not {v!r}")
                object.__setattr__(self, f.name, tuple(v))
            elif v is None and f.name in ("bus_bytes", "burst_boundary_bytes",
                                          "fetch_burst_insns", "max_outstanding_reads"):
                continue
            elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"timing parameter {f.name} must be a non-negative integer, "
                                 f"not {v!r}")
        for name in ("max_burst_beats", "fetch_burst_insns", "cmd_queue_depth",
                     "token_capacity", "max_outstanding_reads"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"timing parameter {name} must be at least 1")
        if self.bus_bytes is not None and self.bus_bytes < 1:
            raise ValueError("timing parameter bus_bytes must be at least 1")

    # ------------------------------------------------------------------ named models
    @classmethod
    def preset(cls, name: str) -> "TimingParams":
        """The named memory-system model ``name`` (one of :data:`PRESETS`)."""
        if name not in PRESETS:
            raise ValueError(f"unknown timing preset {name!r} (known: {', '.join(PRESETS)})")
        return getattr(cls, name)()

    @property
    def name(self) -> str:
        """The preset these parameters equal (the default's is ``vta_hw_rtl``), else
        ``"custom"``."""
        return _preset_name(self)

    def describe(self) -> str:
        """One line naming the model, e.g. for ``vta run`` / ``vta bench`` to print: the
        preset and what it models, or how custom parameters differ from the default."""
        n = self.name
        if n != "custom":
            return f"{n}: {PRESETS[n]}"
        base, mine = TimingParams().to_dict(), self.to_dict()
        diff = ", ".join(f"{k}={v}" for k, v in mine.items() if v != base[k])
        return f"custom: the default ({TimingParams().name}) with {diff}"

    @classmethod
    def vta_hw_rtl(cls) -> "TimingParams":
        """This project's RTL with the cocotb DRAM model of latency 16: the defaults."""
        return cls()

    @classmethod
    def tsim(cls) -> "TimingParams":
        """The Chisel design under tsim (spec §5.2): 16-beat bursts, read latency 16, 16
        reads in flight, no fetch overlap, 8-bit token counters, ALU vector ops 2 cycles per
        micro-op (the defaults before issue 19)."""
        return cls(**_TSIM)

    @classmethod
    def pynq(cls) -> "TimingParams":
        """A Pynq-like memory system (spec §5.2/§5.4) on the tsim design: 64-bit AXI,
        256-beat (2 KiB) bursts, 128-instruction fetch bursts, a Zynq-like DRAM latency of 64
        cycles."""
        return cls(**{**_TSIM, "bus_bytes": 8, "max_burst_beats": 256, "fetch_burst_insns": 128,
                      "read_latency": 64})

    @classmethod
    def vta_hw(cls) -> "TimingParams":
        """This project's RTL in Amaranth's simulator with vta_hw's on-chip DRAM of latency 4
        (``RtlDevice(simulator="amaranth")``, ``vta rtl --simulator amaranth``): the default's
        structure with the costs ``benchmarks/bench_timing_refit.py --preset vta_hw`` fitted
        on that core (``vta_hw/calibration/timing_amaranth.json``, which records the errors;
        BENCHMARKS.md "Timing presets re-fitted").  The DRAM model ``vta_hw`` of ``vta dse``."""
        return cls(**{**_VTA_HW_RTL, **_VTA_HW_COSTS})

    @classmethod
    def vta_hw_fpga(cls) -> "TimingParams":
        """The FPGA variant of this project's RTL (the core of ``vta hw build`` and
        ``BoardDevice``: ``alu_stages=3``, the tensor ALU issuing a micro-op per 3 cycles;
        vta_hw's on-chip DRAM of latency 8): the default's structure with the costs
        ``benchmarks/bench_timing_refit.py --preset vta_hw_fpga`` fitted on that core, in the
        default configuration and the board's 1x8x8 (``vta_hw/calibration/timing_fpga.json``
        and ``fpga_hw.json``, the ``vta sim --hw`` file)."""
        return cls(**{**_VTA_HW_RTL, **_VTA_HW_FPGA_COSTS})

    @classmethod
    def vta_hw_fpga_pipelined(cls) -> "TimingParams":
        """The FPGA core built with ``pipelined=True`` (the ``1x8x8-85f-pipelined`` build):
        :meth:`vta_hw_fpga` plus the cycles the pipelining adds (vta_hw.blocks.core): one per
        ALU instruction (the ALU lane split over its issue cycles, its ACC read registered)
        and one per launch (the engine's reset from a register)
        (``vta_hw/calibration/timing_fpga_pipelined.json``)."""
        base = cls.vta_hw_fpga()
        return base.replace(alu_start_cycles=base.alu_start_cycles + 1,
                            launch_cycles=base.launch_cycles + 1)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["read_priority"] = list(self.read_priority)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "timing parameters") -> "TimingParams":
        if not isinstance(d, dict):
            raise InputError(f"{where}: expected an object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise InputError(f"{where}: unknown parameter(s) {sorted(unknown)}")
        try:
            return cls(**d)
        except (ValueError, TypeError) as e:
            raise InputError(f"{where}: {e}") from None

    def replace(self, **kw) -> "TimingParams":
        return dataclasses.replace(self, **kw)


#: The named timing models, default first: name -> what it models (:meth:`TimingParams.preset`).
PRESETS = {
    "vta_hw_rtl": "this project's RTL (vta_hw) with the cocotb DRAM model of read latency 16 "
                  "(`vta rtl`): its structure and costs, set by "
                  "benchmarks/bench_timing_refit.py (vta_hw/calibration/timing_icarus.json)",
    "vta_hw": "vta_hw in the Amaranth simulator with on-chip DRAM of latency 4 (`vta rtl "
              "--simulator amaranth`; vta dse's vta_hw DRAM model), fitted by "
              "benchmarks/bench_timing_refit.py --preset vta_hw",
    "vta_hw_fpga": "the FPGA core of vta_hw (vta hw build, BoardDevice: ALU 3 cycles per "
                   "micro-op, on-chip DRAM of latency 8), fitted by "
                   "benchmarks/bench_timing_refit.py --preset vta_hw_fpga",
    "vta_hw_fpga_pipelined": "the FPGA core built with pipelined=True (1x8x8-85f-pipelined): "
                             "vta_hw_fpga plus a cycle per ALU instruction and per launch",
    "tsim": "TVM's Chisel VTA under tsim (spec 5.2): 16-beat bursts, read latency 16",
    "pynq": "the Chisel design on a Pynq-like DDR: 256-beat bursts, read latency 64",
}


#: The core and memory system each vta_hw preset models (what :func:`preset_for_core` maps
#: and ``benchmarks/probe_preset_cycles.py`` runs): ``dram`` "model" is the DRAM model of the
#: Verilator/Icarus runners (vta_hw.runners.cocotb_tb.DramModel, write_latency 2), "onchip"
#: vta_hw's OnChipDram (the Amaranth runner, the FPGA top level); ``latency`` its read
#: latency; ``alu_stages`` / ``pipelined`` the core generator's options (vta_hw.blocks.core).
PRESET_CORES = {
    "vta_hw_rtl": dict(dram="model", latency=16, alu_stages=1, pipelined=False),
    "vta_hw": dict(dram="onchip", latency=4, alu_stages=1, pipelined=False),
    "vta_hw_fpga": dict(dram="onchip", latency=8, alu_stages=3, pipelined=False),
    "vta_hw_fpga_pipelined": dict(dram="onchip", latency=8, alu_stages=3, pipelined=True),
}

#: simulator -> (its DRAM, its default read latency)
_SIMULATOR_DRAM = {"verilator": ("model", 16), "icarus": ("model", 16),
                   "amaranth": ("onchip", 4), "board": ("onchip", 8)}


def preset_for_core(simulator: str = "verilator", latency: int | None = None, *,
                    alu_stages: int | None = None, pipelined: bool = False) -> str | None:
    """The timing preset that models a vta_hw core, or None when no preset does.

    ``simulator``: "verilator" / "icarus" (the DRAM model, latency 16 by default), "amaranth"
    (the on-chip DRAM, latency 4) or "board" (an FPGA build, real or simulated: the on-chip
    DRAM of latency 8, ``alu_stages`` 3 by default); ``latency``: the DRAM read latency (default:
    the simulator's); ``alu_stages`` / ``pipelined``: the core options (default ``alu_stages``
    1, on a board 3).  E.g. ``RtlDevice()`` -> ``vta_hw_rtl``, the ``1x8x8-85f-pipelined`` build
    -> ``vta_hw_fpga_pipelined``.  The presets also assume the configuration they were
    fitted on only through the bus width and buffer sizes the model reads from the
    program's configuration."""
    if simulator not in _SIMULATOR_DRAM:
        raise ValueError(f"unknown simulator {simulator!r} (known: {', '.join(_SIMULATOR_DRAM)})")
    dram, lat = _SIMULATOR_DRAM[simulator]
    if alu_stages is None:
        alu_stages = 3 if simulator == "board" else 1
    want = dict(dram=dram, latency=lat if latency is None else latency, alu_stages=alu_stages,
                pipelined=bool(pipelined))
    return next((n for n, core in PRESET_CORES.items() if core == want), None)


@functools.lru_cache(maxsize=64)
def _preset_name(params: TimingParams) -> str:
    for n in PRESETS:
        if params == TimingParams.preset(n):
            return n
    return "custom"


@dataclasses.dataclass
class TimingResult:
    """Per-instruction times and aggregate statistics of one timed run.

    ``insns`` is the decoded program (:class:`isa.InsnArray`); ``names[i]`` a short name
    ("LOAD INP", "GEMM", "ALU ADD imm", "NOP", ...); ``start[i]``/``end[i]``: cycle
    instruction i started (its ``dispatch_cycles`` decode, then its own time; with
    ``dispatch_before_pop`` the decode ran before its pops, so a token it popped may have
    been pushed up to ``dispatch_cycles - token_latency`` cycles after ``start[i]``) and
    completed (before its pushes); ``issue[i]``: cycle it reached its command queue.
    ``bursts``: (client, start, end, bytes) of every DRAM read burst and write burst (client
    ``store``); ``flows``: (queue, producer, consumer) of every token; ``fetch``: (start, end)
    of every fetch burst including its drain; ``model``: the name of the timing parameters
    (:attr:`TimingParams.name`, also ``timing_model`` in :meth:`summary`).
    """

    insns: object
    module: np.ndarray
    names: list
    start: np.ndarray
    end: np.ndarray
    issue: np.ndarray
    cycles: int
    busy: dict
    stalls: dict
    dram_read: dict
    dram_written: int
    gemm_ops: int
    bus_bytes: int
    last_insn: int
    bursts: list
    flows: list
    fetch: list
    serial: bool
    model: str = "custom"

    def __post_init__(self):
        if isinstance(self.bursts, _Deferred):
            # the engine's burst log with its marks of read bursts: expanded on first use
            # (__getattr__), so a run whose bursts no one reads does not build them
            self.__dict__["_bursts_of"] = self.__dict__.pop("bursts")

    def __getattr__(self, name):
        # only for attributes not set: ``bursts`` before its first use
        d = self.__dict__.get("_bursts_of") if name == "bursts" else None
        if d is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.bursts = b = d()
        del self.__dict__["_bursts_of"]
        return b

    def __getstate__(self):
        self.bursts                         # (a pickle or copy holds the bursts themselves)
        return self.__dict__

    def summary(self) -> dict:
        """Flat JSON-ready statistics (merged into ``Stats.as_dict()``)."""
        total_read = sum(self.dram_read.values())
        stall_items = [(f"{m} waiting on {q}", c) for m, d in self.stalls.items()
                       for q, c in d.items() if c]
        big = max(stall_items, key=lambda x: x[1]) if stall_items else ("none", 0)
        cyc = max(1, self.cycles)
        return {
            "cycles": int(self.cycles),
            "busy_cycles": {m: int(v) for m, v in self.busy.items()},
            "stall_cycles": {m: {q: int(c) for q, c in d.items()} for m, d in
                             self.stalls.items()},
            "dram_read_bytes": {k: int(v) for k, v in self.dram_read.items()},
            "dram_write_bytes": {"store": int(self.dram_written)},
            "dram_bandwidth_bytes_per_cycle": (total_read + self.dram_written) / cyc,
            "dram_bandwidth_utilization": (total_read + self.dram_written)
            / (cyc * self.bus_bytes),
            "gemm_utilization": self.gemm_ops / cyc,
            "last_insn": int(self.last_insn),
            "biggest_stall": f"{big[0]} ({int(big[1])} cycles)",
            "serial": self.serial,
            "timing_model": self.model,
        }


def cycles(insns, params: TimingParams | None = None, config: VTAConfig | None = None,
           serial: bool = False) -> int:
    """Cycle count of a program under ``params`` (convenience for calibration fits; no
    micro-op is known, so a fused vector-operand chain is one pass: ``vector_overlap``)."""
    cfg = config or VTAConfig()
    arr = decode_stream(insns if isinstance(insns, (bytes, bytearray)) else bytes(insns), cfg,
                        strict=False)
    return simulate_timing(arr, params or TimingParams(), serial=serial).cycles


def simulate_timing(arr, params: TimingParams | None = None, *, serial: bool = False,
                    initial_tokens=None, record: bool = True,
                    lists: dict | None = None, tokens=None,
                    prepared: dict | None = None, overlap=()) -> TimingResult:
    """Time a decoded, already-validated program (an :class:`isa.InsnArray`).

    ``record=False`` keeps no DRAM bursts, token flows or fetch log (the Chrome trace and the
    timeline need them; the statistics do not), so the model's memory beyond the program
    itself is a few integers per instruction (start, end, issue cycles).  ``lists``: the
    program's columns as Python lists, when the caller has them already (the simulator's
    functional run), so they are not built twice; ``tokens``: likewise its (modules array,
    pops, pushes) (:func:`vta_sim.checks.modules_of`, :func:`vta_sim.checks.token_lists`);
    ``prepared``: a dict the caller keeps for this program (all its columns, ``dram_base``
    included; the simulator's prepared stream), where the event loop keeps, per parameters,
    what depends on the program and the parameters only (the instructions' fixed times and
    LOAD/STORE burst trains), so a later run of the same program does not compute it again
    (the tables of the ``timing_engine.PREPARED_PARAMS`` most recently used parameter sets
    are kept); the event loop runs every time.  ``overlap``: the functional run's
    ``timing_plan.vector_overlap`` chains (a second pass).

    Raises
    ------
    DeadlockError
        when finite command or token queues block the program (the functional core, with
        unbounded queues, may still accept it).
    """
    params = params or TimingParams()
    s = Engine(arr, params, serial, initial_tokens, record, lists, tokens, prepared, overlap)
    s.run()
    start, ends, issue = s.results()
    last = int(np.argmax(ends)) if s.n else -1
    op = arr.cols["opcode"]
    fin = np.flatnonzero(op == Opcode.FINISH)
    total = int(ends.max()) if s.n else 0
    names = LazyNames(arr)
    return TimingResult(insns=arr, module=s.modarr, names=names, start=start, end=ends,
                        issue=issue, cycles=total, busy=s.busy,
                        stalls={k: v for k, v in s.stalls.items()}, dram_read=s.dram_read,
                        dram_written=s.dram_written, gemm_ops=s.gemm_ops, bus_bytes=s.bus,
                        last_insn=last if not fin.size or ends[fin[-1]] < total
                        else int(fin[-1]), bursts=_Deferred(s) if record else s.bursts,
                        flows=s.flows,
                        fetch=s.fetch_log, serial=serial, model=params.name)


class _Deferred:
    """An engine's burst log, expanded when called (:meth:`Engine.burst_log`); it keeps the
    log and the slot cycles, not the engine."""

    __slots__ = ("args",)

    def __init__(self, engine):
        self.args = (engine.bursts, engine.accepted, -engine._in_order[3], engine.free)

    def __call__(self) -> list:
        return expand_reads(*self.args)
