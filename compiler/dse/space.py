"""The design space of ``vta dse``: which hardware points to sweep, read from ``SPACE.json``.

A point is a plain dict: the VTAConfig keys it sets (``LOG_BATCH``, ``LOG_BLOCK``, the four
``LOG_*_BUFF_SIZE``, ``LOG_BUS_WIDTH``, ...), ``alu_stages`` (the core's tensor-ALU pipeline
option: 1, 2 or 3 cycles per micro-op; ``vta hw build`` builds 3), ``dram`` (the memory
system of the timed simulator, a key of :data:`DRAM_MODELS`) and ``lut_mults`` (how many of
the GEMM core's int8 products are built in logic instead of DSP multipliers:
``VTACore(lut_mults=N)`` / ``vta hw build --lut-mults N``; same cycles, fewer multipliers,
more LUTs; a point keeps the key only when N > 0, so points without it are unchanged) and
``pipelined`` (``VTACore(pipelined=True)``, the ``*-pipelined`` FPGA builds: registers after
the UOP/INP/ACC reads and a split ALU lane for a higher clock, more FFs and LUTs, a cycle more
per ALU instruction and per launch; given as true/false or 1/0, kept only when true).
``SPACE.json`` gives a list of candidate values per key (or one value); the space is their
cartesian product, less the
points the ISA cannot encode or the RTL generator cannot build, which are counted with their
reasons.  Buffers may be given as depths instead of bytes: ``LOG_INP_DEPTH: [11]`` means 2048
INP tiles whatever the tile size (``LOG_INP_BUFF_SIZE`` is then derived per point).

Example::

    from compiler.dse.space import parse_space, enumerate_space
    space = parse_space({"LOG_BLOCK": [3, 4], "LOG_INP_DEPTH": [10, 11], "LOG_WGT_DEPTH": 9,
                         "LOG_ACC_DEPTH": 10, "LOG_UOP_DEPTH": 11, "alu_stages": 3,
                         "dram": "vta_hw_fpga"})
    points, rejected = enumerate_space(space)
    print(len(points), "points;", sum(rejected.values()), "not encodable")
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np

from isa import ConfigError, VTAConfig

__all__ = ["DseError", "DRAM_MODELS", "parse_space", "enumerate_space", "config_of",
           "timing_of", "point_key", "point_name", "lut_mults_of", "pipelined_of",
           "measurement_point"]


class DseError(ValueError):
    """A user error of ``vta dse``: a bad space, workload or output directory."""


def _dram_models() -> dict:
    from vta_sim.timing import TimingParams
    hw = TimingParams.vta_hw()
    fpga = TimingParams.vta_hw_fpga()
    return {
        # this project's RTL with the Amaranth simulator's on-chip DRAM (latency 4)
        "vta_hw": hw,
        # the ULX3S build's on-chip DRAM (latency 8; micro-op loads one per cycle)
        "vta_hw_fpga": fpga,
        # the same core on a Zynq-like DDR: 64-cycle latency, 256-beat bursts
        "ddr": hw.replace(read_latency=64, max_burst_beats=256, max_outstanding_reads=4),
    }


#: Memory-system models of the timed simulator (``"dram"`` in a point); the ALU's cycles per
#: micro-op come from the point's ``alu_stages``.
DRAM_MODELS = ("vta_hw", "vta_hw_fpga", "ddr")

_CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(VTAConfig)
                     if f.name not in ("TARGET", "HW_VER"))
_BUFFERS = ("UOP", "INP", "WGT", "ACC")
_DEPTH_KEYS = tuple(f"LOG_{b}_DEPTH" for b in _BUFFERS)
_EXTRA_KEYS = ("alu_stages", "dram", "lut_mults", "pipelined")
KNOWN_KEYS = _CONFIG_KEYS + _DEPTH_KEYS + _EXTRA_KEYS
#: Largest cartesian product :func:`enumerate_space` walks (about 20 s of checking).
MAX_COMBINATIONS = 200_000


def parse_space(doc, where: str = "SPACE.json") -> dict[str, list]:
    """Check a space document; returns ``key -> list of candidate values`` (sorted keys).

    Raises
    ------
    DseError
        not an object, an unknown key, an empty or non-integer value list, an unknown DRAM
        model, or a buffer given both as bytes and as a depth; the message names the key.
    """
    if not isinstance(doc, dict):
        raise DseError(f"{where}: expected a JSON object of key -> list of values, not "
                       f"{type(doc).__name__}")
    if not doc:
        raise DseError(f"{where}: the space is empty (give e.g. \"LOG_BLOCK\": [3, 4])")
    out: dict[str, list] = {}
    for key, vals in doc.items():
        if key not in KNOWN_KEYS:
            raise DseError(f"{where}: unknown key {key!r} (known: {', '.join(KNOWN_KEYS)})")
        vals = vals if isinstance(vals, list) else [vals]
        if not vals:
            raise DseError(f"{where}: {key} has no candidate values")
        for v in vals:
            if key == "dram":
                if v not in DRAM_MODELS:
                    raise DseError(f"{where}: dram model {v!r} is not one of "
                                   f"{', '.join(DRAM_MODELS)}")
            elif key == "pipelined":
                if v not in (0, 1) or not isinstance(v, (bool, int)):
                    raise DseError(f"{where}: pipelined values must be true/false (or 1/0), "
                                   f"not {v!r}")
            elif not isinstance(v, int) or isinstance(v, bool):
                raise DseError(f"{where}: {key} values must be integers, not {v!r}")
            elif key == "alu_stages" and v not in (1, 2, 3):
                raise DseError(f"{where}: alu_stages must be 1, 2 or 3, not {v}")
            elif key == "lut_mults" and v < 0:
                raise DseError(f"{where}: lut_mults must be 0 or more (int8 products built "
                               f"in logic), not {v}")
        if key == "pipelined":
            vals = [bool(v) for v in vals]
        if len(set(map(str, vals))) != len(vals):
            raise DseError(f"{where}: {key} lists a value twice")
        out[key] = vals
    for b in _BUFFERS:
        if f"LOG_{b}_DEPTH" in out and f"LOG_{b}_BUFF_SIZE" in out:
            raise DseError(f"{where}: give LOG_{b}_BUFF_SIZE (bytes) or LOG_{b}_DEPTH "
                           f"(entries), not both")
    out.setdefault("alu_stages", [3])
    out.setdefault("dram", ["vta_hw_fpga"])
    return dict(sorted(out.items()))


def _normalise(raw: dict) -> dict:
    """Depths -> byte sizes for this point's tile sizes; every key explicit."""
    base = VTAConfig()
    p = {k: raw.get(k, getattr(base, k)) for k in _CONFIG_KEYS}
    batch, block = 1 << p["LOG_BATCH"], 1 << p["LOG_BLOCK"]
    tile = {"UOP": 4, "INP": batch * block << p["LOG_INP_WIDTH"] >> 3,
            "WGT": block * block << p["LOG_WGT_WIDTH"] >> 3,
            "ACC": batch * block << p["LOG_ACC_WIDTH"] >> 3}
    for b in _BUFFERS:
        d = raw.get(f"LOG_{b}_DEPTH")
        if d is not None:
            p[f"LOG_{b}_BUFF_SIZE"] = d + int(tile[b]).bit_length() - 1
    p["alu_stages"] = raw["alu_stages"]
    p["dram"] = raw["dram"]
    if raw.get("lut_mults", 0):
        p["lut_mults"] = raw["lut_mults"]
    if raw.get("pipelined", False):
        p["pipelined"] = True
    return p


def lut_mults_of(point: dict) -> int:
    """How many of the point's int8 GEMM products are built in logic (0 when not given)."""
    return int(point.get("lut_mults", 0))


def pipelined_of(point: dict) -> bool:
    """Whether the point's core is the pipelined one (False when not given)."""
    return bool(point.get("pipelined", False))


def measurement_point(point: dict) -> dict:
    """The point without the keys that change no cycle count (``lut_mults``: the same
    register stages and results); points equal here share one measurement."""
    return {k: v for k, v in point.items() if k != "lut_mults"}


def config_of(point: dict) -> VTAConfig:
    """The VTAConfig of a point (raises ConfigError if it cannot be encoded)."""
    return VTAConfig(**{k: point[k] for k in _CONFIG_KEYS if k in point})


def timing_of(point: dict):
    """The timed simulator's parameters for a point: its DRAM model with the ALU's cycles per
    micro-op set to the point's ``alu_stages``, and with ``pipelined`` the cycles the
    pipelined core adds (one per ALU instruction and per launch, as
    ``TimingParams.vta_hw_fpga_pipelined`` adds them to ``vta_hw_fpga``)."""
    tp = _dram_models()[point["dram"]]
    s = point["alu_stages"]
    tp = tp.replace(alu_cycles_per_uop_imm=s, alu_cycles_per_uop_vec=s)
    if pipelined_of(point):
        tp = tp.replace(alu_start_cycles=tp.alu_start_cycles + 1,
                        launch_cycles=tp.launch_cycles + 1)
    return tp


def point_key(point: dict) -> str:
    """The canonical text of a point (the database key)."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def point_name(point: dict) -> str:
    """A short readable name, e.g. ``1x8x8_u13i14w16a16_b64_alu3_vta_hw_fpga``."""
    c = config_of(point)
    lut = f"_lut{lut_mults_of(point)}" if lut_mults_of(point) else ""
    lut += "_pipe" if pipelined_of(point) else ""
    return (f"{c.batch}x{c.block_in}x{c.block_out}_u{c.LOG_UOP_BUFF_SIZE}i{c.LOG_INP_BUFF_SIZE}"
            f"w{c.LOG_WGT_BUFF_SIZE}a{c.LOG_ACC_BUFF_SIZE}_b{c.bus_width}_alu"
            f"{point['alu_stages']}{lut}_{point['dram']}")


def _check_buildable(cfg: VTAConfig, lut_mults: int = 0) -> str | None:
    """Why the RTL generator cannot build ``cfg`` with ``lut_mults`` products in logic
    (None if it can)."""
    from vta_hw.blocks.core import check_config
    from vta_hw.errors import HwError
    try:
        check_config(cfg)
    except HwError as e:
        return str(e)
    macs = cfg.batch * cfg.block_in * cfg.block_out
    if lut_mults > macs:
        return (f"lut_mults {lut_mults} is more than the {macs} products of a "
                f"{cfg.batch}x{cfg.block_in}x{cfg.block_out} GEMM core")
    return None


def enumerate_space(space: dict[str, list], budget: int | None = None, seed: int = 0
                    ) -> tuple[list[dict], dict[str, int]]:
    """The encodable, buildable points of ``space`` (at most ``budget`` of them, a seeded
    uniform sample in a stable order; a larger budget with the same seed gives a superset) and
    the rejected ones counted by reason.

    Raises
    ------
    DseError
        if no point of the space can be encoded and built (the message gives the most
        common reasons), or the space has more than :data:`MAX_COMBINATIONS` combinations.
    """
    keys = list(space)
    total = math.prod(len(v) for v in space.values())
    if total > MAX_COMBINATIONS:
        raise DseError(f"the space has {total:,} combinations; at most {MAX_COMBINATIONS:,} are "
                       f"enumerated (give fewer values per key, or split it into several "
                       f"spaces run into the same --out)")
    points, rejected, seen = [], {}, set()
    for combo in itertools.product(*(space[k] for k in keys)):
        raw = dict(zip(keys, combo))
        try:
            p = _normalise(raw)
            cfg = config_of(p)
        except ConfigError as e:
            why = str(e)
        else:
            why = _check_buildable(cfg, lut_mults_of(p))
        if why is not None:
            why = _generic(why)
            rejected[why] = rejected.get(why, 0) + 1
            continue
        k = point_key(p)
        if k not in seen:
            seen.add(k)
            points.append(p)
    if not points:
        top = sorted(rejected.items(), key=lambda kv: -kv[1])[:3]
        reasons = "; ".join(f"{n} x {w}" for w, n in top)
        raise DseError(f"no point of the space can be built: all {sum(rejected.values())} "
                       f"combinations are rejected ({reasons})")
    if budget is not None and budget < len(points):
        # a prefix of one seeded permutation: a larger budget measures a superset, so a rerun
        # with more budget only adds points
        idx = np.random.default_rng(seed).permutation(len(points))[:budget]
        points = [points[i] for i in sorted(idx)]
    return points, rejected


def _generic(msg: str) -> str:
    """A rejection reason without the point-specific numbers (so reasons can be counted)."""
    import re
    return re.sub(r"\d+", "N", msg)
