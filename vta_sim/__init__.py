"""The VTA simulator: bit-exact semantics of the reference functional simulator (fsim), the
load, compute and store modules running concurrently under the dependency-token queues, and
a cycle-approximate timing model with statistics and traces.

- :mod:`vta_sim.simulator`: :class:`Simulator`, :func:`simulate` (the public entry points);
  :mod:`vta_sim.program`: a prepared (decoded, checked) instruction stream.
- :mod:`vta_sim.checks`: static program checks; :mod:`vta_sim.errors`: typed errors.
- :mod:`vta_sim.compute`: vectorised GEMM/ALU; :mod:`vta_sim.gemm_plan` /
  :mod:`vta_sim.alu_plan`: an instruction as one matrix product / one vectorised step,
  planned once per shape and cached; :mod:`vta_sim.memory`: LOAD/STORE.
- :mod:`vta_sim.randprog`: random well-formed programs (for differential testing).
- :mod:`vta_sim.timing`: cycle-approximate timing (:class:`TimingParams`, default: this
  project's RTL; named presets), its event loop in :mod:`vta_sim.timing_engine` (DRAM read
  arbitration in :mod:`vta_sim.timing_reads`, fetch in :mod:`vta_sim.timing_fetch`, LOAD/STORE
  bursts in :mod:`vta_sim.timing_transfers`, the per-instruction costs and LOAD/STORE burst
  trains of a whole program at once in :mod:`vta_sim.timing_plan`);
  :mod:`vta_sim.trace`: Chrome trace / Gantt PNG; :mod:`vta_sim.calibrate`: fitting the
  timing parameters to measured cycle counts.
"""

from .errors import (DeadlockError, InputError, LeftoverTokensError, ProgramError, RangeError,
                     SimError, TokenError, UninitializedReadError, WorkLimitError)
from .randprog import random_program
from .simulator import DEFAULT_MAX_WORK, Simulator, simulate
from .stats import Stats
from .timing import TimingParams, TimingResult, cycles, simulate_timing

__all__ = [
    "Simulator", "simulate", "Stats", "DEFAULT_MAX_WORK",
    "TimingParams", "TimingResult", "simulate_timing", "cycles", "random_program",
    "SimError", "InputError", "ProgramError", "RangeError", "TokenError", "DeadlockError",
    "LeftoverTokensError", "WorkLimitError", "UninitializedReadError",
]
