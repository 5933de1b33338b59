"""Task metrics of the pretrained models three ways, on the same samples: onnxruntime float,
onnxruntime's static int8 (``pretrained.ort_int8``: QDQ, MinMax, calibrated on 16 samples
drawn with seed 1) and this project's int8 program on the timed simulator (calibrated on the
same 16 samples; percentile calibration unless ``--mode``; ``--min-layer-sqnr DB`` keeps the
layers below DB float on the CPU).

silero-vad has no offline speech data: its row is the agreement of the speech/non-speech
decision (probability > 0.5) per 512-sample frame with the float model's, over seeded
synthetic audio (voiced segments: harmonics of a 100-220 Hz pitch under a moving formant
envelope; silence and noise between), the recurrent state carried from frame to frame as
silero's own loop does; float's agreement is 1 by definition.

Usage::

    python benchmarks/corpus/task_metrics.py [--models ocr_cls,...] [--n 32] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

TASKS = ("ocr_cls", "magika", "captcha", "ocr_rec", "ocr_det", "vad")


def compiled_predict(name, calib_feeds, mode="percentile", min_layer_sqnr=None):
    """``predict(feeds) -> [outputs]`` of this compiler's int8 program on the timed simulator,
    and the compile CPU seconds."""
    from benchmarks.corpus import pretrained
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    from vta_runtime import SimDevice
    cfg = VTAConfig()
    t0 = time.process_time()
    c = compile_model(pretrained.pinned(name), cfg, calib=calib_feeds, mode=mode,
                      min_layer_sqnr=min_layer_sqnr)
    secs = time.process_time() - t0
    ex = c.executor(SimDevice(cfg, timed=True))
    outs = list(c.qgraph.outputs)
    return (lambda feeds: [np.asarray(v) for v in map(ex.run(feeds).get, outs)]), secs


# ------------------------------------------------------------------ vad

def vad_audio(n_frames: int, seed: int = 0, sr: int = 16000) -> np.ndarray:
    """Seeded synthetic audio of ``n_frames`` x 512 samples (see the module docstring)."""
    rng = np.random.default_rng(seed)
    out = []
    total = n_frames * 512
    while sum(map(len, out)) < total:
        dur = int(rng.uniform(0.3, 1.2) * sr)
        t = np.arange(dur) / sr
        kind = rng.integers(0, 3)
        if kind == 0:                                   # silence with a little noise
            seg = rng.normal(0, 0.002, dur)
        elif kind == 1:                                 # broadband noise
            seg = rng.normal(0, 0.05, dur)
        else:                                           # voiced: harmonics, moving formant
            f0 = rng.uniform(100, 220) * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
            ph = 2 * np.pi * np.cumsum(f0) / sr
            fmt = 500 + 400 * np.sin(2 * np.pi * rng.uniform(2, 5) * t)
            seg = sum(np.exp(-((k * f0 - fmt) / 300) ** 2) * np.sin(k * ph) / k
                      for k in range(1, 30))
            seg = 0.3 * seg / max(1e-6, np.abs(seg).max()) * np.hanning(dur) ** 0.2
        out.append(seg)
    return np.concatenate(out)[:total].astype(np.float32)


def vad_decisions(predict, audio: np.ndarray) -> np.ndarray:
    """Speech probability per 512-sample frame, the state carried (silero's loop)."""
    state = np.zeros((2, 1, 128), np.float32)
    probs = []
    for k in range(len(audio) // 512):
        y, state = predict({"input": audio[None, k * 512:(k + 1) * 512],
                            "state": state, "sr": np.array(16000, np.int64)})[:2]
        state = np.asarray(state, np.float32)
        probs.append(float(np.asarray(y).reshape(-1)[0]))
    return np.asarray(probs)


def vad_row(n_frames: int) -> dict:
    from benchmarks.corpus import pretrained
    m = pretrained.pinned("vad")
    audio = vad_audio(n_frames, seed=0)
    p_float = vad_decisions(pretrained.ort_predict(m), audio)
    calib = []
    st = np.zeros((2, 1, 128), np.float32)
    cal_audio = vad_audio(16, seed=1)
    ort_f = pretrained.ort_predict(m)
    for k in range(16):                 # calibration frames with their carried state
        f = {"input": cal_audio[None, k * 512:(k + 1) * 512], "state": st,
             "sr": np.array(16000, np.int64)}
        calib.append(f)
        st = np.asarray(ort_f(f)[1], np.float32)
    pred, secs = compiled_predict("vad", calib)
    p_ours = vad_decisions(pred, audio)
    agree = float(np.mean((p_ours > 0.5) == (p_float > 0.5)))
    return {"metric": "frame agreement with float (p > 0.5)", "float": 1.0,
            "ours": round(agree, 4), "speech_frames_float": int((p_float > 0.5).sum()),
            "frames": len(p_float), "mean_abs_p_diff": round(float(np.abs(p_ours - p_float)
                                                                   .mean()), 4),
            "compile_cpu_s": round(secs, 1)}


# ------------------------------------------------------------------ main

def row(name: str, n: int, mode: str, min_sqnr) -> dict:
    from benchmarks.corpus import pretrained
    if name == "vad":
        return vad_row(n * 8)
    spec = pretrained.PRETRAINED[name]
    r = {"metric": spec["metric"]}
    r["float"] = round(pretrained.evaluate(name, pretrained.ort_predict(pretrained.pinned(name)),
                                           n), 4)
    try:
        qm, how = pretrained.ort_int8(name)
        r["ort_int8"] = round(pretrained.evaluate(name, pretrained.ort_predict(qm), n), 4)
        r["ort_int8_kind"] = how
    except Exception as e:  # reported; the other columns stand
        r["ort_int8"] = f"{type(e).__name__}: {str(e)[:80]}"
    calib = pretrained.samples(name, 16, 1)[0]
    pred, secs = compiled_predict(name, calib, mode, min_sqnr)
    t0 = time.process_time()
    r["ours"] = round(pretrained.evaluate(name, pred, n), 4)
    r["compile_cpu_s"] = round(secs, 1)
    r["eval_cpu_s"] = round(time.process_time() - t0, 1)
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(TASKS))
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--mode", default="percentile")
    ap.add_argument("--min-layer-sqnr", type=float, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = {}
    for name in a.models.split(","):
        try:
            rows[name] = row(name, a.n, a.mode, a.min_layer_sqnr)
        except Exception as e:  # one model's failure does not stop the table
            rows[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        print(f"{name:8s} {json.dumps(rows[name])}", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
