"""The pictures a user reads: labels of the roofline do not overlap each other, and
`vta bench --compare --plot` draws both series."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def _overlap(a, b) -> bool:
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def test_roofline_labels_never_overlap():
    import matplotlib.pyplot as plt
    from compiler.cli.bench import _place_labels
    rng = np.random.default_rng(0)
    # clustered points, as C3/C6 or C5/C8 of ResNet-18 are (and a few on top of each other)
    xs = np.concatenate([100 * np.exp(rng.normal(0, 0.05, 12)), [300, 300, 301]])
    ys = np.concatenate([400 * np.exp(rng.normal(0, 0.05, 12)), [200, 200, 201]])
    pts = [(x, y, f"C{k}") for k, (x, y) in enumerate(zip(xs, ys))]
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.scatter(xs, ys)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(30, 1000)
    ax.set_ylim(100, 800)
    _place_labels(ax, pts)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    from matplotlib.text import Text
    boxes = [Text.get_window_extent(t, r) for t in ax.texts]     # the text, not its leader
    assert len(boxes) == len(pts)
    clashes = [(i, j) for i in range(len(boxes)) for j in range(i) if _overlap(boxes[i],
                                                                                boxes[j])]
    plt.close(fig)
    assert not clashes, clashes


def test_bench_compare_plots_both_series(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from compiler.cli import bench
    saved = {}

    def keep(fig, *a, **k):
        saved["fig"] = fig
    monkeypatch.setattr(plt, "close", keep)
    doc = lambda lh, c: {"latency_hiding": lh, "layers": [   # noqa: E731
        {"name": "C2", "_intensity": 400.0, "gemm_ops": 1000, "cycles": c},
        {"name": "C3", "_intensity": 120.0, "gemm_ops": 800, "cycles": c}]}
    bench.roofline([doc(True, 4000), doc(False, 5000)], str(tmp_path / "r.png"))
    ax = saved["fig"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("with latency hiding" == lab for lab in labels)
    assert any("without latency hiding" == lab for lab in labels)
    assert len(ax.collections) == 2 and (tmp_path / "r.png").stat().st_size > 5000
    assert [t.get_text() for t in ax.texts].count("C2") == 2
