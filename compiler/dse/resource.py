"""The DSE's hardware cost: LUTs, FFs, multipliers, block RAMs and Fmax of a design point,
from a resource model fitted to real yosys ``synth_ecp5`` runs, and its feasibility on named
parts.

The model is linear in a few structural features of the core (the GEMM array's MACs, the
tensor ALU's lanes per pipeline option, the bus width, and an analytic block-RAM count of its
SRAMs), fitted by least squares on relative error to the synthesis samples in
``data/synth_samples.json`` (collected by :mod:`compiler.dse.synth_samples`).  The samples in
:data:`HELD_OUT` are not used in the fit; :meth:`ResourceModel.held_out_errors` reports the
model's error on them.

Fmax is not modelled from synthesis (yosys gives no timing): it is a per-ALU-option figure
from the real ULX3S place-and-route builds in ``data/board_builds.json``, which are few.

GEMM products built in logic (a point's ``lut_mults``, ``VTACore(lut_mults=N)``) are costed
from the one build with them (``lut_products`` in ``board_builds.json``): each saves exactly
one MULT18X18D and costs :meth:`ResourceModel.luts_per_product` LUT4s (that build's LUT4s
less the model's estimate of the same core without them and the shell, per product); FFs do
not change, and such a point's Fmax is at most that build's.

Example::

    from compiler.dse.resource import ResourceModel, feasibility
    model = ResourceModel.default()
    point = {"LOG_BATCH": 0, "LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
             "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 6,
             "alu_stages": 3, "dram": "vta_hw_fpga"}
    cost = model.predict(point)
    print(cost["multipliers"], feasibility(cost)["ecp5-85f"]["fits"])
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .space import DseError, config_of, lut_mults_of, pipelined_of

__all__ = ["RESOURCES", "PARTS", "HELD_OUT", "ResourceModel", "bram_blocks", "feasibility",
           "board_overhead"]

DATA = Path(__file__).parent / "data"

#: The resources the model predicts (yosys ``synth_ecp5`` cell counts of the core alone:
#: ``luts`` = LUT4 + 2 x CCU2C, ``ffs`` = TRELLIS_FF, ``multipliers`` = MULT18X18D,
#: ``brams`` = DP16KD).
RESOURCES = ("luts", "ffs", "multipliers", "brams")

#: Samples left out of the fit to measure the model's error (``point`` names as in
#: :func:`sample_name`): five of the first batch, every sample of the second batch
#: (synthesised after the sweep had used the model, so they test it as it was used) and one
#: pipelined core.
HELD_OUT = ("0_3_12_15_15_16_6_2", "1_2_12_13_14_15_6_3", "0_3_11_13_17_15_6_3",
            "0_2_11_13_14_15_5_1", "0_4_13_14_16_16_7_3",
            # second batch
            "0_3_12_14_15_16_5_3", "0_3_13_14_16_16_5_1", "0_2_12_13_14_15_4_3",
            "1_2_11_13_14_15_6_2", "0_3_13_12_16_14_6_3", "0_4_12_14_16_16_6_2",
            "1_3_12_13_15_15_6_1", "0_3_12_14_16_15_6_3", "0_4_12_13_15_16_7_1",
            # pipelined cores (issue 19): two of the five, the 1x16x16 among them
            "0_2_11_13_14_15_5_1_pipe", "0_4_12_13_16_15_6_1_pipe")

#: Capacities of the named parts.  ECP5 (Lattice LFE5U family datasheet; LUT4 counts as
#: nextpnr reports them): ``board`` true means ``vta hw build`` targets it on a ULX3S, so the
#: board shell (on-chip DRAM, UART bridge, PLL) is added to the core's estimate.  The iCE40UP5K
#: and the Pynq's XC7Z020 are vendor-free figures: their cells are not ECP5 cells, so the core's
#: ECP5 counts are converted (``convert``) -- an estimate, not a synthesis for those parts.
PARTS = {
    "ecp5-12f": {"luts": 12288, "ffs": 12288, "multipliers": 28, "brams": 32, "board": True},
    "ecp5-25f": {"luts": 24288, "ffs": 24288, "multipliers": 28, "brams": 56, "board": True},
    "ecp5-45f": {"luts": 43848, "ffs": 43848, "multipliers": 72, "brams": 108, "board": True},
    "ecp5-85f": {"luts": 83640, "ffs": 83640, "multipliers": 156, "brams": 208, "board": True},
    # 5,280 LUT4/FFs, 8 SB_MAC16 (one 16x16 product each, as one MULT18X18D), 30 EBR of 4 kbit
    # plus 4 single-port SPRAMs of 256 kbit, counted as 4 x 16 kbit-blocks each (a generous
    # count: VTA's SRAMs need a read and a write port at once)
    "ice40up5k": {"luts": 5280, "ffs": 5280, "multipliers": 8, "brams": 30 / 4 + 4 * 16,
                  "board": False},
    # 53,200 LUT6, 106,400 FFs, 220 DSP48E1, 140 RAMB36 (= 280 RAMB18 of 18 kbit, as DP16KD);
    # an ECP5 LUT4 count is taken as 0.65 LUT6 (a LUT6 absorbs ~1.5 LUT4s: an assumption)
    "xc7z020": {"luts": 53200, "ffs": 106400, "multipliers": 220, "brams": 280,
                "board": False, "convert": {"luts": 0.65}},
}

_DP16KD_MODES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def bram_blocks(width: int, depth: int) -> int:
    """DP16KD blocks for a ``width`` x ``depth`` memory in its best aspect ratio."""
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in _DP16KD_MODES)


def sample_name(point: dict) -> str:
    keys = ("LOG_BATCH", "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE",
            "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE", "LOG_BUS_WIDTH", "alu_stages")
    return "_".join(str(point[k]) for k in keys) + ("_pipe" if pipelined_of(point) else "")


def features(point: dict) -> dict[str, float]:
    """The structural features of a point's core (see module docstring)."""
    c = config_of(point)
    s = point["alu_stages"]
    macs = c.batch * c.block_in * c.block_out
    lanes = c.batch * c.block_out
    mems = [(32, c.uop_buff_depth), (c.inp_elem_bytes * 8, c.inp_buff_depth),
            (c.wgt_elem_bytes * 8, c.wgt_buff_depth),
            (c.acc_elem_bytes * 8, c.acc_buff_depth), (c.acc_elem_bytes * 8, c.acc_buff_depth),
            (lanes * c.out_width, c.acc_buff_depth)]          # ACC has two read ports
    sram = sum(bram_blocks(w, d) for w, d in mems)
    addr = sum(math.log2(d) for _, d in mems)
    pipe = float(pipelined_of(point))
    return {"one": 1.0, "macs": macs, "lanes": lanes, "lanes_alu1": lanes * (s == 1),
            "lanes_alu2": lanes * (s == 2), "lanes_alu3": lanes * (s == 3),
            "bus": c.bus_width, "sram_brams": sram, "addr_bits": addr,
            "acc_lane_bits": lanes * c.acc_width,
            # the pipelined core (registers after the SRAM reads, a split ALU lane): a fixed
            # part and a part per ALU lane, the 1-cycle ALU's lanes apart (its split differs)
            "pipe": pipe, "pipe_lanes": pipe * lanes, "pipe_lanes_alu1": pipe * lanes * (s == 1)}


#: Features of each resource's linear model, chosen by leave-one-out error on the training
#: samples only (the held-out ones played no part): e.g. for LUTs, separate terms per ALU
#: option gave 3.1% worst-case LOO error, one term for the 1-cycle ALU 2.4%; for FFs the
#: buffers' address bits (counters, address registers) beat the bus width (6.7% vs 10.6%).
_TERMS = {
    "luts": ("one", "macs", "lanes", "lanes_alu1", "bus", "pipe_lanes", "pipe_lanes_alu1"),
    "ffs": ("one", "macs", "lanes_alu1", "lanes_alu2", "lanes_alu3", "addr_bits",
            "pipe_lanes", "pipe_lanes_alu1"),
    "multipliers": ("one", "macs", "lanes"),
    "brams": ("one", "sram_brams"),
}


def _load(name: str) -> dict:
    path = DATA / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DseError(f"cannot read the shipped model data {path}: {e}") from None


def board_overhead() -> dict:
    """What the ULX3S board shell adds to the core (from ``board_builds.json``: a real build
    minus the synthesis of the same core)."""
    return _load("board_builds.json")["shell_overhead"]


class ResourceModel:
    """Linear resource model; ``coef[resource][feature]``.  Build with :meth:`fit` or
    :meth:`default`."""

    def __init__(self, coef: dict, samples: list[dict], held_out: tuple[str, ...],
                 fmax: dict, lut_products: dict | None = None,
                 fmax_pipelined: dict | None = None):
        self.coef = coef
        self.samples = samples
        self.held_out = held_out
        self.fmax = fmax
        self.fmax_pipelined = fmax_pipelined or {}
        self.lut_products = lut_products

    def luts_per_product(self) -> float:
        """LUT4s one GEMM product costs when built in logic, from the ``lut_products`` build
        (its LUT4s less this model's estimate of the same core without LUT products and the
        board shell, divided by its product count)."""
        b = self.lut_products
        if not b:
            raise DseError("the resource model has no build with LUT products "
                           "(board_builds.json: lut_products) to cost lut_mults")
        base = self._linear(dict(b["point"], lut_mults=0))["luts"]
        return (b["luts"] - base - board_overhead().get("luts", 0)) / b["point"]["lut_mults"]

    @classmethod
    def fit(cls, samples: list[dict], held_out=HELD_OUT, fmax: dict | None = None
            ) -> "ResourceModel":
        """Fit to the samples without an ``error``, except the ``held_out`` ones."""
        good = [s for s in samples if "error" not in s]
        train = [s for s in good if sample_name(s["point"]) not in held_out]
        coef = {}
        for r, terms in _TERMS.items():
            if len(train) < len(terms):
                raise DseError(f"the resource model for {r} needs at least {len(terms)} "
                               f"synthesis samples, has {len(train)}")
            X = np.array([[features(s["point"])[t] for t in terms] for s in train], float)
            y = np.array([s[r] for s in train], float)
            w = 1.0 / np.maximum(y, 1.0)                       # relative error
            sol, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
            coef[r] = dict(zip(terms, sol.tolist()))
        builds = _load("board_builds.json")
        return cls(coef, good, tuple(held_out), fmax or builds["fmax_mhz"],
                   builds.get("lut_products"), builds.get("fmax_mhz_pipelined"))

    @classmethod
    def default(cls) -> "ResourceModel":
        """The model fitted to the shipped samples."""
        return cls.fit(_load("synth_samples.json")["samples"])

    def _linear(self, point: dict) -> dict:
        f = features(point)
        return {r: max(0, int(round(sum(c * f[t] for t, c in self.coef[r].items()))))
                for r in RESOURCES}

    def predict(self, point: dict) -> dict:
        """``luts``, ``ffs``, ``multipliers``, ``brams`` (rounded, never negative) and
        ``fmax_mhz`` of a point, its ``lut_mults`` products built in logic."""
        out = self._linear(point)
        n = lut_mults_of(point)
        if n:
            out["multipliers"] = max(0, out["multipliers"] - n)
            out["luts"] += int(round(n * self.luts_per_product()))
        out["fmax_mhz"] = self.fmax_of(point)
        return out

    def fmax_of(self, point: dict) -> float:
        """The Fmax estimate: the measured figure for the point's ALU option (see
        ``board_builds.json``: a handful of builds of one array size); with LUT products, at
        most the figure of the build with them.  A pipelined core takes the routed figures
        of the pipelined builds where there are some (``fmax_mhz_pipelined``), else the
        plain ones (a lower bound)."""
        alu = str(point["alu_stages"])
        piped = pipelined_of(point) and alu in self.fmax_pipelined
        f = float((self.fmax_pipelined if piped else self.fmax)[alu])
        if lut_mults_of(point) and self.lut_products:
            lp = self.lut_products
            f = min(f, float(lp.get("fmax_mhz_pipelined", lp["fmax_mhz"]) if piped
                             else lp["fmax_mhz"]))
        return f

    def held_out_errors(self) -> dict:
        """Per resource: the relative errors on the held-out samples (``rows``: name,
        measured, predicted, error) and their median and max absolute value."""
        rows = [s for s in self.samples if sample_name(s["point"]) in self.held_out]
        out = {}
        for r in RESOURCES:
            errs = []
            for s in rows:
                pred = self.predict(s["point"])[r]
                errs.append({"name": sample_name(s["point"]), "measured": s[r],
                             "predicted": pred,
                             "error": (pred - s[r]) / s[r] if s[r] else float(pred != 0)})
            a = [abs(e["error"]) for e in errs]
            out[r] = {"rows": errs, "median": float(np.median(a)) if a else None,
                      "max": max(a) if a else None}
        return out

    def train_errors(self) -> dict:
        """Median and max absolute relative error on the training samples, per resource."""
        rows = [s for s in self.samples if sample_name(s["point"]) not in self.held_out]
        out = {}
        for r in RESOURCES:
            a = [abs(self.predict(s["point"])[r] - s[r]) / max(s[r], 1) for s in rows]
            out[r] = {"median": float(np.median(a)), "max": max(a), "n": len(a)}
        return out


def feasibility(cost: dict, overhead: dict | None = None) -> dict:
    """Per part: ``fits`` (every resource within the part), ``util`` (the largest fraction
    used) and ``limit`` (the resource that binds).  ECP5 parts count the ULX3S shell
    (``overhead``, default :func:`board_overhead`)."""
    overhead = board_overhead() if overhead is None else overhead
    out = {}
    for part, cap in PARTS.items():
        used = {}
        for r in RESOURCES:
            v = cost[r] + (overhead.get(r, 0) if cap["board"] else 0)
            used[r] = v * cap.get("convert", {}).get(r, 1.0) / cap[r]
        limit = max(used, key=used.get)
        out[part] = {"fits": all(u <= 1.0 for u in used.values()),
                     "util": round(used[limit], 4), "limit": limit}
    return out
