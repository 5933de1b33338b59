"""The learned cost model: XGBoost with a pairwise ranking objective (AutoTVM's
``XGBoostCostModel`` with ``loss_type="rank"``).

The model ranks candidates; it never has to predict cycles, only which of two schedules of
the same workload is faster.  Training rows are the features of measured points
(:func:`compiler.tuner.features.featurize`) with the label ``best cycles / cycles`` of
their workload (1 for the best, towards 0 for slow ones, 0 for a failed measurement);
every workload is its own ranking group, so the histories of other layers (and other
configurations) can be pooled with the current one: transfer learning.  With ``prior_col``
the trees learn a correction to a prior score (``-prior_weight x`` that feature column, the
analytic cost model's log2 cycles), given to XGBoost as the base margin, as AutoTVM's
transfer learning passes a base model's predictions.

Models are saved as XGBoost JSON (:meth:`CostModel.save`), never pickled.

Example::

    import numpy as np
    from compiler.tuner.model import CostModel
    rng = np.random.default_rng(0)
    X = rng.random((64, 5)); cycles = 1000 + 900 * X[:, 0]
    m = CostModel(seed=0).fit([(X, cycles)])
    print(np.corrcoef(m.predict(X), -cycles)[0, 1] > 0.9)
"""

from __future__ import annotations

import numpy as np

PARAMS = {"objective": "rank:pairwise", "max_depth": 4, "eta": 0.2, "gamma": 1e-4,
          "min_child_weight": 1, "subsample": 1.0, "lambda": 1.0, "alpha": 0.0,
          "nthread": 1, "verbosity": 0}


class CostModel:
    """An XGBoost ranking model over candidate features (see module docstring)."""

    def __init__(self, rounds: int = 60, seed: int = 0, params: dict | None = None,
                 prior_col: int | None = None, prior_weight: float = 2.0):
        self.rounds, self.seed = rounds, seed
        self.prior_col, self.prior_weight = prior_col, prior_weight
        self.params = {**PARAMS, "seed": seed, **(params or {})}
        self.booster = None
        self.n_rows = 0

    @staticmethod
    def labels(cycles: np.ndarray) -> np.ndarray:
        """``best / cycles`` per row; 0 for failed (non-finite) measurements."""
        c = np.asarray(cycles, float)
        ok = np.isfinite(c) & (c > 0)
        if not ok.any():
            return np.zeros(len(c))
        return np.where(ok, c[ok].min() / np.where(ok, c, 1.0), 0.0)

    def fit(self, groups) -> "CostModel":
        """Train on ``groups``: a list of ``(features (n, F), cycles (n,))``, one per
        workload (each a ranking group).  Groups with fewer than two rows or no successful
        measurement carry no ranking information and are skipped."""
        import xgboost as xgb
        Xs, ys, sizes = [], [], []
        for X, c in groups:
            c = np.asarray(c, float)
            if len(c) < 2 or not np.isfinite(c).any():
                continue
            Xs.append(np.asarray(X, np.float32))
            ys.append(self.labels(c))
            sizes.append(len(c))
        if not sizes:
            self.booster = None
            return self
        X = np.concatenate(Xs)
        d = xgb.DMatrix(X, label=np.concatenate(ys), nthread=1)
        d.set_group(sizes)
        if self.prior_col is not None:
            d.set_base_margin(self._margin(X))
        self.booster = xgb.train(self.params, d, num_boost_round=self.rounds)
        self.n_rows = sum(sizes)
        return self

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def _margin(self, X: np.ndarray) -> np.ndarray:
        """The prior's score: ``-weight x`` the prior column (log2 estimated cycles)."""
        return -self.prior_weight * np.asarray(X, np.float32)[:, self.prior_col]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Scores (higher = predicted faster); before any training, the prior's score (or
        zeros without a prior)."""
        X = np.asarray(X, np.float32)
        if self.booster is None:
            return np.zeros(len(X)) if self.prior_col is None else self._margin(X)
        if self.prior_col is None:
            return self.booster.inplace_predict(X)                   # no DMatrix copy
        return self.booster.inplace_predict(X, base_margin=self._margin(X))

    def save(self, path: str) -> None:
        """Save as XGBoost JSON (or UBJ for a ``.ubj`` path)."""
        if self.booster is None:
            raise ValueError("the cost model has not been trained; nothing to save")
        self.booster.save_model(path)

    @classmethod
    def load(cls, path: str) -> "CostModel":
        import xgboost as xgb
        m = cls()
        m.booster = xgb.Booster()
        m.booster.load_model(path)
        return m


__all__ = ["CostModel", "PARAMS"]
