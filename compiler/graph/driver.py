"""The whole-network compiler, one function: :func:`compile_model` (ONNX -> :class:`Compiled`).

import -> float passes (constant folding, BatchNorm folding, bias folding, dead-code removal,
fusion) -> calibration and int8 quantisation -> placement, layout and code generation.  The
result runs with :meth:`Compiled.executor` on any device and saves as an artifact
(:mod:`.artifact`).

Example::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    xs = np.random.default_rng(0).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs})
    print(c.report())
    out = c.executor(SimDevice(c.cfg, timed=True)).run({"image": xs[0]})
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .float_rules import keep_oversized_float, keep_unranged_float, qdq_layout_ranges
from .ir import Graph, GraphError
from .onnx_import import import_onnx
from .ort_qdq import ORT_REFERENCES
from .partition import Program, compile_graph
from .passes import float_pipeline
from .quantize import quantize, sqnr_report


@dataclass
class Compiled:
    cfg: VTAConfig
    float_graph: Graph
    qgraph: Graph
    program: Program
    options: dict
    sqnr: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    passes: object = None

    def executor(self, device, clock_mhz: float = 100.0):
        from .executor import Executor
        return Executor(self.program, device, clock_mhz)

    def report(self) -> str:
        lines = [f"== partition ({self.cfg.batch}x{self.cfg.block_in}x{self.cfg.block_out}"
                 f"{', cpu-only' if self.options.get('cpu_only') else ''}): "
                 f"{sum(s.kind == 'vta' for s in self.program.steps)} VTA, "
                 f"{sum(s.kind == 'cpu' for s in self.program.steps)} CPU, "
                 f"{sum(s.kind == 'host' for s in self.program.steps)} host steps; "
                 f"{getattr(self.program.graph, 'transforms', 0)} layout transforms",
                 self.program.partition_table(),
                 f"== quantisation (int8, {_scales_kind(self.qgraph)}, calibration "
                 f"{self.options.get('mode')} on {self.options.get('calib_samples', 0)} "
                 f"sample(s)): SQNR per layer vs the float model on "
                 f"{self.options.get('sqnr_samples', 1)} of those calibration samples "
                 f"(not held out)",
                 f"{'value':28s} {'op':16s} {'frac':>4s} {'SQNR dB':>8s}"]
        for name, op, frac, db in self.sqnr:
            fr = "-" if frac is None else str(frac)
            lines.append(f"{name[:28]:28s} {op:16s} {fr:>4s} {db:8.2f}")
        if self.options.get("bias_correct"):
            lines.append(f"bias correction: the mean output error per channel on the "
                         f"calibration samples folded into the int32 bias of "
                         f"{self.options.get('bias_corrected', 0)} conv/dense layer(s)")
        if self.options.get("adaround"):
            lines.append(f"adaround: the int8 weights of {self.options.get('adarounded', 0)} "
                         f"conv/dense layer(s) rounded against their output on the "
                         f"calibration samples")
        lines += _threshold_lines(self.options)
        lines += _declined_lines(self.qgraph)
        lines += _kept_lines(self.options) + _worst_lines(self.options) + \
            _output_lines(self.options) + \
            _qdq_lines(self.qgraph, self.options.get("ort_reference", "default"))
        s = self.seconds
        lines.append(f"compile_model: {s.get('total', 0):.2f} s = import+passes "
                     f"{s.get('passes', 0):.2f} + quantise {s.get('quantize', 0):.2f} + codegen "
                     f"{s.get('codegen', 0):.2f} (excludes the SQNR report)")
        return "\n".join(lines)


def _threshold_lines(options: dict) -> list:
    """The report's line on the activation thresholds (:mod:`.thresholds`)."""
    t = options.get("thresholds")
    if not options.get("output_thresholds") or not t:
        return []
    head = ("activation thresholds chosen against the float output of the conv/dense "
            "layers reading them: ")
    if not t["proposed"]:
        return [head + (t["why"] or "none finer than calibrated")]
    n = f"{t['proposed']} finer than calibrated on calibration samples 1-{t['proposal_samples']}"
    if not t["checked"]:
        return [head + f"{n}, {'applied' if t['kept'] else 'not applied'}: {t['why']}"]
    dbs = (f"output SQNR on held-out calibration samples {t['proposal_samples'] + 1}-"
           f"{t['proposal_samples'] + t['held_out']}: {_dbtext(t['sqnr_without'])} without, "
           f"{_dbtext(t['sqnr_with'])} with")
    return [head + n + (f", kept ({dbs})" if t["validated"] else
                        f", rejected, calibrated thresholds kept ({dbs})")]


def _scales_kind(q) -> str:
    if not getattr(q, "scales", None):
        return "power-of-two scales"
    return "the QDQ model's own scales, " + {
        "fixed": "fixed-point requantisation",
        "float32": "onnxruntime's float32 requantisation (CPU)",
        "auto": "fixed-point or onnxruntime's float32 requantisation per layer (auto)"}.get(
            getattr(q, "qdq_mode", "fixed"), "fixed-point requantisation")


def _qdq_lines(q, ort_reference: str = "default") -> list:
    """The report's lines on a QDQ model's scales (compiler/graph/quantize_fixed.py)."""
    out = [f"QDQ scales not kept: {q.qdq_refused}"] if getattr(q, "qdq_refused", "") and \
        q.qdq_refused != "not a QDQ model" else []
    if getattr(q, "scales", None):
        out.append(f"QDQ integers follow onnxruntime's session --ort-reference "
                   f"{ort_reference}: {ORT_REFERENCES[ort_reference]}")
    rq = getattr(q, "qdq_requant", [])
    if rq:
        nf = sum(1 for r in rq if r[1] == "fixed")
        out.append(f"QDQ requantisation auto: {nf} of {len(rq)} conv / dense layers fixed-point "
                   f"on VTA (onnxruntime's float32 rounding exactly), {len(rq) - nf} float32 on "
                   f"the CPU")
        out += [f"  {name}: {kind}: {why}" for name, kind, why in rq]
    return out + [f"kept float at the model's scales: {name} ({op}): {why}"
                  for name, op, why in getattr(q, "qdq_notes", [])]


def _declined_lines(q) -> list:
    """The report's lines on the layers their own int8 rule kept float on the CPU (weights
    below the finest power-of-two scale, a divisor whose table gives 0); a QDQ model's are
    in :func:`_qdq_lines`."""
    if getattr(q, "scales", None):
        return []
    return [f"kept float on the CPU (its int8 form would lose it): {name} ({op}): {why}"
            for name, (op, why) in getattr(q, "declined", {}).items()]


def _kept_lines(options: dict) -> list:
    """The report's lines on the layers --min-layer-sqnr kept float."""
    bound, kept = options.get("min_layer_sqnr"), options.get("kept_float") or []
    if bound is None:
        return []
    if not kept:
        return [f"every quantised layer clears --min-layer-sqnr {bound:g} dB"]
    return [f"kept float on the CPU (SQNR below --min-layer-sqnr {bound:g} dB): "
            + ", ".join(f"{name} ({op}, {db:.1f} dB when quantised)" for name, op, db in kept)]


def _worst_lines(options: dict) -> list:
    """The report's lines on the layers --float-worst kept float."""
    k, kept = options.get("float_worst"), options.get("kept_worst") or []
    if k is None:
        return []
    cap = options.get("worst_mac_cap", 1.0)
    head = (f"kept float on the CPU (--float-worst {k}: the {k} integer layers of lowest "
            f"local SQNR" + ("" if cap >= 1 else f" among those with at most {cap:g} of "
                             f"the model's MACs") + ")")
    if not kept:
        return [head + ": no layer qualifies"]
    return [head + ": " + ", ".join(f"{name} ({op}, {_dbtext(db)} local SQNR when quantised)"
                                    for name, op, db in kept)
            + ("" if len(kept) == k else f" (only {len(kept)} qualify)")]


def _dbtext(db) -> str:
    return "non-finite" if db is None else f"{db:.1f} dB"


def _worst_reason(k: int, cap: float, db) -> str:
    """Why --float-worst kept a layer float (the partition table's column)."""
    return (f"--float-worst {k}: local SQNR {_dbtext(db)} when quantised, among the {k} "
            f"lowest" + ("" if cap >= 1 else f" of the layers with at most {cap:g} of the MACs"))


def _is_number(v) -> bool:
    """A finite int or float (numpy's too), not a bool."""
    return not isinstance(v, bool) and isinstance(
        v, (int, float, np.floating, np.integer)) and bool(np.isfinite(v))


def _is_int(v, low: int) -> bool:
    """An int (numpy's too), not a bool, at least ``low``."""
    return not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= low


def check_bounds(calib, min_layer_sqnr, min_output_sqnr, max_float_layers, sqnr_samples,
                 float_worst=None, worst_mac_cap=1.0):
    """The mixed-precision options, checked before any work: each dB bound a finite number,
    ``max_float_layers`` a positive and ``sqnr_samples`` a non-negative integer,
    ``float_worst`` None or a positive integer, ``worst_mac_cap`` a number in (0, 1], and
    calibration samples given when a bound or ``float_worst`` needs them (GraphError naming
    the flag)."""
    if not (_is_number(worst_mac_cap) and 0 < worst_mac_cap <= 1):
        raise GraphError(f"--worst-mac-cap {worst_mac_cap!r}: expected a share of the "
                         f"model's MACs in (0, 1]")
    if float_worst is not None:
        if not _is_int(float_worst, 1):
            raise GraphError(f"--float-worst {float_worst!r}: expected an integer >= 1")
        if calib is None:
            raise GraphError("--float-worst needs calibration samples (--calib SAMPLES.npz) "
                             "to measure local SQNR on")
    for flag, v in (("--min-layer-sqnr", min_layer_sqnr), ("--min-output-sqnr", min_output_sqnr)):
        if v is None:
            continue
        if not _is_number(v):
            raise GraphError(f"{flag} {v!r}: expected a finite number of dB")
        if calib is None:
            raise GraphError(f"{flag} needs calibration samples (--calib SAMPLES.npz) to "
                             f"measure SQNR on")
    for flag, v, low in (("--max-float-layers", max_float_layers, 1),
                         ("sqnr_samples", sqnr_samples, 0)):
        if not _is_int(v, low):
            raise GraphError(f"{flag} {v!r}: expected an integer >= {low}")


def _kept_reasons(fl: dict, kept: list, bound, worst: list = (), k=None, cap=1.0) -> dict:
    """{float node: why} of the nodes kept float before --float-worst (without ``worst``)
    or --min-output-sqnr runs."""
    return {**fl, **{name: f"--min-layer-sqnr {bound:g}: {db:.1f} dB when quantised"
                     for name, _, db in kept},
            **{name: _worst_reason(k, cap, db) for name, _, db in worst}}


def _finite(db):
    """A dB value as stored in the options (saved as JSON): None when not finite."""
    return float(db) if np.isfinite(db) else None


def _output_lines(options: dict) -> list:
    """The report's lines on the layers --min-output-sqnr kept float."""
    bound, r = options.get("min_output_sqnr"), options.get("kept_for_output")
    if bound is None or r is None:
        return []
    head = (f"output SQNR {r['before']:.2f} dB with every layer quantised "
            f"(--min-output-sqnr {bound:g} dB)")
    if not r["kept"]:
        return [head + ("; nothing kept float" if r["before"] >= bound else
                        "; no single layer kept float raises it")]
    return [head + f" -> {r['after']:.2f} dB keeping float on the CPU, in order: "
            + ", ".join(f"{name} ({op}, {db:.1f} dB after)" for name, op, db in r["kept"])
            + ("" if r["after"] >= bound else
               f" (bound not reached: --max-float-layers {options['max_float_layers']} or "
               f"no further layer helps)")]


def _samples(calib, g: Graph) -> list:
    """{input: (S, *shape) array} or a list of feed dicts -> a list of feed dicts."""
    if calib is None:
        return []
    if isinstance(calib, list):
        return calib
    n = None
    for name in g.inputs:
        if name not in calib:
            raise GraphError(f"calibration data has no array for graph input {name!r} "
                             f"(it has: {', '.join(calib)})")
        a = np.asarray(calib[name], g.values[name].dtype)
        shape = g.values[name].shape
        if a.shape == shape:
            a = a[None]
        if a.shape[1:] != shape:
            if a.ndim == len(shape) and a.shape[1:] == shape[1:]:   # (S, C, H, W), batch 1
                a = a[:, None]
            else:
                raise GraphError(f"calibration array {name!r}: shape {a.shape}, expected "
                                 f"(samples, *{shape})")
        if not np.isfinite(a).all():
            raise GraphError(f"calibration array {name!r} contains NaN or infinity")
        n = len(a) if n is None else min(n, len(a))
    return [{name: np.asarray(calib[name], g.values[name].dtype).reshape((-1,) + g.values[name].shape)[k]
             for name in g.inputs} for k in range(n or 0)]


#: at most this many bytes of calibration's float activations are kept for bias correction
#: (the inputs of the conv / dense layers, per sample after the SQNR report's); the samples
#: past it are run again by :func:`.biascorr.correct_biases`
BIAS_ENV_BYTES = 256 << 20


def _keep_bias_env(kept: dict, k: int, env: dict, names: set) -> None:
    """``kept[k]`` = the values ``names`` of float run ``env`` of calibration sample ``k``
    (what :func:`.biascorr.correct_biases` reads; the same arrays, not copies), unless that
    would take the arrays kept (``kept[None]``: their bytes) past :data:`BIAS_ENV_BYTES`."""
    sub = {v: env[v] for v in names if v in env}
    size = kept.get(None, 0) + sum(np.asarray(a).nbytes for a in sub.values())
    if size <= BIAS_ENV_BYTES:
        kept[k], kept[None] = sub, size


def _wait_all(pending: list) -> None:
    """Call each of ``pending`` (the waits :func:`.partition.compile_graph` left), emptied."""
    while pending:
        pending.pop(0)()


def _no_thresholds(why: str) -> dict:
    """``options["thresholds"]`` when no threshold was proposed."""
    return {"proposed": 0, "kept": 0, "checked": False, "validated": False,
            "sqnr_without": None, "sqnr_with": None, "proposal_samples": 0, "held_out": 0,
            "why": why}


def _thresholds(fg, ranges, envs, samples, held_outs, how, **quantize_kw):
    """(ranges, ``options["thresholds"]``): :func:`.thresholds.refine_ranges` on ``envs``
    (the float runs of the first calibration samples), the proposals kept if ``how`` is
    "force", else if :func:`.thresholds.check_held_out` on the calibration samples after
    those (``held_outs``: {sample index: float outputs}) accepts them."""
    from .thresholds import MAX_SAMPLES, check_held_out, refine_ranges
    idx = sorted(held_outs)
    if how != "force" and not idx:        # nothing to check them on: not proposed at all
        return ranges, _no_thresholds(
            f"not run: only {len(samples)} calibration sample(s), none held out to check "
            f"them on (give more than {MAX_SAMPLES}, or --output-thresholds to apply them "
            f"unchecked)")
    new, refined = refine_ranges(fg, ranges, envs)
    t = {**_no_thresholds("" if refined else "none finer than calibrated"),
         "proposed": len(refined), "proposal_samples": min(len(samples), MAX_SAMPLES)}
    if not refined:
        return ranges, t
    if how == "force":
        return new, {**t, "kept": len(refined),
                     "why": "output_thresholds='force' (--output-thresholds): applied "
                            "without the held-out check"}
    ok, db0, db1 = check_held_out(fg, ranges, new, [samples[k] for k in idx],
                                  [held_outs[k] for k in idx], **quantize_kw)
    t.update(checked=True, validated=ok, held_out=len(idx), kept=len(refined) if ok else 0,
             sqnr_without=_finite(db0), sqnr_with=_finite(db1),
             why="output SQNR on the held-out samples " + ("rises" if ok else "does not rise"))
    return (new if ok else ranges), t


def compile_model(model, cfg: VTAConfig | None = None, calib=None, mode: str = "percentile",
                  percentile: float = 99.99, global_scale: float = 8.0,
                  cpu_only: bool = False, first_conv_cpu: bool = False,
                  tuning_log: str | None = None, sqnr_samples: int = 1,
                  per_channel: bool = True, float_first_last: bool = False,
                  input_shapes: dict | None = None,
                  min_layer_sqnr: float | None = None,
                  min_output_sqnr: float | None = None, max_float_layers: int = 64,
                  float_worst: int | None = None, worst_mac_cap: float = 1.0,
                  bias_correct: bool = True, output_thresholds: bool | str = True,
                  adaround: bool = False, qdq_requant: str = "auto",
                  float_nodes: dict | None = None,
                  ort_reference: str = "default") -> Compiled:
    """Compile an ONNX model (path or ModelProto) for ``cfg``; ``calib`` the calibration
    samples ({input: (S, ...) array} or a list of feed dicts; required unless
    ``mode="global_scale"`` or the model is QDQ-quantised everywhere); ``input_shapes``
    ({name: shape}) pins symbolic input dimensions; with ``min_layer_sqnr`` (dB) a layer
    whose SQNR on the first ``sqnr_samples`` calibration samples is below it stays float
    (:func:`.quantize.keep_float_below`; listed by :meth:`Compiled.report`); with
    ``min_output_sqnr`` (dB) the layers whose float twin lifts the model's output SQNR on
    those samples most then stay float, until it reaches the bound or ``max_float_layers``
    are float (:func:`.quantize.keep_float_for_output`; listed by the report).  With
    ``float_worst`` K (applied after ``min_layer_sqnr``, before ``min_output_sqnr``) the K
    integer layers of lowest local SQNR on those samples among the layers with at most
    ``worst_mac_cap`` of the model's multiply-adds stay float too
    (:func:`.sensitivity.worst_layers`; listed by the report with their local SQNR).  With
    ``bias_correct`` (default) every integer conv / dense layer's mean output error per
    channel on the calibration samples is folded into its int32 bias, last
    (:func:`.biascorr.correct_biases`; the report gives the count).  With
    ``output_thresholds`` (default) the threshold of each activation that a conv / dense
    reads is chosen against those layers' float outputs on the first calibration samples
    (:func:`.thresholds.refine_ranges`) and the choices kept only if they raise the model's
    output SQNR on the next calibration samples (:func:`.thresholds.check_held_out`; with
    ``output_thresholds="force"`` kept unchecked); ``options["thresholds"]`` and the report
    say what was proposed, kept and why.  With ``adaround``
    (opt-in: about 7 CPU s on ocr_rec) each integer conv / dense layer's int8 weights are
    rounded up or down against its output on the first calibration samples, before bias
    correction (:func:`.adaround.round_weights`).  ``qdq_requant`` (a symmetric-int8 QDQ
    model kept at its own scales) says how each conv / dense requantises: ``"fixed"``
    with the three-stage fixed-point multiplier on VTA's ALU; ``"float32"`` keeping the
    int32 accumulator and requantising it on the CPU exactly as onnxruntime's QLinearConv
    does (``rint(fl32(fl32(acc) * M))``), so the int8 results follow onnxruntime end to end;
    ``"auto"`` (default) per layer: the fixed-point stages where they give that float32
    rounding for every accumulator (all output thresholds compared,
    :func:`.ort_qdq.float32_mismatch`), float32 elsewhere - the results are float32's bit
    for bit, and the report says which layer got which and why.  ``float_nodes``
    ({node name: why}) stay float from the start, as with ``float_first_last``: every
    step above (thresholds, the SQNR bounds, bias correction) runs with them float.
    ``ort_reference`` (a QDQ model at its own scales) names the onnxruntime session whose
    integers the program follows (:data:`.ort_qdq.ORT_REFERENCES`): ``"default"``
    (ORT_ENABLE_EXTENDED and above, its S8 -> U8 conversion), ``"int8-allowed"`` (the same
    with ``session.qdqisint8allowed=1``) or ``"basic"`` (ORT_ENABLE_BASIC: every node float
    between DequantizeLinear and QuantizeLinear)."""
    from .calibrate import check_method
    check_method(mode)               # a bad calibration method fails before any work
    check_bounds(calib, min_layer_sqnr, min_output_sqnr, max_float_layers, sqnr_samples,
                 float_worst, worst_mac_cap)
    if qdq_requant not in ("fixed", "float32", "auto"):
        raise GraphError(f"qdq_requant {qdq_requant!r}: expected 'fixed' (fixed-point on "
                         f"VTA), 'float32' (onnxruntime's float32 requantisation on the CPU) "
                         f"or 'auto' (per layer: fixed where it equals float32 exactly)")
    if ort_reference not in ORT_REFERENCES:
        raise GraphError(f"ort_reference {ort_reference!r}: expected one of "
                         f"{', '.join(ORT_REFERENCES)} (the onnxruntime session whose QDQ "
                         f"integers to follow)")
    if output_thresholds not in (True, False, "force"):
        raise GraphError(f"output_thresholds {output_thresholds!r}: expected True (checked on "
                         f"held-out samples), False or 'force' (unchecked)")
    cfg = cfg or VTAConfig()
    t0 = time.perf_counter()
    pm = float_pipeline()
    fg = pm.run(import_onnx(model, input_shapes=input_shapes))
    fg.qdq_requant = qdq_requant        # read by quantize() (every call below)
    fg.ort_reference = ort_reference    # read by its QDQ rules (qdq_eltwise)
    t1 = time.perf_counter()
    samples = _samples(calib, fg)
    kept, float_envs, out_kept, worst, n_corrected = [], [], None, [], 0
    q_envs: list = []               # bias correction's quantised run of sample 0 (SQNR report)
    thr_envs: list = []
    held_outs: dict = {}
    n_refined = n_rounded = 0
    fl: dict = {}
    if float_first_last:             # TVM's recipe: first conv and last dense stay float
        convs = [n.name for n in fg.nodes if n.op == "conv"]
        denses = [n.name for n in fg.nodes if n.op == "dense"]
        fl = {name: "--float-first-last (TVM's recipe: the first conv and the last dense "
              "stay float)" for name in convs[:1] + denses[-1:]}
    fl.update(float_nodes or {})
    if not samples and mode != "global_scale":
        if getattr(fg, "qdq_ranges", None):
            samples = None
        else:
            raise GraphError("calibration samples are needed (--calib SAMPLES.npz) unless "
                             "--calibration global_scale")
    if not output_thresholds:
        why = "off"
    elif samples is None:
        why = "not run: no calibration samples"
    elif mode == "global_scale":
        why = "not run: --calibration global_scale"
    else:
        why = ""                    # set by _thresholds below
    thr = _no_thresholds(why)
    if samples is None:
        from .quantize import calibrate
        ranges = qdq_layout_ranges(fg, dict(fg.qdq_ranges))
        keep_oversized_float(fg, ranges, fl)
        keep_unranged_float(fg, ranges, fl)
        q = quantize(fg, ranges=ranges, mode=mode, per_channel=per_channel, float_nodes=fl)
    else:
        from .quantize import calibrate, keep_float_below
        n_env = max(sqnr_samples, 1) if (min_layer_sqnr, min_output_sqnr, float_worst) != \
            (None, None, None) else sqnr_samples

        from .thresholds import HELD_OUT, MAX_SAMPLES

        bias_ins = {m.inputs[0] for m in fg.nodes if m.op in ("conv", "dense")} \
            if bias_correct else set()
        bias_envs: dict = {}

        def keep_env(k, env):       # calibration's float runs, reused by the SQNR report
            if k < n_env:
                float_envs.append(env)
            elif bias_ins:          # and by bias correction: its layers' float inputs
                _keep_bias_env(bias_envs, k, env, bias_ins)
            if output_thresholds and k < MAX_SAMPLES and len(thr_envs) == k:
                thr_envs.append(env)
            if output_thresholds is True and MAX_SAMPLES <= k < MAX_SAMPLES + HELD_OUT:
                held_outs[k] = {o: env[o] for o in fg.outputs if o in env}
        ranges = calibrate(fg, samples, mode, percentile, global_scale, on_env=keep_env)
        keep_oversized_float(fg, ranges, fl)
        if output_thresholds and mode != "global_scale":
            ranges, thr = _thresholds(fg, ranges, thr_envs, samples, held_outs,
                                      output_thresholds, mode=mode, percentile=percentile,
                                      global_scale=global_scale, per_channel=per_channel,
                                      float_nodes=fl)
            n_refined = thr["kept"]
        thr_envs.clear()
        held_outs.clear()
        if min_layer_sqnr is not None:
            q, kept = keep_float_below(
                fg, samples[:n_env], min_layer_sqnr, float_nodes=fl, ranges=ranges,
                float_envs=float_envs, mode=mode, percentile=percentile,
                global_scale=global_scale, per_channel=per_channel)
        else:
            q = quantize(fg, ranges=ranges, mode=mode, percentile=percentile,
                         global_scale=global_scale, per_channel=per_channel, float_nodes=fl)
        if float_worst is not None:
            from .reference import run_graph
            from .sensitivity import worst_layers
            envs = float_envs[:n_env] + [run_graph(fg, s, keep=True)   # global_scale: none
                                         for s in samples[len(float_envs):n_env]]
            worst = [(name, op, _finite(db)) for name, op, db in worst_layers(
                q, fg, envs, float_worst, worst_mac_cap)]
        reasons = _kept_reasons(fl, kept, min_layer_sqnr, worst, float_worst, worst_mac_cap)
        if float_worst is not None:
            q = quantize(fg, ranges=ranges, mode=mode, percentile=percentile,
                         global_scale=global_scale, per_channel=per_channel,
                         float_nodes=reasons)
        if min_output_sqnr is not None:
            from .quantize import keep_float_for_output
            q, more, before, after = keep_float_for_output(
                fg, samples[:n_env], min_output_sqnr, float_nodes=reasons,
                max_float=max_float_layers, ranges=ranges, mode=mode, percentile=percentile,
                global_scale=global_scale, per_channel=per_channel)
            out_kept = {"kept": more, "before": before, "after": after}
        if adaround and samples:
            from .adaround import round_weights
            n_rounded = len(round_weights(q, samples))
        if bias_correct and samples:
            from .biascorr import correct_biases
            n_corrected = len(correct_biases(
                q, samples, [float_envs[k] if k < len(float_envs) else bias_envs.get(k)
                             for k in range(len(samples))],
                first_env=q_envs if sqnr_samples >= 1 else None))
        bias_envs.clear()
    t2 = time.perf_counter()
    pending: list = []              # the CPU kernels' LLVM compilation, in a thread
    prog = compile_graph(q, cfg, cpu_only, first_conv_cpu, tuning_log, pending=pending)
    t3 = time.perf_counter()
    try:                            # the SQNR report runs meanwhile
        sq = sqnr_report(q, samples[:sqnr_samples], float_envs, q_envs) if samples else []
    except BaseException:
        _wait_all(pending)          # LLVM's error first (it came first), else this one
        raise
    t4 = time.perf_counter()
    _wait_all(pending)
    t3 += time.perf_counter() - t4  # codegen's seconds include the wait for LLVM
    float_envs.clear()
    q_envs.clear()
    return Compiled(cfg, fg, q, prog,
                    {"mode": mode, "percentile": percentile, "global_scale": global_scale,
                     "cpu_only": cpu_only, "first_conv_cpu": first_conv_cpu,
                     "per_channel": per_channel, "float_first_last": float_first_last,
                     "float_nodes": dict(float_nodes or {}),
                     "sqnr_samples": min(sqnr_samples, len(samples or [])),
                     "calib_samples": len(samples or []),
                     "tuning_log": tuning_log, "min_layer_sqnr": min_layer_sqnr,
                     "kept_float": kept, "min_output_sqnr": min_output_sqnr,
                     "max_float_layers": max_float_layers, "kept_for_output": out_kept,
                     "float_worst": float_worst, "worst_mac_cap": worst_mac_cap,
                     "kept_worst": worst, "bias_correct": bias_correct,
                     "bias_corrected": n_corrected,
                     "output_thresholds": output_thresholds, "thresholds_refined": n_refined,
                     "thresholds": thr,
                     "adaround": adaround, "adarounded": n_rounded,
                     "qdq_requant": qdq_requant, "ort_reference": ort_reference},
                    sq, {"passes": t1 - t0, "quantize": t2 - t1, "codegen": t3 - t2,
                         "total": t3 - t0}, pm)
