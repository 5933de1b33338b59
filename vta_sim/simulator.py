"""The simulator: load, compute and store modules running under the dependency tokens.

A :class:`Simulator` owns the SRAMs and the four token counters of one VTA device and keeps
them across :meth:`Simulator.run` calls, like the hardware (a runtime runs several
instruction streams on one device).
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig, default_config

from . import compute, memory
from ._blas import single_threaded
from .checks import (MODULE_COMPUTE, MODULE_LOAD, MODULE_STORE, MT_UOP, QUEUE_NAMES,
                     check_program)
from .program import (ALU as _ALU, FINISH as _FINISH, GEMM as _GEMM, LOAD as _LOAD,
                      NOP as _NOP, Program, build_program, template, with_dram_base)
from .errors import (DeadlockError, InputError, LeftoverTokensError, ProgramError, SimError,
                     TokenError, UninitializedReadError, WorkLimitError)
from .sram import Sram
from .stats import Stats
from .timing_cache import TimingCache
from .timing_plan import vector_overlap

__all__ = ["Simulator", "simulate", "DEFAULT_MAX_WORK"]

#: Instructions of the prepared streams a Simulator keeps (about 1 KB each).
_PROGRAM_CACHE_INSNS = 200_000
#: Concurrent schedules kept per prepared stream (one per distinct set of initial tokens).
_ORDERS_KEPT = 4
#: Default cap on simulated work per run, in MAC-equivalents (about 5-10 s of simulation).
DEFAULT_MAX_WORK = 10_000_000_000

_MODULE_NAMES = ("load", "compute", "store")


def _as_stream(insns) -> bytes:
    if isinstance(insns, np.ndarray):
        if insns.dtype != np.uint8 or insns.ndim != 1:
            raise InputError(f"the instruction stream must be a 1-D uint8 array or bytes, not "
                             f"{insns.dtype} with shape {insns.shape}")
        insns = insns.tobytes()
    elif not isinstance(insns, (bytes, bytearray, memoryview)):
        raise InputError(f"the instruction stream must be bytes or a uint8 array, not "
                         f"{type(insns).__name__}")
    insns = bytes(insns)
    if len(insns) % 16:
        raise InputError(f"the instruction stream is {len(insns)} bytes, not a multiple of 16: "
                         f"instruction {len(insns) // 16} is truncated", len(insns) // 16)
    return insns


def _check_dram(dram) -> None:
    if not isinstance(dram, np.ndarray):
        raise InputError(f"the DRAM image must be a numpy uint8 array, not "
                         f"{type(dram).__name__}")
    if dram.dtype != np.uint8 or dram.ndim != 1:
        raise InputError(f"the DRAM image must be a 1-D uint8 array, not {dram.dtype} with "
                         f"shape {dram.shape}")
    if not dram.flags.c_contiguous or not dram.flags.writeable:
        raise InputError("the DRAM image must be a contiguous, writeable array (it is modified "
                         "in place)")


class Simulator:
    """A VTA device, functionally exact (the reference fsim's semantics, spec §3).

    Parameters
    ----------
    config : VTAConfig, optional
        Hardware configuration (default: the reference 1x16x16 configuration).
    serial : bool
        Run the instructions strictly in stream order instead of letting the three modules
        run concurrently.  Token pops are still checked: a pop from an empty queue in stream
        order raises :class:`TokenError` (the program is not program-order consistent).
    strict : bool
        Raise :class:`UninitializedReadError` when an instruction reads an SRAM element that
        was never written (fsim leaves the SRAMs uninitialised).
    max_work : int or None
        Cap on the simulated work of one run, in MAC-equivalents (see
        :func:`vta_sim.checks.work_of`); checked before each instruction executes.  ``None``
        disables the cap.
    leftover_tokens : {"error", "keep"}
        What to do with tokens still queued when a run ends: raise
        :class:`LeftoverTokensError`, or keep them for the next run (as the hardware does).
    out_buffer : bool
        Hardware OUT-buffer mode (spec §3.10): STORE reads a separate ACC-indexed OUT buffer
        that only non-reset GEMMs and ALU ops write, as in the HLS and Chisel designs.
        Default False: fsim semantics (STORE reads and truncates ACC).
    timing : TimingParams, True or None
        When given (True = the default TimingParams), every run also computes the cycle-approximate timing model
        (:mod:`vta_sim.timing`); its statistics appear in ``Stats.timing``.  Results are
        unaffected.
    record_timing : bool
        Keep the timing model's DRAM bursts, token flows and fetch log in ``last_timing``
        (what a Chrome trace or a timeline draws).  False keeps only the per-instruction
        cycles (about 80 bytes per instruction on top of the functional run); the statistics
        are the same.
    timing_cache : bool
        Keep the timed result of each stream (:mod:`vta_sim.timing_cache`): a run of the same
        stream bytes from the same tokens under the same parameters (and the same fused
        vector chains with overlapping rows, the only data its cycles depend on) gets a copy
        of it instead of running the timing model again (the functional run still
        executes).  False runs the timing model on every run.

    Attributes
    ----------
    sram : Sram
        The on-chip buffers (kept across runs).  It may be replaced by another Sram, but its
        micro-ops must change only through LOAD UOP (the planned GEMM/ALU instructions are
        looked up by micro-op range until the next LOAD UOP).
    tokens : list of int
        Token counts ``[l2g, g2l, s2g, g2s]`` (kept across runs).
    last_timing : TimingResult or None
        Per-instruction timing of the last run, when a timing model is set.
    last_order : sequence of int
        The order the functional scheduler executed the last run's instructions in.

    Notes
    -----
    When a run raises, the token counters are restored to their values before the run (a
    leftover-token error clears them); the SRAMs keep whatever the partial run wrote.
    """

    def __init__(self, config: VTAConfig | None = None, *, serial: bool = False,
                 strict: bool = False, max_work: int | None = DEFAULT_MAX_WORK,
                 leftover_tokens: str = "error", timing=None, out_buffer: bool = False,
                 record_timing: bool = True, timing_cache: bool = True):
        if config is None:
            config = default_config()
        if not isinstance(config, VTAConfig):
            raise TypeError(f"config must be a VTAConfig, not {type(config).__name__}")
        if leftover_tokens not in ("error", "keep"):
            raise ValueError(f"leftover_tokens must be 'error' or 'keep', not "
                             f"{leftover_tokens!r}")
        if isinstance(max_work, float) and max_work.is_integer():
            max_work = int(max_work)
        if max_work is not None and (not isinstance(max_work, (int, np.integer))
                                     or isinstance(max_work, bool) or max_work < 0):
            raise ValueError(f"max_work must be a non-negative integer or None, not "
                             f"{max_work!r}")
        if timing is not None and timing is not False:
            from .timing import TimingParams
            if timing is True:
                timing = TimingParams()
            elif not isinstance(timing, TimingParams):
                raise TypeError(f"timing must be a TimingParams, True or None, not "
                                f"{type(timing).__name__}")
        else:
            timing = None
        self.config = config
        self.serial, self.strict = bool(serial), bool(strict)
        self.max_work = None if max_work is None else int(max_work)
        self.leftover_tokens = leftover_tokens
        self.timing = timing
        self.record_timing = bool(record_timing)
        self.timing_cache = TimingCache() if timing_cache else None
        self.out_buffer = bool(out_buffer)
        self.sram = Sram(config, self.out_buffer)
        self.tokens = [0, 0, 0, 0]
        self.last_timing = None
        self._programs: dict = {}        # prepared streams, least recently used first
        # GEMM/ALU plans by micro-op range and loop fields, while the micro-ops stay the same
        # (compute.gemm's ``fast``): emptied by every LOAD UOP, and whenever the bounded plan
        # cache has dropped plans or ``sram`` is another Sram (``_fast_of``: the Sram and the
        # cache's evictions when last checked; reset() and a caller's new Sram alike), so
        # that it keeps no plan alive past the cache's bound and never runs on other
        # micro-ops
        self._fast: dict = {}
        self._fast_of = (self.sram, self.sram.plans.evictions)
        self._db_field = config.mem_layout.word_field("dram_base")
        self._program_insns = 0
        # the image and Sram the prepared streams' kept LOAD/STORE views (Program.views)
        # read and write; another image or Sram (buffers included) empties them
        # (_check_views)
        self._views_of = None

    def reset(self) -> None:
        """Forget all SRAM contents and tokens (a fresh device).  The planned GEMM/ALU
        instructions and prepared streams are kept: they depend on no data."""
        plans = self.sram.plans
        self.sram = Sram(self.config, self.out_buffer)
        self.sram.plans = plans
        # the plans by micro-op range are emptied before the next GEMM/ALU runs: ``sram``
        # is not the Sram they were kept for (_execute's check of ``_fast_of``)
        self.tokens = [0, 0, 0, 0]

    # ------------------------------------------------------------------------------ run
    def run(self, insns, dram: np.ndarray) -> Stats:
        """Execute one instruction stream on the DRAM image ``dram`` (modified in place).

        Parameters
        ----------
        insns : bytes or 1-D uint8 array
            The raw instruction stream, 16 bytes per instruction; it must end with FINISH.
        dram : 1-D uint8 array
            The flat DRAM image; every ``dram_base`` counts tiles of its memory type from
            byte 0.

        Returns
        -------
        Stats

        Raises
        ------
        SimError
            (a subclass naming the instruction index and field) for any malformed input or
            program; the DRAM image is untouched when the fault is detected statically.
        """
        data = _as_stream(insns)
        _check_dram(dram)
        prog = self._prepare(data, dram.shape[0])
        arr, n = prog.arr, prog.n
        pops, pushes = prog.pops, prog.pushes
        self._c = prog.c
        self._kind = prog.kind
        self._ops = prog.ops
        self._dram = dram
        self._check_views(dram)
        self._views = prog.views
        stats = Stats()
        self._stats = stats
        self._work = 0
        self._work_list = prog.work
        # the timing model's clamp fusion: which vector-operand chain heads may read a row
        # their own loop writes (timing_plan.vector_overlap, from the micro-ops they ran with)
        self._vheads = prog.vheads if self.timing is not None and \
            self.timing.fuse_clamp and not self.serial else ()
        self._overlap = []
        tokens_before = list(self.tokens)
        try:
            with single_threaded():
                order = self._run_serial(n, pops, pushes) if self.serial else \
                    self._run_kept(prog, tokens_before)
        except SimError:
            self.tokens[:] = tokens_before   # the SRAMs keep what the partial run wrote
            raise
        for k, v in prog.counts.items():
            setattr(stats, k, v)
        stats.work = self._work
        self.last_order = order
        leftover = [(QUEUE_NAMES[q], t) for q, t in enumerate(self.tokens) if t]
        if leftover and self.leftover_tokens == "error":
            self.tokens[:] = [0, 0, 0, 0]    # reported, not carried into the next run
            raise LeftoverTokensError(
                "tokens left over at the end of the run: " +
                ", ".join(f"{t} on {q}" for q, t in leftover) +
                " (every push must be popped; use leftover_tokens='keep' to carry them over)")
        if self.timing is not None:
            cache, res = self.timing_cache, None
            if cache is not None:
                key = cache.key(data, tokens_before, self.timing, self.serial,
                                self.record_timing, self._overlap)
                res = cache.get(key, arr)
            if res is None:
                from .timing import simulate_timing
                res = simulate_timing(arr, self.timing, serial=self.serial,
                                      initial_tokens=tokens_before, record=self.record_timing,
                                      lists=self._c, tokens=(prog.modarr, pops, pushes),
                                      prepared=prog.timing, overlap=self._overlap)
                if cache is not None:
                    cache.put(key, res)
            self.last_timing = res
            stats.timing = res.summary()
        return stats

    def _check_views(self, dram: np.ndarray) -> None:
        """Empty every prepared stream's kept LOAD/STORE views unless they were made for this
        image and this Sram with these buffers (a view keeps its array alive and writes only
        the buffer it was made of)."""
        s = self.sram
        now = (dram, s, s.inp, s.wgt, s.acc, s.out, s.inp_written, s.wgt_written,
               s.acc_written)
        was = self._views_of
        if was is not None and all(a is b for a, b in zip(now, was)):
            return
        for prog in self._programs.values():
            prog.views[:] = [None] * prog.n
        self._views_of = now

    def _prepare(self, data: bytes, dram_bytes: int) -> Program:
        """The decoded, statically checked program with everything the run needs that does
        not depend on the data.

        Cached by the stream with the ``dram_base`` fields of its LOADs and STOREs cleared
        (a runtime runs the same kernels again and again, each time on other buffers): a
        stream that differs from a cached one only in those fields reuses its preparation,
        with its own ``dram_base`` column and its own DRAM range check (the only static check
        that reads ``dram_base`` or the DRAM size).
        """
        key, rows, db = template(data, self._db_field)
        prog = self._programs.get(key)
        if prog is None:
            return self._prepare_new(data, key, rows, db, dram_bytes)
        self._programs[key] = self._programs.pop(key)          # most recently used last
        same = np.array_equal(db, prog.db)
        if prog.ext_rows.size:
            d = db[prog.ext_pos]
            top = int(((d + prog.ext_off) * prog.ext_eb).max())
            if top > dram_bytes:
                # the lowest-index fault, as a fresh preparation reports it
                check_program(with_dram_base(prog, rows, db).cols, self.config, dram_bytes)
        if same:
            return prog
        arr = with_dram_base(prog, rows, db)
        c = dict(prog.c)
        c["dram_base"] = arr.cols["dram_base"].tolist()
        # kept in place of the stream's other buffers (a runtime runs a kernel on the same
        # buffers again and again), sharing the schedules and LOAD views (keyed by
        # dram_base), not the timing model's tables (they read dram_base)
        prog = prog._replace(arr=arr, c=c, db=db, timing={})
        self._programs[key] = prog
        return prog

    def _prepare_new(self, data, key, rows, db, dram_bytes) -> Program:
        """Decode and check a stream whose template ``key`` is not cached, and cache it."""
        prog = build_program(data, rows, db, self.config, dram_bytes)
        if prog.n > _PROGRAM_CACHE_INSNS:
            return prog                      # too big to keep after the run
        self._programs[key] = prog
        self._program_insns += prog.n
        while self._program_insns > _PROGRAM_CACHE_INSNS:
            old = self._programs.pop(next(iter(self._programs)))
            self._program_insns -= old.n
        return prog

    # ------------------------------------------------------------------------ schedulers
    def _run_serial(self, n, pops, pushes):
        tok = self.tokens
        for i in range(n):
            for q in pops[i]:
                if tok[q] == 0:
                    raise TokenError(f"in stream order, this instruction pops an empty "
                                     f"{QUEUE_NAMES[q]} queue (no earlier matching push): the "
                                     f"program is not program-order consistent", i,
                                     _flag_of(self._c, i, q))
                tok[q] -= 1
            self._execute(i)
            for q in pushes[i]:
                tok[q] += 1
        return range(n)

    def _run_kept(self, prog, tokens_before):
        """The concurrent schedule of ``prog``: the order the modules execute in and the
        tokens after it depend only on the program's pops and pushes and the tokens before
        it, so a program run again from the same tokens executes the order of its first run
        (:meth:`_run_concurrent`, which also found it free of deadlocks and FINISH races)."""
        key = tuple(tokens_before)
        kept = prog.orders.get(key)
        if kept is None:
            order = self._run_concurrent(prog.n, prog.mod, prog.pops, prog.pushes)
            if len(prog.orders) < _ORDERS_KEPT:
                prog.orders[key] = (order, tuple(self.tokens))
            return list(order)
        order, after = kept
        execute = self._execute
        for i in order:
            execute(i)
        self.tokens[:] = after
        return list(order)

    def _run_concurrent(self, n, mod, pops, pushes):
        queues = [[], [], []]
        for i, m in enumerate(mod):
            queues[m].append(i)
        heads = [0, 0, 0]
        tok = self.tokens
        remaining = n
        finish = n - 1
        order = []
        while remaining:
            progressed = False
            for m in (MODULE_LOAD, MODULE_COMPUTE, MODULE_STORE):
                q, h = queues[m], heads[m]
                while h < len(q):
                    i = q[h]
                    if any(tok[p] == 0 for p in pops[i]):
                        break
                    if i == finish and remaining > 1:
                        heads[m] = h
                        self._finish_race(queues, heads, finish)
                    for p in pops[i]:
                        tok[p] -= 1
                    self._execute(i)
                    for p in pushes[i]:
                        tok[p] += 1
                    order.append(i)
                    h += 1
                    remaining -= 1
                    progressed = True
                heads[m] = h
            if not progressed:
                self._stuck(queues, heads, pops, finish)
        return order

    def _finish_race(self, queues, heads, finish):
        """FINISH's tokens are available while another instruction has not executed: nothing
        orders that instruction before FINISH, so a legal schedule completes FINISH first."""
        j, m = min((queues[m][heads[m]], m) for m in range(3)
                   if heads[m] < len(queues[m]) and queues[m][heads[m]] != finish)
        flag = {MODULE_LOAD: "pop_prev", MODULE_STORE: "pop_next"}.get(m, "opcode")
        raise ProgramError(f"FINISH can execute before instruction {j} ({_MODULE_NAMES[m]} "
                           f"module): no dependency token orders it before FINISH, so FINISH "
                           f"may complete first (end the program by popping a token from "
                           f"the {_MODULE_NAMES[m]} module before FINISH)", finish, flag)

    def _stuck(self, queues, heads, pops, finish):
        waits = []
        finish_ready = False
        for m in range(3):
            if heads[m] >= len(queues[m]):
                continue
            i = queues[m][heads[m]]
            empty = [QUEUE_NAMES[p] for p in pops[i] if self.tokens[p] == 0]
            if i == finish and not empty:
                finish_ready = True
                continue
            waits.append((i, f"{_MODULE_NAMES[m]} waits at instruction {i} for a token on "
                             f"{' and '.join(empty)}", m))
        if finish_ready:
            i, what, _ = min(waits)
            raise ProgramError(f"FINISH would execute while other instructions are still "
                               f"blocked ({what}): FINISH must be the last instruction to "
                               f"execute", finish, "opcode")
        i, _, m = min(waits)
        raise DeadlockError("deadlock: " + "; ".join(w for _, w, _ in waits), i,
                            _flag_of(self._c, i, pops[i][0]) if pops[i] else None)

    # ------------------------------------------------------------------------ execution
    def _execute(self, i: int) -> None:
        w = self._work_list[i]
        if self.max_work is not None and self._work + w > self.max_work:
            raise WorkLimitError(f"executing this instruction (work {w}) would exceed the "
                                 f"simulated-work cap max_work={self.max_work} (already "
                                 f"{self._work}); raise --max-work to allow it", i, "opcode")
        self._work += w
        k = self._kind[i]
        if k == _NOP or k == _FINISH:
            return
        s = self.sram
        if (k == _GEMM or k == _ALU) and (s is not self._fast_of[0] or
                                           s.plans.evictions != self._fast_of[1]):
            self._fast.clear()               # plans the cache dropped, or of other micro-ops
            self._fast_of = (s, s.plans.evictions)
        if k == _GEMM:
            compute.gemm(s, i, *self._ops[i], self.strict, self._fast)
        elif k == _ALU:
            max_waves = None if self.max_work is None else \
                (self.max_work - self._work) // compute.WAVE_WORK + 1
            if i in self._vheads:
                o = self._ops[i]
                u = o[1]                         # its one micro-op
                if o[2] <= len(s.uop_dst) and \
                        vector_overlap(s.uop_dst[u], s.uop_src[u], *o[3:9]):
                    self._overlap.append(i)
            waves = compute.alu(s, i, *self._ops[i], self.strict, max_waves, self._fast)
            if waves > 1:
                self._work += (waves - 1) * compute.WAVE_WORK
        elif k == _LOAD:
            mt, S, Y, X, P, yp0, yp1, xp0, xp1 = self._ops[i]
            D = self._c["dram_base"][i]
            if mt == MT_UOP:
                self._fast.clear()           # the plans by micro-op range are stale
                memory.load(s, self._dram, mt, S, D, Y, X, P, yp0, yp1, xp0, xp1)
                return
            v = self._views[i]
            if v is None or v[0] != D:       # the same image and Sram (_check_views)
                v = self._views[i] = (D, memory.load_views(s, self._dram, mt, S, D, Y, X, P,
                                                           yp0, yp1, xp0, xp1))
            views = v[1]
            memory.run_views(views)
            if views[3] is not None:
                # its range of the written mask is set now, and nothing clears a mask of this
                # Sram (a new Sram or mask empties the views): later runs leave it
                self._views[i] = (D, views[:3] + (None,))
        else:  # _STORE
            S, Y, X, P = self._ops[i]
            if Y == 0:
                return
            written = s.acc_written if s.out is None else s.out_written
            if self.strict and not written[S:S + Y * X].all():
                t = S + int(np.flatnonzero(~written[S:S + Y * X])[0])
                buf = "ACC" if s.out is None else "OUT"
                raise UninitializedReadError(f"STORE reads {buf} element {t}, which was never "
                                             f"written (strict mode)", i, "sram_base")
            D = self._c["dram_base"][i]
            v = self._views[i]
            if v is None or v[0] != D:       # the same image and Sram (_check_views)
                v = self._views[i] = (D, memory.store_views(s, self._dram, S, D, Y, X, P))
            if v[1] is None:                 # overlapping rows
                memory.store(s, self._dram, S, D, Y, X, P)
            else:
                memory.run_store_views(v[1])

def _flag_of(c: dict, i: int, q: int) -> str:
    """The flag of instruction ``i`` that pops queue ``q``."""
    return {0: "pop_prev", 1: "pop_next", 2: "pop_next", 3: "pop_prev"}[q]


def simulate(insns, dram: np.ndarray, config: VTAConfig | None = None, **kw) -> Stats:
    """One-shot: a fresh :class:`Simulator` (keyword arguments as its) runs ``insns``."""
    return Simulator(config, **kw).run(insns, dram)


SimError = SimError  # re-exported for convenience
