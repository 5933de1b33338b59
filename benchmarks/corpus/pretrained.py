"""Real pretrained ONNX models that ship inside PyPI wheels (nothing downloads at run time),
their fixed input shapes, deterministic offline data and a task metric for each.

- ``ocr_det``: rapidocr-onnxruntime ``models/ch_PP-OCRv4_det_infer.onnx``, text detection
  (DBNet), ``x`` 1x3x160x480, pixel IoU of the text mask.
- ``ocr_cls``: rapidocr-onnxruntime ``models/ch_ppocr_mobile_v2.0_cls_infer.onnx``, text
  direction 0/180, ``x`` 1x3x48x192, accuracy.
- ``ocr_rec``: rapidocr-onnxruntime ``models/ch_PP-OCRv4_rec_infer.onnx``, text recognition
  (SVTR + CTC), ``x`` 1x3x48x320, character accuracy.
- ``captcha``: ddddocr ``common.onnx``, captcha OCR (CNN + BiLSTM + CTC), ``input1``
  1x1x64x192, character accuracy.
- ``magika``: magika ``models/standard_v3_3/model.onnx``, file content type (214 classes),
  ``bytes`` 1x2048 int32, accuracy.
- ``vad``: silero-vad ``data/silero_vad_16k_op15.onnx``, voice activity (16 kHz), ``input``
  1x576 (64 samples of context, the previous chunk's tail, then 512 new ones: silero-vad's
  own ``OnnxWrapper``; without the context it answers ~0 everywhere), ``state`` 2x1x128,
  ``sr``; no offline speech data: ``task_metrics.py`` scores agreement with float on
  synthetic vowels.

Data: text lines are rendered with Pillow's bundled font (``ImageFont.load_default``, no system
font needed) from seeded random strings, so the ground truth is the string itself; ``ocr_cls``
shows each line upright (label 0) or rotated by 180 degrees (label 1); ``ocr_det`` places lines
on a white page and scores the model's text mask (probability > 0.3, DBNet's threshold, grown
back as DBNet's unclip does) against the union of the lines' ink boxes; ``magika`` reads files
of the Python installation whose type is known from their extension (.py python, .pyc
pythonbytecode, .so elf, .json json, .html html, .txt txt, .xml xml, .csv csv).

Each task's ``evaluate(predict, n)`` takes ``predict(feeds) -> list of output arrays`` (one
sample per call), so the same metric scores onnxruntime on the float model, onnxruntime's
int8 model and this compiler's program.  :func:`locate` finds the ``.onnx`` in the installed
package without importing it (the packages' own imports need opencv and more; installing
them with ``pip install --no-deps`` is enough).  :func:`pinned` returns the model with its
symbolic input dimensions set to the shapes above (the compiler needs static shapes).

Usage::

    python benchmarks/corpus/pretrained.py            # float metrics with onnxruntime
"""

from __future__ import annotations

import importlib.util
import os
import random
import string
import sys
from pathlib import Path

import numpy as np

MAX_BYTES = 200 << 20          # size cap for a model file read from a package

PRETRAINED = {
    "ocr_det": dict(package="rapidocr_onnxruntime", pip="rapidocr-onnxruntime",
                    file="models/ch_PP-OCRv4_det_infer.onnx", task="text detection (DBNet)",
                    inputs={"x": (1, 3, 160, 480)}, metric="pixel IoU"),
    "ocr_cls": dict(package="rapidocr_onnxruntime", pip="rapidocr-onnxruntime",
                    file="models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                    task="text direction 0/180", inputs={"x": (1, 3, 48, 192)},
                    metric="accuracy"),
    "ocr_rec": dict(package="rapidocr_onnxruntime", pip="rapidocr-onnxruntime",
                    file="models/ch_PP-OCRv4_rec_infer.onnx",
                    task="text recognition (SVTR + CTC)", inputs={"x": (1, 3, 48, 320)},
                    metric="character accuracy"),
    "captcha": dict(package="ddddocr", pip="ddddocr", file="common.onnx",
                    task="captcha OCR (CNN + LSTM + CTC)", inputs={"input1": (1, 1, 64, 192)},
                    metric="character accuracy"),
    "magika": dict(package="magika", pip="magika", file="models/standard_v3_3/model.onnx",
                   task="file content type (214 classes)", inputs={"bytes": (1, 2048)},
                   metric="accuracy"),
    "vad": dict(package="silero_vad", pip="silero-vad", file="data/silero_vad_16k_op15.onnx",
                task="voice activity detection (16 kHz)",
                inputs={"input": (1, 576), "state": (2, 1, 128)}, metric=None),
}


class PretrainedMissing(RuntimeError):
    """The package that ships the model is not installed (or lacks the file)."""


def locate(name: str) -> Path:
    """The ``.onnx`` file of pretrained model ``name`` inside its installed package."""
    spec = PRETRAINED[name]
    found = importlib.util.find_spec(spec["package"])
    if found is None or not found.submodule_search_locations:
        raise PretrainedMissing(f"{name}: package {spec['pip']!r} is not installed "
                                f"(pip install --no-deps {spec['pip']})")
    root = Path(list(found.submodule_search_locations)[0]).resolve()
    path = (root / spec["file"]).resolve()
    if root not in path.parents:
        raise PretrainedMissing(f"{name}: {spec['file']} leaves the package folder")
    if not path.is_file():
        raise PretrainedMissing(f"{name}: {path} not found in package {spec['pip']!r}")
    if path.stat().st_size > MAX_BYTES:
        raise PretrainedMissing(f"{name}: {path} is larger than {MAX_BYTES} bytes")
    return path


def available() -> list[str]:
    out = []
    for n in PRETRAINED:
        try:
            locate(n)
            out.append(n)
        except PretrainedMissing:
            pass
    return out


def load(name: str):
    import onnx
    return onnx.load(os.fspath(locate(name)))


def pinned(name: str):
    """The model with every symbolic input dimension set from ``PRETRAINED[name]['inputs']``."""
    m = load(name)
    shapes = PRETRAINED[name]["inputs"]
    init = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in init or vi.name not in shapes:
            continue
        dims = vi.type.tensor_type.shape.dim
        for d, v in zip(dims, shapes[vi.name]):
            d.ClearField("dim_param")
            d.dim_value = v
    return m


# ------------------------------------------------------------------ data

def _font(size: int):
    from PIL import ImageFont
    return ImageFont.load_default(size=size)


def random_strings(n: int, seed: int, alphabet: str, lo: int, hi: int) -> list[str]:
    r = random.Random(seed)
    return ["".join(r.choice(alphabet) for _ in range(r.randint(lo, hi))) for _ in range(n)]


def render_line(text: str, height: int = 48, size: int = 32, pad: int = 6):
    """Black text on white, the line's own width; returns an RGB PIL image."""
    from PIL import Image, ImageDraw
    f = _font(size)
    l, t, r, b = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=f)
    img = Image.new("RGB", (r - l + 2 * pad, height), "white")
    ImageDraw.Draw(img).text((pad - l, (height - (b - t)) // 2 - t), text, font=f, fill="black")
    return img


def _norm_rgb(img, h: int, w: int) -> np.ndarray:
    """PaddleOCR's resize_norm_img: keep the aspect ratio, scale to [-1, 1], zero-pad right."""
    from PIL import Image
    rw = min(w, int(np.ceil(h * img.width / img.height)))
    a = np.asarray(img.resize((rw, h), Image.BILINEAR), np.float32).transpose(2, 0, 1)
    out = np.zeros((3, h, w), np.float32)
    out[:, :, :rw] = (a / 255.0 - 0.5) / 0.5
    return out[None]


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def char_accuracy(truth: list[str], got: list[str]) -> float:
    """1 - total edit distance / total characters (clipped at 0)."""
    d = sum(levenshtein(t, g) for t, g in zip(truth, got))
    return max(0.0, 1.0 - d / max(1, sum(len(t) for t in truth)))


def ctc_greedy(indices, charset: list[str], blank: int = 0) -> str:
    out, last = [], None
    for i in np.asarray(indices).ravel().tolist():
        if i != last and i != blank and 0 <= i < len(charset):
            out.append(charset[i])
        last = i
    return "".join(out)


ALNUM = string.ascii_letters + string.digits


# ------------------------------------------------------------------ tasks

def samples(name: str, n: int, seed: int = 0):
    """(feeds list, labels) for task ``name``: ``n`` deterministic samples."""
    if name == "ocr_rec":
        texts = random_strings(n, seed, ALNUM, 4, 10)
        return [{"x": _norm_rgb(render_line(t), 48, 320)} for t in texts], texts
    if name == "ocr_cls":
        texts = random_strings(n, seed, ALNUM, 5, 12)
        feeds, labels = [], []
        for k, t in enumerate(texts):
            img = render_line(t)
            flip = k % 2
            if flip:
                img = img.rotate(180)
            feeds.append({"x": _norm_rgb(img, 48, 192)})
            labels.append(flip)
        return feeds, labels
    if name == "ocr_det":
        return _det_pages(n, seed)
    if name == "captcha":
        texts = random_strings(n, seed, string.ascii_lowercase + string.digits, 4, 6)
        feeds = []
        for t in texts:
            from PIL import Image
            img = render_line(t, height=64, size=40, pad=8).convert("L")
            canvas = Image.new("L", (192, 64), 255)
            img = img.resize((min(192, img.width), 64), Image.BILINEAR)
            canvas.paste(img, (0, 0))
            feeds.append({"input1": (np.asarray(canvas, np.float32) / 255.0)[None, None]})
        return feeds, texts
    if name == "magika":
        return _magika_files(n, seed)
    raise KeyError(f"{name}: no task data (metric {PRETRAINED[name]['metric']})")


def _det_pages(n: int, seed: int):
    from PIL import Image, ImageDraw
    r = random.Random(seed)
    feeds, masks = [], []
    H, W = PRETRAINED["ocr_det"]["inputs"]["x"][2:]
    f = _font(22)
    for _ in range(n):
        img = Image.new("RGB", (W, H), "white")
        d = ImageDraw.Draw(img)
        mask = np.zeros((H, W), bool)
        y = r.randint(4, 16)
        while y + 30 < H:
            text = " ".join(random_strings(r.randint(1, 3), r.randint(0, 1 << 30), ALNUM, 3, 8))
            x = r.randint(4, W // 3)
            d.text((x, y), text, font=f, fill="black")
            l, t, rr, b = d.textbbox((x, y), text, font=f)
            mask[max(0, t):min(H, b), max(0, l):min(W, rr)] = True
            y = b + r.randint(10, 24)
        a = np.asarray(img, np.float32).transpose(2, 0, 1)
        feeds.append({"x": ((a / 255.0 - 0.5) / 0.5)[None]})
        masks.append(mask)
    return feeds, masks


_MAGIKA_EXT = {".py": "python", ".pyc": "pythonbytecode", ".so": "elf", ".json": "json",
               ".html": "html", ".txt": "txt", ".xml": "xml", ".csv": "csv"}


def _magika_files(n: int, seed: int):
    """Files of the Python installation with a known type: ``n`` per type at most, seeded."""
    import sysconfig
    roots = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    by_type: dict[str, list[Path]] = {}
    for root in sorted(roots):
        for dirpath, _, files in os.walk(root, followlinks=False):
            for fn in sorted(files):
                lab = _MAGIKA_EXT.get(os.path.splitext(fn)[1])
                p = Path(dirpath) / fn
                if lab and not p.is_symlink() and p.stat().st_size >= 64:
                    by_type.setdefault(lab, []).append(p)
    r = random.Random(seed)
    feeds, labels = [], []
    for lab in sorted(by_type):
        for p in r.sample(by_type[lab], min(n, len(by_type[lab]))):
            feeds.append({"bytes": magika_features(p)})
            labels.append(lab)
    return feeds, labels


def magika_features(path: Path, beg: int = 1024, end: int = 1024, block: int = 4096,
                    pad: int = 256) -> np.ndarray:
    """Magika's standard_v3 features: the first and last bytes, whitespace-stripped, padded."""
    size = path.stat().st_size
    k = min(block, size)
    with open(path, "rb") as f:
        head = f.read(k)
        f.seek(size - k)
        tail = f.read(k)
    head, tail = head.lstrip()[:beg], tail.rstrip()[-end:] if end else b""
    b = list(head) + [pad] * (beg - len(head))
    e = [pad] * (end - len(tail)) + list(tail)
    return np.asarray([b + e], np.int32)


def _magika_labels() -> list[str]:
    import json
    cfg = locate("magika").parent / "config.min.json"
    return json.loads(cfg.read_text())["target_labels_space"]


def _rec_charset() -> list[str]:
    m = load("ocr_rec")
    meta = {p.key: p.value for p in m.metadata_props}
    return ["blank"] + meta["character"].splitlines() + [" "]


def _captcha_charset() -> list[str]:
    import ast
    src = (locate("captcha").parent / "charsets.py").read_text(encoding="utf-8")
    for node in ast.parse(src).body:          # literal lists only: nothing is executed
        if isinstance(node, ast.Assign) and node.targets[0].id == "CHARSET_BETA":
            return ast.literal_eval(node.value)
    raise PretrainedMissing("captcha: CHARSET_BETA not found in ddddocr/charsets.py")


#: DBNet predicts shrunk text kernels and grows them back ("unclip", ratio 1.6: about 0.8 of
#: the kernel's height); for the 22-pixel font of the pages that is a 5-pixel dilation.
DET_UNCLIP_PX = 5


def _dilate(m: np.ndarray, k: int) -> np.ndarray:
    """Binary dilation by a (2k+1) square, zero outside the image."""
    h, w = m.shape
    p = np.pad(m, k)
    out = np.zeros_like(m)
    for dy in range(2 * k + 1):
        for dx in range(2 * k + 1):
            out |= p[dy:dy + h, dx:dx + w]
    return out


def _captcha_indices(y: np.ndarray) -> np.ndarray:
    """ddddocr's output: logits (T, 1, classes) (its declared shape says (1, T) indices)."""
    y = np.asarray(y)
    return y.argmax(-1)[:, 0] if y.ndim == 3 else y.ravel()


def evaluate(name: str, predict, n: int = 32, seed: int = 0) -> float:
    """The task metric of ``name`` on ``n`` samples, ``predict(feeds) -> [outputs]``."""
    feeds, labels = samples(name, n, seed)
    if name == "ocr_rec":
        cs = _rec_charset()
        got = [ctc_greedy(predict(f)[0][0].argmax(-1), cs) for f in feeds]
        return char_accuracy(labels, got)
    if name == "captcha":
        cs = _captcha_charset()
        got = [ctc_greedy(_captcha_indices(predict(f)[0]), cs) for f in feeds]
        return char_accuracy(labels, got)
    if name == "ocr_cls":
        got = [int(predict(f)[0][0].argmax()) for f in feeds]
        return float(np.mean(np.asarray(got) == np.asarray(labels)))
    if name == "ocr_det":
        inter = union = 0
        for f, m in zip(feeds, labels):
            p = _dilate(predict(f)[0][0, 0] > 0.3, DET_UNCLIP_PX)
            inter += int((p & m).sum())
            union += int((p | m).sum())
        return inter / max(1, union)
    if name == "magika":
        names = _magika_labels()
        got = [names[int(predict(f)[0][0].argmax())] for f in feeds]
        return float(np.mean([g == t for g, t in zip(got, labels)]))
    raise KeyError(f"{name}: no metric")


def ort_predict(model):
    """``predict`` through onnxruntime (the float reference; tests and benchmarks only)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString() if hasattr(model, "SerializeToString")
                             else os.fspath(model), so, providers=["CPUExecutionProvider"])
    return lambda feeds: s.run(None, feeds)


def ort_int8(name: str, calib: int = 16, seed: int = 1):
    """onnxruntime's own static int8 quantisation (:func:`ort_int8_of`) of the pinned model,
    calibrated on ``calib`` samples drawn with another seed than the evaluation's; returns
    (quantised ModelProto, "per-channel" or "per-tensor")."""
    return ort_int8_of(pinned(name), samples(name, calib, seed)[0])


def ort_int8_of(model, feeds):
    """onnxruntime's static int8 quantisation (QDQ, MinMax, per-channel weights, or per
    tensor where onnxruntime's per-channel output is an invalid graph: ddddocr's LSTM) of
    ``model`` (ModelProto or path, static input shapes) calibrated on the feed dicts
    ``feeds``; returns (quantised ModelProto, "per-channel" or "per-tensor")."""
    import tempfile

    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    if not hasattr(model, "SerializeToString"):
        model = onnx.load(os.fspath(model))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    err = None
    for per_channel in (True, False):
        with tempfile.TemporaryDirectory() as d:
            src, dst = os.path.join(d, "m.onnx"), os.path.join(d, "q.onnx")
            onnx.save(model, src)
            quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ,
                            per_channel=per_channel, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8)
            q = onnx.load(dst)
        try:
            ort_predict(q)
            return q, "per-channel" if per_channel else "per-tensor"
        except Exception as e:  # onnxruntime rejects its own per-channel graph: per tensor
            err = e
    raise err


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="float task metrics of the pretrained models")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--int8", action="store_true", help="also onnxruntime's static int8 "
                    "quantisation of each model (calibrated on 16 other samples)")
    a = ap.parse_args(argv)
    for name, spec in PRETRAINED.items():
        try:
            path = locate(name)
        except PretrainedMissing as e:
            print(f"{name:8s} missing: {e}")
            continue
        if spec["metric"] is None:
            print(f"{name:8s} {path.name}: no task metric (op inventory only)")
            continue
        v = evaluate(name, ort_predict(pinned(name)), a.n)
        q = ""
        if a.int8:
            try:
                qm, how = ort_int8(name)
                q = f"  int8 (onnxruntime QDQ, {how}) {evaluate(name, ort_predict(qm), a.n):.4f}"
            except Exception as e:  # reported, the float number stands
                q = f"  int8: {type(e).__name__}: {str(e)[:100]}"
        print(f"{name:8s} {spec['metric']:20s} float {v:.4f}{q}  ({spec['pip']} {spec['file']})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
