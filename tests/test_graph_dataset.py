"""Datasets: many samples through one batch-1 model (compiler/graph/dataset.py, `vta run`
with a sample axis, `vta eval`), in one process and spread over a process pool."""

import functools
import os

import numpy as np
import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402

from compiler.graph.dataset import run_dataset, sim_device, split_samples, top1  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.models import digits_cnn, train_digits_cnn  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


@pytest.fixture(scope="module")
def digits():
    sk = pytest.importorskip("sklearn.datasets")
    x, y = sk.load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1300], perm[1300:]
    m = digits_cnn(train_digits_cnn(x[tr], y[tr], epochs=6))
    c = compile_model(m, CFG, calib={"image": x[tr][:64]})
    return m, c, x[te], y[te]


def _dying_device(marker, cfg):
    """The first process to build a device dies (a lost worker); later ones work."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)
    return sim_device(cfg)


def test_dataset_equals_per_sample_loop_and_float_accuracy(digits):
    m, c, xte, yte = digits
    g = c.program.graph
    samples = split_samples(g, {"image": xte})            # (S, 1, 8, 8) for a (1, 1, 8, 8)
    assert len(samples) == len(xte)
    assert split_samples(g, {"image": xte[:1]}) is None   # exactly the model's shape
    res = run_dataset(c, samples, progress=False)
    scores = res.outputs["scores"]
    assert scores.shape == (len(xte), 1, 10) and (res.vta_cycles > 0).all()
    ex = c.executor(sim_device(CFG))
    loop = np.stack([ex.run({"image": xte[i:i + 1]})["scores"] for i in range(len(xte))])
    assert np.array_equal(scores, loop)                     # bit-exact, in input order
    for i in (0, len(xte) // 2, len(xte) - 1):
        assert np.array_equal(scores[i], run_graph(c.qgraph, samples[i])["scores"])
    acc = top1(scores, yte)
    assert acc == top1(loop, yte)
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    acc_f = top1(np.stack([sess.run(None, {"image": xte[i:i + 1]})[0]
                           for i in range(len(xte))]), yte)
    assert acc_f > 0.9 and acc >= acc_f - 0.01, (acc, acc_f)


def test_process_pool_in_order_and_a_lost_worker_reruns(digits, tmp_path):
    _, c, xte, _ = digits
    samples = split_samples(c.program.graph, {"image": xte[:40]})
    want = run_dataset(c, samples, progress=False).outputs["scores"]
    got = run_dataset(c, samples, workers=2, chunk=5, progress=False)
    assert np.array_equal(got.outputs["scores"], want)
    dev = functools.partial(_dying_device, str(tmp_path / "died"))
    got = run_dataset(c, samples, device=dev, workers=2, chunk=5, progress=False)
    assert (tmp_path / "died").exists()                     # a worker did die
    assert np.array_equal(got.outputs["scores"], want)


def test_bad_sample_arrays_and_labels_are_clear_errors(digits):
    _, c, xte, yte = digits
    g = c.program.graph
    with pytest.raises(GraphError, match="expects"):
        split_samples(g, {"image": xte[:, :, :4]})
    with pytest.raises(GraphError, match="no array"):
        split_samples(g, {"x": xte})
    with pytest.raises(GraphError, match="labels"):
        top1(np.zeros((3, 10)), yte[:4])


def test_cli_run_with_sample_axis_and_eval(digits, tmp_path, capsys):
    from compiler.cli import main
    from compiler.graph.artifact import save
    m, c, xte, yte = digits
    art, xs, ys, out = (str(tmp_path / f) for f in ("d.vtar", "x.npz", "y.npz", "o.npz"))
    save(c, art)
    onnx_path = str(tmp_path / "d.onnx")
    with open(onnx_path, "wb") as f:
        f.write(m.SerializeToString())
    np.savez(xs, image=xte[:30])
    np.savez(ys, labels=yte[:30])
    assert main(["run", art, "--inputs", xs, "--output", out]) == 0
    with np.load(out) as z:
        scores = z["scores"]
    ref = run_dataset(c, split_samples(c.program.graph, {"image": xte[:30]}),
                      progress=False).outputs["scores"]
    assert np.array_equal(scores, ref)
    capsys.readouterr()
    assert main(["eval", art, "--inputs", xs, "--labels", ys, "--onnx", onnx_path,
                 "--workers", "2"]) == 0
    text = capsys.readouterr().out
    assert f"top-1 {top1(ref, yte[:30]):.2%}" in text and "float (onnxruntime)" in text


def test_dask_local_cluster_loads_the_artifact(digits, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    from compiler.graph.artifact import save
    _, c, xte, _ = digits
    art = str(tmp_path / "d.vtar")
    save(c, art)
    samples = split_samples(c.program.graph, {"image": xte[:12]})
    want = run_dataset(c, samples, progress=False).outputs["scores"]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster:
        got = run_dataset(c, samples, scheduler=cluster.scheduler_address, source=art,
                          chunk=3, progress=False)
    assert np.array_equal(got.outputs["scores"], want)


def test_a_dask_run_needs_the_artifact_path(digits):
    _, c, xte, _ = digits
    with pytest.raises(GraphError, match="artifact"):
        run_dataset(c, split_samples(c.program.graph, {"image": xte[:2]}),
                    scheduler="tcp://127.0.0.1:1", progress=False)
