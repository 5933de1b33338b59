"""Search strategies over a :class:`~compiler.tuner.space.TunerSpace`.

Every tuner proposes batches of valid, not yet measured points (:meth:`Tuner.next_batch`)
and learns from their measured cycles (:meth:`Tuner.update`, ``inf`` for a failure):

* :class:`XGBTuner` (AutoTVM's ``XGBTuner``): an XGBoost ranking model
  (:mod:`compiler.tuner.model`) refitted after every batch; simulated annealing over the
  knob space, scored by the model (tens of thousands of candidates per batch), keeps the
  best-predicted unmeasured points; the batch is chosen from them greedily for predicted
  score plus diversity (knob values not yet in the batch), with an epsilon share of random
  points.  With ``transfer`` (histories of other workloads) the model is trained before
  the first measurement, so even the first batch is a prediction.
* :class:`SATuner`: simulated annealing on measured cycles only (no model): each batch is
  one neighbour of each member of a population, accepted by the Metropolis rule.
* :class:`RandomTuner`, :class:`GridTuner`: uniform sampling, and the space in index order.

Example::

    import numpy as np
    from isa import VTAConfig
    from compiler.tuner import Task, TunerSpace
    from compiler.tuner.search import RandomTuner
    cfg = VTAConfig()
    sp = TunerSpace(Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1).workload(cfg), cfg)
    t = RandomTuner(sp, seed=0)
    pts = t.next_batch(4)
    t.update(pts, np.array([100.0, 90.0, np.inf, 95.0]))
    print(t.best_cycles)
"""

from __future__ import annotations

import math

import numpy as np

from .features import feature_names, featurize
from .model import CostModel

TUNERS = ("xgb", "sa", "random", "grid")


def plausible(space, pts: np.ndarray, X: np.ndarray | None = None) -> np.ndarray:
    """A vectorised necessary condition for validity (structure of the loops, compute-at
    levels that exist, double buffering only of hoisted reads, approximate SRAM use within
    the buffers); the exact check is :meth:`TunerSpace.valid`.  ``X``: the points' features,
    when already computed."""
    X = featurize(space, pts) if X is None else X
    names = feature_names(space)
    col = {n: X[:, i] for i, n in enumerate(names)}
    T = space._feat_cache
    pts = np.atleast_2d(pts)
    c = {n: pts[:, j] for j, n in enumerate(space.names)}
    o, f = c["order"], c["fuse"]
    ok = T.fusable[o, f]
    vt = T.vals["vthreads"][c["vthreads"]]
    vslot = T.name_slot[o, f, T.vaxis_name[c["vthread_axis"]]]
    ok &= np.where(vt > 1, vslot >= 0, c["vthread_axis"] == 0)
    for b, at in (("data", "inp_at"), ("kernel", "wgt_at")):
        kind = T.at_kind[at][c[at]]
        slot = T.name_slot[o, f, np.maximum(T.at_name[at][c[at]], 0)]
        ok &= (kind < 2) | ((T.at_name[at][c[at]] >= 0) & (slot >= 0))
        dbl = T.vals["double_buffer"][c["double_buffer"], 0 if b == "data" else 1] > 0
        ok &= ~dbl | (kind == 2)
    ok &= (col["inp_sram_use"] <= 1.0) & (col["wgt_sram_use"] <= 1.0) & \
        (col["acc_sram_use"] <= 1.0)
    return ok


class Tuner:
    """Common state: measured points, their cycles, the best so far."""
    name = "base"

    def __init__(self, space, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.measured: set = set()
        self.xs: list = []
        self.ys: list = []
        self.best_cycles = math.inf
        self.best_point = None

    def next_batch(self, n: int) -> np.ndarray:
        raise NotImplementedError

    def update(self, pts, cycles) -> None:
        """Learn from measured ``cycles`` of ``pts`` (``inf`` for a failed measurement)."""
        pts = np.atleast_2d(np.asarray(pts, np.int64))
        for p, c in zip(pts, np.asarray(cycles, float)):
            key = p.tobytes()
            self.measured.add(key)
            self.xs.append(p)
            self.ys.append(c)
            if c < self.best_cycles:
                self.best_cycles, self.best_point = float(c), p.copy()

    def _fresh(self, pts) -> np.ndarray:
        """The rows of ``pts`` not measured yet, distinct, in order."""
        out, seen = [], set()
        for p in pts:
            k = p.tobytes()
            if k not in self.measured and k not in seen:
                seen.add(k)
                out.append(p)
        return np.array(out, np.int64).reshape(-1, len(self.space.radix))

    def _random(self, n: int, exclude=()) -> np.ndarray:
        return self.space.sample(self.rng, n, exclude=set(self.measured) | set(exclude))


class RandomTuner(Tuner):
    """Uniformly random valid points, without repetition."""
    name = "random"

    def next_batch(self, n: int) -> np.ndarray:
        return self._random(n)


class GridTuner(Tuner):
    """Valid points in index order (the mixed-radix order of :class:`TunerSpace`)."""
    name = "grid"

    def __init__(self, space, seed: int = 0):
        super().__init__(space, seed)
        self._next = 0

    def next_batch(self, n: int) -> np.ndarray:
        out = []
        total = len(self.space)
        while len(out) < n and self._next < total:
            idx = np.arange(self._next, min(total, self._next + 4096))
            self._next = int(idx[-1]) + 1
            pts = self.space.from_index(idx)
            pts = pts[plausible(self.space, pts)]
            for p in self._fresh(pts):
                if self.space.valid(p):
                    out.append(p)
                    if len(out) == n:
                        self._next = int(self.space.index_of(p)[0]) + 1
                        break
        return np.array(out, np.int64).reshape(-1, len(self.space.radix))


class SATuner(Tuner):
    """Simulated annealing on measured cycles (no model): a population walks the space by
    one-knob moves, accepting a worse neighbour with probability exp(-rel. loss / T)."""
    name = "sa"

    def __init__(self, space, seed: int = 0, population: int = 8, t0: float = 0.3,
                 cooling: float = 0.9):
        super().__init__(space, seed)
        self.pop: np.ndarray | None = None
        self.pop_cycles: np.ndarray | None = None
        self.temp, self.cooling = t0, cooling
        self._pending: dict = {}

    def _neighbour(self, p, taken) -> np.ndarray | None:
        for _ in range(64):
            q = self.space.mutate(self.rng, p[None])[0]
            k = q.tobytes()
            if k in self.measured or k in taken:
                continue
            if plausible(self.space, q[None])[0] and self.space.valid(q):
                return q
        return None

    def next_batch(self, n: int) -> np.ndarray:
        if self.pop is None:
            pts = self._random(n)
            self._pending = {p.tobytes(): None for p in pts}
            return pts
        out, taken = [], set()
        order = self.rng.permutation(len(self.pop))
        while len(out) < n:
            for i in order:
                q = self._neighbour(self.pop[i], taken)
                if q is None:
                    continue
                taken.add(q.tobytes())
                self._pending[q.tobytes()] = i
                out.append(q)
                if len(out) == n:
                    break
            else:
                if not out or len(out) < n:
                    extra = self._random(n - len(out), exclude=taken)
                    for q in extra:
                        self._pending[q.tobytes()] = None
                    out.extend(extra)
                    break
        return np.array(out, np.int64).reshape(-1, len(self.space.radix))

    def update(self, pts, cycles) -> None:
        super().update(pts, cycles)
        pts = np.atleast_2d(np.asarray(pts, np.int64))
        cycles = np.asarray(cycles, float)
        if self.pop is None:
            ok = np.isfinite(cycles)
            if ok.any():
                k = min(int(ok.sum()), max(1, len(pts) // 2))
                best = np.argsort(np.where(ok, cycles, np.inf))[:k]
                self.pop, self.pop_cycles = pts[best].copy(), cycles[best].copy()
            return
        for p, c in zip(pts, cycles):
            i = self._pending.pop(p.tobytes(), None)
            if i is None or not np.isfinite(c):
                continue
            old = self.pop_cycles[i]
            if c <= old or self.rng.random() < math.exp(-(c - old) / old / max(self.temp,
                                                                                   1e-9)):
                self.pop[i], self.pop_cycles[i] = p, c
        self.temp *= self.cooling


class XGBTuner(Tuner):
    """Model-guided search (see module docstring).

    Parameters
    ----------
    plan_size : int
        Candidates the annealer keeps per batch (best predicted, unmeasured).
    epsilon : float
        Share of each batch drawn uniformly at random (exploration).
    transfer : list of (TunerSpace, points, cycles)
        Histories of other workloads; the model trains on them together with this one.
    sa_steps, sa_population : int
        Annealing steps per batch and parallel chains (steps x population candidates are
        scored per batch).
    prior : bool
        Rank with the analytic cost model's estimate (:mod:`compiler.vta.default_schedule`, a
        feature) as the model's base margin: before any data the search anneals on it alone
        instead of sampling uniformly, afterwards the trees learn its corrections.
    """
    name = "xgb"

    def __init__(self, space, seed: int = 0, plan_size: int = 64, epsilon: float = 0.05,
                 transfer=(), sa_steps: int = 60, sa_population: int = 128,
                 diversity: float = 0.5, rounds: int = 60, prior: bool = True):
        super().__init__(space, seed)
        self.plan_size, self.epsilon, self.diversity = plan_size, epsilon, diversity
        self.sa_steps, self.sa_population = sa_steps, sa_population
        est = feature_names(space).index("est_log2_cycles")
        self.model = CostModel(rounds=rounds, seed=seed, prior_col=est if prior else None)
        self.transfer = [(featurize(sp, p), np.asarray(c, float)) for sp, p, c in transfer
                         if len(p)]
        self._sa_points: np.ndarray | None = None
        self._measured_f: set = set()        # features of measured points (equivalence)
        self.prior = prior
        self.scored = 0
        if self.transfer:
            self.model.fit(self.transfer)

    def _fkey(self, X: np.ndarray) -> list[bytes]:
        return [np.round(x, 4).tobytes() for x in X]

    def update(self, pts, cycles) -> None:
        super().update(pts, cycles)
        pts = np.atleast_2d(np.asarray(pts, np.int64))
        self._measured_f.update(self._fkey(featurize(self.space, pts)))
        if np.isfinite(np.array(self.ys)).sum() >= 2:
            self._fit()

    def _fit(self) -> None:
        own = (featurize(self.space, np.array(self.xs)), np.array(self.ys))
        self.model.fit(self.transfer + [own])

    def _anneal(self) -> tuple[np.ndarray, np.ndarray]:
        """Best-predicted plausible unmeasured points found by annealing on the model."""
        sp, rng = self.space, self.rng
        P = self.sa_population
        if self._sa_points is None:
            pts = sp.random_points(rng, P * 8)
            pts = pts[plausible(sp, pts)][:P]
            if len(pts) < P:
                pts = np.concatenate([pts, sp.sample(rng, P - len(pts))])
        else:
            pts = self._sa_points
        if self.xs:                              # seed chains at the best measured points
            top = np.array(self.xs)[np.argsort(self.ys)[:min(P // 4, len(self.xs))]]
            pts = np.concatenate([top, pts[len(top):]])
        X = featurize(sp, pts)
        score = np.where(plausible(sp, pts, X), self._score(X), -np.inf)
        pool_pts, pool_scores = [pts], [score]
        for step in range(self.sa_steps):
            t = 1.0 - step / self.sa_steps
            cand = sp.mutate(rng, pts)
            X = featurize(sp, cand)
            ok = plausible(sp, cand, X)
            cs = np.full(len(cand), -np.inf)
            if ok.any():
                cs[ok] = self._score(X[ok])
            self.scored += int(ok.sum())
            accept = (cs > score) | (rng.random(len(cs)) < np.exp(
                np.minimum(0, cs - score) / max(t, 1e-3)))
            accept &= np.isfinite(cs)
            pts = np.where(accept[:, None], cand, pts)
            score = np.where(accept, cs, score)
            pool_pts.append(cand[ok])
            pool_scores.append(cs[ok])
        self._sa_points = pts
        allp = np.concatenate(pool_pts)
        alls = np.concatenate(pool_scores)
        order = np.argsort(-alls, kind="stable")
        return allp[order], alls[order]

    def _score(self, X: np.ndarray) -> np.ndarray:
        """Model scores: the analytic prior corrected by the trees (before any training
        data, the prior alone: fewer estimated cycles rank higher)."""
        return self.model.predict(X)

    def next_batch(self, n: int) -> np.ndarray:
        if not self.model.trained and not self.prior:
            return self._random(n)
        cand, scores = self._anneal()
        plan, plan_s = [], []
        seen = set()
        fkeys = self._fkey(featurize(self.space, cand[:self.plan_size * 32]))
        for p, s, fk in zip(cand, scores, fkeys):
            k = p.tobytes()
            # skip points measured already, and points equivalent to one (same features:
            # e.g. a read hoisted to a loop of extent 1 is a read at the root)
            if k in seen or k in self.measured or fk in seen or fk in self._measured_f:
                continue
            seen.update((k, fk))
            if self.space.valid(p):
                plan.append(p)
                plan_s.append(s)
                if len(plan) >= self.plan_size:
                    break
        n_rand = int(self.rng.binomial(n, self.epsilon)) if len(plan) >= n else 0
        picked = self._diverse(np.array(plan).reshape(-1, len(self.space.radix)),
                               np.array(plan_s), n - n_rand)
        if len(picked) < n:
            taken = {p.tobytes() for p in picked}
            extra = self._random(n - len(picked), exclude=taken)
            picked = np.concatenate([picked, extra]) if len(extra) else picked
        return picked

    def _diverse(self, plan: np.ndarray, scores: np.ndarray, n: int) -> np.ndarray:
        """Greedy pick: normalised predicted score + ``diversity`` x (share of knobs whose
        value is new to the batch) -- AutoTVM's submodular pick."""
        if len(plan) <= n:
            return plan
        s = scores - scores.min()
        s = s / (s.max() or 1.0)
        D = plan.shape[1]
        used = [set() for _ in range(D)]
        chosen: list[int] = []
        free = np.ones(len(plan), bool)
        for _ in range(n):
            new = np.array([[plan[i, j] not in used[j] for j in range(D)]
                            for i in range(len(plan))]).mean(1)
            gain = np.where(free, s + self.diversity * new, -np.inf)
            i = int(np.argmax(gain))
            chosen.append(i)
            free[i] = False
            for j in range(D):
                used[j].add(plan[i, j])
        return plan[chosen]


def make_tuner(name: str, space, seed: int = 0, **kw) -> Tuner:
    """A tuner by name: "xgb", "sa", "random" or "grid"."""
    cls = {"xgb": XGBTuner, "sa": SATuner, "random": RandomTuner, "grid": GridTuner}.get(name)
    if cls is None:
        raise ValueError(f"unknown tuner {name!r} (known: {', '.join(TUNERS)})")
    return cls(space, seed=seed, **kw)


__all__ = ["Tuner", "XGBTuner", "SATuner", "RandomTuner", "GridTuner", "make_tuner",
           "plausible", "TUNERS"]
