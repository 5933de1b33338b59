"""Build the torchvision part of the model corpus: each model exported once by ``torch.onnx``
(TorchScript exporter, opset 17, batch 1, static shapes) into a cache folder, never into the
repository.

Weights: random (seeded, ``torch.manual_seed(0)``) unless the torchvision checkpoint is
already on disk in torch's hub cache (``$TORCH_HOME/hub/checkpoints``); nothing downloads.
Checkpoints are read with ``torch.load(weights_only=True)`` (no pickled code runs).

Cache folder: ``$VTA_CORPUS_DIR`` or ``~/.cache/vta-stack/corpus``.  Each model is written to
a temporary file and renamed, with ``NAME.json`` beside it (input shape, weights, torch and
torchvision versions, sha256, export seconds).  A model whose ``.onnx`` and ``.json`` exist
is not exported again unless ``--force``.

torch and torchvision are opt-in (``pip install -e ".[corpus]"``, or the local torch wheel).
torchvision's compiled ops may not load against a newer torch; ``import_torchvision`` first
defines the two operator schemas torchvision registers at import (``torchvision::nms`` and
``qnms``), so the pure-Python models import without them.

Usage::

    python benchmarks/corpus/build_corpus.py                 # every model
    python benchmarks/corpus/build_corpus.py --models resnet50,squeezenet1_1 --force
    python benchmarks/corpus/build_corpus.py --list
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

OPSET = 17

# name -> (torchvision builder, module, input shape, keyword arguments)
MODELS: dict[str, tuple[str, str, tuple, dict]] = {
    "resnet50": ("resnet50", "models", (1, 3, 224, 224), {}),
    "mobilenet_v2": ("mobilenet_v2", "models", (1, 3, 224, 224), {}),
    "mobilenet_v3_small": ("mobilenet_v3_small", "models", (1, 3, 224, 224), {}),
    "mobilenet_v3_large": ("mobilenet_v3_large", "models", (1, 3, 224, 224), {}),
    "efficientnet_b0": ("efficientnet_b0", "models", (1, 3, 224, 224), {}),
    "squeezenet1_1": ("squeezenet1_1", "models", (1, 3, 224, 224), {}),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", "models", (1, 3, 224, 224), {}),
    "googlenet": ("googlenet", "models", (1, 3, 224, 224),
                  {"aux_logits": False, "init_weights": True}),
    "densenet121": ("densenet121", "models", (1, 3, 224, 224), {}),
    "regnet_y_400mf": ("regnet_y_400mf", "models", (1, 3, 224, 224), {}),
    "convnext_tiny": ("convnext_tiny", "models", (1, 3, 224, 224), {}),
    "vit_b_16": ("vit_b_16", "models", (1, 3, 224, 224), {}),
    "lraspp_mobilenet_v3_large": ("lraspp_mobilenet_v3_large", "models.segmentation",
                                  (1, 3, 224, 224), {"weights_backbone": None}),
}


def cache_dir() -> Path:
    """The corpus cache folder (created): ``$VTA_CORPUS_DIR`` or ``~/.cache/vta-stack/corpus``."""
    d = Path(os.environ.get("VTA_CORPUS_DIR") or Path.home() / ".cache" / "vta-stack" / "corpus")
    d.mkdir(parents=True, exist_ok=True)
    return d


def model_path(name: str, cache: Path | None = None) -> Path:
    if name not in MODELS:
        raise KeyError(f"unknown corpus model {name!r} (known: {', '.join(MODELS)})")
    return (cache or cache_dir()) / f"{name}.onnx"


def cached(cache: Path | None = None) -> dict[str, Path]:
    """{name: path} of the corpus models already exported into the cache."""
    out = {}
    for name in MODELS:
        p = model_path(name, cache)
        if p.is_file() and p.with_suffix(".json").is_file():
            out[name] = p
    return out


def import_torchvision():
    """Import torch and torchvision; define torchvision's C-op schemas first when its
    compiled extension does not load against this torch (the models themselves are Python)."""
    import torch
    if "torchvision" not in sys.modules and not hasattr(import_torchvision, "_lib"):
        try:
            lib = torch.library.Library("torchvision", "DEF")
        except RuntimeError:        # the namespace is already defined (extension loaded)
            lib = None
        if lib is not None:
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
        import_torchvision._lib = lib          # keep the registration alive
    import torchvision
    return torch, torchvision


def _local_checkpoint(torchvision, builder: str):
    """The default weights' file in torch's hub cache, or None (never downloads)."""
    import torch
    try:
        w = torchvision.models.get_model_weights(builder).DEFAULT
    except Exception:
        return None
    hub = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(w.url)
    return hub if hub.is_file() else None


class _SegOut:
    """Wraps a segmentation model so the export has one output (``out``)."""

    @staticmethod
    def wrap(torch, model):
        class M(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return M(model)


def export(name: str, cache: Path | None = None, force: bool = False) -> Path:
    """Export one corpus model (see the module docstring); returns its ``.onnx`` path."""
    path = model_path(name, cache)
    meta_path = path.with_suffix(".json")
    if path.is_file() and meta_path.is_file() and not force:
        return path
    torch, torchvision = import_torchvision()
    builder, module, shape, kw = MODELS[name]
    mod = torchvision
    for part in module.split("."):
        mod = getattr(mod, part)
    torch.manual_seed(0)
    model = getattr(mod, builder)(weights=None, **kw)
    ckpt = _local_checkpoint(torchvision, builder)
    weights = "random (torch.manual_seed(0))"
    if ckpt is not None:
        model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
        weights = f"pretrained ({ckpt.name})"
    model.eval()
    if module.endswith("segmentation"):
        model = _SegOut.wrap(torch, model).eval()
    x = torch.randn(*shape)
    if hasattr(torch.backends, "mha"):      # ViT: the exporter cannot write the fused MHA kernel
        torch.backends.mha.set_fastpath_enabled(False)
    t0 = time.perf_counter()
    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=path.parent)
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")           # the TorchScript exporter's deprecation
            torch.onnx.export(model, (x,), tmp, opset_version=OPSET, dynamo=False,
                              input_names=["input"], output_names=["output"],
                              do_constant_folding=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    secs = time.perf_counter() - t0
    h = hashlib.sha256(path.read_bytes()).hexdigest()
    meta = {"name": name, "builder": f"torchvision.{module}.{builder}", "kwargs": kw,
            "input": {"input": list(shape)}, "opset": OPSET, "weights": weights,
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "sha256": h, "bytes": path.stat().st_size, "export_seconds": round(secs, 2)}
    fd, tmp = tempfile.mkstemp(suffix=".json.tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, meta_path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--cache", default=None, help="cache folder (default $VTA_CORPUS_DIR or "
                    "~/.cache/vta-stack/corpus)")
    ap.add_argument("--force", action="store_true", help="export again even if cached")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    a = ap.parse_args(argv)
    if a.list:
        for n, (b, m, s, _) in MODELS.items():
            print(f"{n:28s} torchvision.{m}.{b} input {'x'.join(map(str, s))}")
        return 0
    names = [n for n in a.models.split(",") if n] or list(MODELS)
    bad = [n for n in names if n not in MODELS]
    if bad:
        print(f"error: unknown model {bad[0]!r} (known: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    cache = Path(a.cache) if a.cache else cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    for n in names:
        t0 = time.perf_counter()
        p = export(n, cache, a.force)
        meta = json.loads(p.with_suffix(".json").read_text())
        print(f"{n:28s} {meta['bytes'] / 1e6:8.1f} MB  {meta['weights']:32s} "
              f"{time.perf_counter() - t0:6.1f} s  {p}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
