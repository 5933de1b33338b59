"""Whole networks on VTA + CPU: the integer program is bit-exact with the numpy reference
interpretation of the quantised graph; fidelity to the float model (onnxruntime); the
artifact; ``vta compile`` / ``vta run``."""

import json
import os
import zipfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.artifact import ArtifactError, load, save  # noqa: E402
from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.models import resnet18, sample_images, small_cnn  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()
SMALL = {"LOG_BLOCK": 3, "LOG_WGT_BUFF_SIZE": 16, "LOG_INP_BUFF_SIZE": 14,
         "LOG_ACC_BUFF_SIZE": 16}                               # a 1x8x8 VTA


@pytest.fixture(scope="module")
def r18():
    m = resnet18(image=32, width=16, classes=10)
    xs = sample_images(6, 32, seed=21)
    c = compile_model(m, CFG, calib={"input": xs[:3]})
    return m, xs, c


def _int_outputs(c, ex_out_logits, feeds):
    """The reference interpretation of the quantised graph (every value)."""
    return run_graph(c.qgraph, feeds, keep=True)


def test_resnet18_bit_exact_on_timed_sim_and_activations_stay_on_device(r18):
    m, xs, c = r18
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs[3:5]:
        feeds = {"input": x[None]}
        got = ex.run(feeds)
        ref = run_graph(c.qgraph, feeds)
        assert np.array_equal(got["logits"], ref["logits"])
    kinds = [s.kind for s in c.program.steps]
    assert kinds.count("vta") == 21                 # 20 convs (the stem fused with the max
    #                                                 pool: compiler/vta/conv_pool.py), the dense
    assert c.program.graph.transforms == 2          # one pack after quantize, one unpack
    on_vta = {s.node.output for s in c.program.steps if s.kind == "vta"}
    for s, r in zip(c.program.steps, ex.records):
        if s.kind == "vta":
            # a VTA layer reading a VTA layer's output takes it from device memory
            # (unless the kernel itself re-lays the input out on the host: the compiler's
            # scratch padding of layers with very few output tiles)
            assert not (set(r.get("uploaded", [])) - set(r.get("host_prep", []))) & on_vta, \
                s.node.name
            assert r["cycles"] > 0 and r["dram_bytes"] > 0
    # uploads: the packed input, the maxpool output (conv + residual), the pooled features
    assert sum(bool(r.get("uploaded")) for r in ex.records if not r.get("host_prep")) <= 4
    summ = ex.summary()            # (the time split depends on the host's load: not asserted)
    assert summ["vta_ops"] == 21 and summ["vta_cycles"] == sum(r["cycles"] for r in ex.records)


def test_every_quantised_value_matches_reference(r18):
    """The executor's intermediate int8 activations equal the reference, layer by layer."""
    m, xs, c = r18
    from compiler.graph.executor import Executor
    ex = Executor(c.program, SimDevice(CFG))
    feeds = {"input": xs[5][None]}
    g = c.program.graph
    saved = g.outputs
    vta_vals = [s.node.output for s in c.program.steps if s.kind == "vta"]
    g.outputs = list(saved) + vta_vals
    try:
        got = ex.run(feeds)
    finally:
        g.outputs = saved
    ref = run_graph(c.qgraph, feeds, keep=True)
    from compiler.graph.reference import unpack
    for v in vta_vals:
        plain = ref[v]
        assert np.array_equal(unpack(got[v], plain.shape), plain), v


def test_fidelity_vs_onnxruntime(r18):
    m, xs, c = r18
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG))
    agree, sig, err = 0, 0.0, 0.0
    for x in xs[3:6]:
        ref = sess.run(None, {"input": x[None]})[0]
        got = ex.run({"input": x[None]})["logits"]
        agree += int(ref.argmax() == got.argmax())
        sig += float((ref ** 2).sum())
        err += float(((ref - got) ** 2).sum())
    sqnr = 10 * np.log10(sig / err)
    assert agree >= 2 and sqnr > 10, (agree, sqnr)
    rep = c.report()
    assert "SQNR" in rep and "qconv" in rep and "vta" in rep


def test_small_cnn_cpu_only_and_first_conv_cpu_bit_exact():
    m = small_cnn()
    xs = np.random.default_rng(3).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    ref_c = compile_model(m, CFG, calib={"image": xs})
    for kw in ({"cpu_only": True}, {"first_conv_cpu": True}):
        c = compile_model(m, CFG, calib={"image": xs}, **kw)
        assert np.array_equal(c.qgraph.params[c.qgraph.nodes[1].inputs[1]],
                              ref_c.qgraph.params[ref_c.qgraph.nodes[1].inputs[1]])
        kinds = {s.node.op: s.kind for s in c.program.steps}
        if kw.get("cpu_only"):
            assert "vta" not in kinds.values()
        else:
            assert c.program.steps[1].kind == "cpu" or kinds["qconv"] in ("cpu", "vta")
        ex = c.executor(SimDevice(CFG))
        for x in xs:
            got = ex.run({"image": x})
            assert np.array_equal(got["scores"], run_graph(c.qgraph, {"image": x})["scores"])
            assert np.array_equal(got["scores"], ref_c.executor(SimDevice(CFG)).run(
                {"image": x})["scores"])


def _grouped_model():
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n) for n, s in
             [("w1", (16, 1, 3, 3)), ("b1", (16,)), ("w2", (16, 16, 3, 3)), ("b2", (16,))]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], group=16, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], dilations=[2, 2],
                              pads=[2, 2, 2, 2]),
             helper.make_node("AveragePool", ["c2"], ["p"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Add", ["p", "p"], ["y"])]
    g = helper.make_graph(nodes, "grouped",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 3, 3])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_depthwise_and_dilated_conv_on_cpu_bit_exact():
    m = _grouped_model()
    xs = np.random.default_rng(5).normal(size=(3, 1, 16, 6, 6)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs})
    by_op = [(s.node.op, s.kind) for s in c.program.steps]
    assert ("qconv", "cpu") in by_op and ("qavgpool", "cpu") in by_op
    ex = c.executor(SimDevice(CFG))
    got = ex.run({"x": xs[0]})
    assert np.array_equal(got["y"], run_graph(c.qgraph, {"x": xs[0]})["y"])
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": xs[0]})[0]
    assert np.corrcoef(ref.ravel(), got["y"].ravel())[0, 1] > 0.97


def test_calibration_modes():
    m = small_cnn()
    xs = np.random.default_rng(6).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    fr = {}
    for mode in ("max", "percentile", "global_scale"):
        c = compile_model(m, CFG, calib={"image": xs}, mode=mode, percentile=90.0)
        fr[mode] = [v.frac for v in c.qgraph.values.values() if v.dtype == "int8"
                    and v.name not in c.qgraph.params]
    assert all(f == 4 for f in fr["global_scale"])          # 8.0 -> 2^-4 steps (TVM)
    assert sum(fr["percentile"]) > sum(fr["max"])           # clipping outliers: finer scale
    with pytest.raises(GraphError, match="calibration samples are needed"):
        compile_model(m, CFG)


def test_artifact_roundtrip_tamper_and_config(tmp_path, r18):
    m, xs, c = r18
    feeds = {"input": xs[3][None]}
    want = c.executor(SimDevice(CFG)).run(feeds)["logits"]
    for path in (str(tmp_path / "r18.vtar"), str(tmp_path / "r18dir")):
        save(c, path)
        c2 = load(path)
        got = c2.executor(SimDevice(c2.cfg)).run(feeds)["logits"]
        assert np.array_equal(got, want)
    d = tmp_path / "r18dir"
    assert any(f.endswith(".txt") for f in os.listdir(d / "vta"))
    assert any(f.endswith(".insns.bin") for f in os.listdir(d / "vta"))
    assert (d / "params").is_dir() and json.loads((d / "manifest.json").read_text())["files"]
    # a tampered parameter file
    p = sorted((d / "params").iterdir())[0]
    p.write_bytes(p.read_bytes()[:-1] + b"\x01")
    with pytest.raises(ArtifactError, match=r"params/000.npy does not match its hash"):
        load(str(d))
    # a different configuration
    with pytest.raises(ArtifactError, match=r"different VTA configuration \(1x16x16\) than "
                                            r"the one given \(1x8x8\)"):
        load(str(tmp_path / "r18.vtar"), cfg=VTAConfig.from_dict({**CFG.to_dict(), **SMALL}))
    # not an artifact
    bad = tmp_path / "bad.vtar"
    bad.write_bytes(b"nope")
    with pytest.raises(ArtifactError, match="not a compiled network"):
        load(str(bad))
    with zipfile.ZipFile(tmp_path / "r18.vtar") as z:
        assert "graph.json" in z.namelist() and "config.json" in z.namelist()


def test_trace_has_vta_and_cpu_on_one_timeline(tmp_path, r18):
    m, xs, c = r18
    ex = c.executor(SimDevice(CFG, timed=True))
    ex.run({"input": xs[4][None]})
    t = tmp_path / "t.json"
    ex.trace(str(t))
    ev = [e for e in json.loads(t.read_text())["traceEvents"] if e["ph"] == "X"]
    assert {e["tid"] for e in ev} == {1, 2}
    assert all(b["ts"] >= a["ts"] + a["dur"] - 1e-6 for a, b in zip(ev, ev[1:]))
    assert "cycles" in ex.table()


def test_cli_compile_and_run(tmp_path, capsys):
    from compiler.cli import main
    m = small_cnn()
    mp = tmp_path / "cnn.onnx"
    onnx.save(m, str(mp))
    xs = np.random.default_rng(8).normal(size=(4, 1, 1, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", image=xs)
    np.savez(tmp_path / "x.npz", image=xs[0])
    art = str(tmp_path / "cnn.vtar")
    assert main(["compile", str(mp), "-o", art, "--calib", str(tmp_path / "calib.npz")]) == 0
    out = capsys.readouterr().out
    assert "partition" in out and "SQNR" in out and "qconv" in out
    y = str(tmp_path / "y.npz")
    trace = str(tmp_path / "t.json")
    assert main(["run", art, "--inputs", str(tmp_path / "x.npz"), "--output", y,
                 "--trace", trace, "--profile"]) == 0
    with np.load(y) as z:
        assert z["scores"].dtype == np.float32 and z["scores"].shape == (1, 10)
        c = load(art)
        assert np.array_equal(z["scores"], run_graph(c.qgraph, {"image": xs[0]})["scores"])
    assert os.path.isfile(trace)
    # user errors: one line, exit 2
    np.savez(tmp_path / "wrong.npz", img=xs[0])
    assert main(["run", art, "--inputs", str(tmp_path / "wrong.npz"), "--output", y]) == 2
    err = capsys.readouterr().err
    assert "no array named 'image'" in err and err.count("\n") == 1
    assert main(["compile", str(mp), "-o", art, "--calib", str(tmp_path / "calib.npz"),
                 "--tuning-log", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "calib.npz"), "--inputs", str(tmp_path / "x.npz"),
                 "--output", y]) == 2
    assert "not a compiled network" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_network_bit_exact_on_rtl():
    from vta_runtime import RtlDevice
    m = small_cnn(channels=(16, 16))
    xs = np.random.default_rng(9).normal(size=(2, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(m, CFG, calib={"image": xs})
    got = c.executor(RtlDevice(CFG)).run({"image": xs[0]})
    assert np.array_equal(got["scores"], run_graph(c.qgraph, {"image": xs[0]})["scores"])


def test_flatten_of_packed_data_needs_no_layout_transform():
    """conv -> pool -> flatten -> dense: the dense weights are permuted to the packed
    flatten order at compile time, so the whole body stays packed and on the device."""
    m = small_cnn()
    xs = np.random.default_rng(10).normal(size=(3, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(m, CFG, calib={"image": xs})
    assert c.program.graph.transforms == 2                  # pack the input, unpack scores
    # the first conv and its max pool run as one kernel (compiler/vta/conv_pool.py)
    assert [s.kind for s in c.program.steps].count("vta") == 4
    ex = c.executor(SimDevice(CFG))
    for x in xs:
        got = ex.run({"image": x})
        assert np.array_equal(got["scores"], run_graph(c.qgraph, {"image": x})["scores"])
        dense = next(r for r in ex.records if r["op"] == "qdense")
        assert not dense.get("uploaded") and not any(r.get("to_host_bytes")
                                                     for r in ex.records[:-3])


def test_tuning_log_schedules_are_applied(tmp_path):
    """A record for a layer's workload in the log is the schedule that layer is built with
    (compiler.tuner.apply_history_best); the result stays bit-exact."""
    tuner = pytest.importorskip("compiler.tuner")
    from compiler.tuner.records import LogWriter, Record
    from compiler.tuner.space import workload_key
    m = small_cnn()
    xs = np.random.default_rng(12).normal(size=(3, 1, 1, 8, 8)).astype(np.float32)
    c0 = compile_model(m, CFG, calib={"image": xs})
    step = next(s for s in c0.program.steps if s.node.op == "qconv")
    knobs = dict(step.kernel.knobs.as_dict())
    knobs["vthreads"], knobs["tile_h"] = 1, 2
    assert knobs != step.kernel.knobs.as_dict()
    log = tmp_path / "t.jsonl"
    w = LogWriter(str(log))
    w.write(Record(workload_key(step.kernel.workload), {}, CFG.to_dict(), knobs, 10 ** 6))
    w._f.close()
    c1 = compile_model(m, CFG, calib={"image": xs}, tuning_log=str(log))
    s1 = next(s for s in c1.program.steps if s.node.op == "qconv")
    assert s1.kernel.knobs.as_dict()["vthreads"] == 1
    assert s1.kernel.knobs.as_dict()["tile_h"] == 2
    # the artifact keeps the tuned schedule (no log needed to run it)
    save(c1, str(tmp_path / "tuned.vtar"))
    s2 = next(s for s in load(str(tmp_path / "tuned.vtar")).program.steps
              if s.node.op == "qconv")
    assert s2.kernel.knobs.as_dict() == s1.kernel.knobs.as_dict()
    got = c1.executor(SimDevice(CFG)).run({"image": xs[0]})
    assert np.array_equal(got["scores"], run_graph(c1.qgraph, {"image": xs[0]})["scores"])
    log.write_text("{not json\n")
    with pytest.raises(GraphError, match="--tuning-log"):
        compile_model(m, CFG, calib={"image": xs}, tuning_log=str(log))
    del tuner


def test_run_rejects_bad_inputs(r18):
    m, xs, c = r18
    ex = c.executor(SimDevice(CFG))
    with pytest.raises(GraphError, match=r"input 'input': shape \(1, 3, 16, 16\), the model "
                                         r"expects \(1, 3, 32, 32\)"):
        ex.run({"input": np.zeros((1, 3, 16, 16), np.float32)})
    with pytest.raises(GraphError, match="no array named 'input' for graph input"):
        ex.run({"x": xs[0][None]})


@pytest.mark.parametrize("upd", [SMALL, {"LOG_BATCH": 1}], ids=["1x8x8", "2x16x16"])
def test_other_configurations_bit_exact(upd):
    """Blocks of 8 (channels padded to 8, not 16) and BATCH 2 (a batch-1 model is zero-
    padded to the hardware batch): every conv still runs on VTA, bit-exact."""
    cfg = VTAConfig.from_dict({**CFG.to_dict(), **upd})
    m = resnet18(image=16, width=8, classes=10)
    xs = sample_images(3, 16, seed=13)
    c = compile_model(m, cfg, calib={"input": xs[:2]})
    assert [s.kind for s in c.program.steps].count("vta") == 21     # stem + max pool fused
    got = c.executor(SimDevice(cfg)).run({"input": xs[2][None]})
    assert np.array_equal(got["logits"], run_graph(c.qgraph, {"input": xs[2][None]})["logits"])


def test_concat_of_differently_scaled_branches_bit_exact():
    """Two VTA convs with different output scales, concatenated on the CPU (each branch
    requantised to the coarser scale), then relu: bit-exact, and close to onnxruntime."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array((rng.normal(size=s) * sc).astype(np.float32), n)
             for n, s, sc in [("w1", (16, 16, 3, 3), 0.3), ("w2", (8, 16, 1, 1), 3.0)]]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "cat",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 5, 5])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    xs = rng.normal(size=(3, 1, 16, 5, 5)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs})
    cat = c.qgraph.node("c")
    assert cat.attrs["shifts"] != [0, 0]                    # the branches had other scales
    assert ("qconcat", "cpu") in [(s.node.op, s.kind) for s in c.program.steps]
    got = c.executor(SimDevice(CFG)).run({"x": xs[2]})["y"]
    assert np.array_equal(got, run_graph(c.qgraph, {"x": xs[2]})["y"])
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": xs[2]})[0]
    assert np.corrcoef(ref.ravel(), got.ravel())[0, 1] > 0.99


def test_tvm_recipe_global_scale_with_float_first_and_last_layer(r18):
    """TVM's baseline: global_scale=8.0, first conv and last dense in float on the CPU."""
    m, xs, c8 = r18
    c = compile_model(m, CFG, calib={"input": xs[:2]}, mode="global_scale",
                      float_first_last=True)
    kinds = [(s.node.op, s.kind) for s in c.program.steps]
    assert kinds[0] == ("conv", "host") and kinds[-1] == ("dense", "host")
    assert sum(k == "vta" for _, k in kinds) == 19      # 19 convs (the float stem pools)
    feeds = {"input": xs[4][None]}
    got = c.executor(SimDevice(CFG)).run(feeds)
    assert np.array_equal(got["logits"], run_graph(c.qgraph, feeds)["logits"])


def test_artifact_refuses_forged_manifest_and_bad_graph(tmp_path, r18):
    import hashlib
    m, xs, c = r18
    d = tmp_path / "a"
    save(c, str(d), record_streams=False)
    man = json.loads((d / "manifest.json").read_text())
    man["files"]["../../etc/passwd"] = "0" * 64
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="names a file outside the artifact"):
        load(str(d))
    del man["files"]["../../etc/passwd"]
    # a consistent re-hash of a broken graph.json is still refused, as a typed error
    (d / "graph.json").write_text('{"name": "x", "params": {}, "inputs": ["nope"]}')
    man["files"]["graph.json"] = hashlib.sha256((d / "graph.json").read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="graph.json"):
        load(str(d))
    with pytest.raises(GraphError, match="NaN or infinity"):
        c.executor(SimDevice(CFG)).run({"input": np.full((1, 3, 32, 32), np.nan, np.float32)})


@pytest.mark.slow
def test_resnet18_224_bit_exact_and_fidelity():
    """The real size: ResNet-18 224x224, 1000 classes, on the timed simulator."""
    m = resnet18()
    c = compile_model(m, CFG, calib={"input": sample_images(2, 224, seed=11)})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    sig = err = 0.0
    agree = 0
    for x in sample_images(2, 224, seed=2024):
        feeds = {"input": x[None]}
        got = ex.run(feeds)["logits"]
        assert np.array_equal(got, run_graph(c.qgraph, feeds)["logits"])
        ref = sess.run(None, feeds)[0]
        agree += int(ref.argmax() == got.argmax())
        sig += float((ref ** 2).sum())
        err += float(((ref - got) ** 2).sum())
    assert agree >= 1 and 10 * np.log10(sig / err) > 20
    assert ex.summary()["vta_seconds"] > 0.05           # ~115 ms of VTA time at 100 MHz


def test_standalone_add_of_packed_branches_runs_on_vta():
    """conv -> maxpool on two branches, then Add + Relu: the add cannot fuse into a conv,
    runs as a VTA ALU-only kernel on the packed data (rescaling shifts + rounding), exact."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array((rng.normal(size=s) * sc).astype(np.float32), n)
             for n, s, sc in [("w1", (16, 16, 3, 3), 0.3), ("w2", (16, 16, 1, 1), 3.0)]]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"]),
             helper.make_node("MaxPool", ["a"], ["pa"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["b"], ["pb"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Add", ["pa", "pb"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "add",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 3, 3])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    xs = rng.normal(size=(3, 1, 16, 6, 6)).astype(np.float32)
    c = compile_model(m, CFG, calib={"x": xs})
    kinds = [(s.node.op, s.kind) for s in c.program.steps]
    # the 1x1 branch runs with its max pool as one kernel (compiler/vta/conv_pool.py)
    assert ("qadd", "vta") in kinds and kinds.count(("qmaxpool", "vta")) == 1
    assert ("qconv_pool", "vta") in kinds
    add = next(n for n in c.qgraph.nodes if n.op == "qadd")
    assert add.attrs["sa"] != add.attrs["sb"] and add.attrs["lo"] == 0
    for x in xs:
        got = c.executor(SimDevice(CFG)).run({"x": x})["y"]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])


def test_tuning_log_of_benchmark_layers_covers_fused_layers(tmp_path):
    """A log tuned on the benchmark's conv (shift, bias, clip epilogue) applies to the
    network's layer of the same GEMM shape whose fused epilogue differs."""
    pytest.importorskip("compiler.tuner")
    from compiler import build, ops
    from compiler.tuner.records import LogWriter, Record
    from compiler.tuner.space import workload_key
    _, _, _, out = ops.conv2d_resnet_block(CFG, 1, 16, 4, 4, 32, 3, 1, 1)
    k0 = build(out, CFG)
    knobs = dict(k0.knobs.as_dict())
    knobs["vthreads"] = 1
    log = tmp_path / "bench.jsonl"
    w = LogWriter(str(log))
    w.write(Record(workload_key(k0.workload), {}, CFG.to_dict(), knobs, 10 ** 6))
    w._f.close()
    xs = np.random.default_rng(14).normal(size=(3, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), CFG, calib={"image": xs}, tuning_log=str(log))
    sched = {s.node.name: s.schedule for s in c.program.steps if s.kind == "vta"}
    tuned = [n for n, h in sched.items() if h == "tuned (other epilogue)"]
    assert len(tuned) == 1 and sched[tuned[0]] and "default" in sched.values()
    st = next(s for s in c.program.steps if s.node.name == tuned[0])
    assert st.kernel.knobs.as_dict()["vthreads"] == 1
    assert "[tuned (other epilogue)]" in c.report()
    got = c.executor(SimDevice(CFG)).run({"image": xs[0]})
    assert np.array_equal(got["scores"], run_graph(c.qgraph, {"image": xs[0]})["scores"])


def test_main_job_command_runs_and_reports(capsys):
    """The README's main job (scripts/demo.sh = `vta run builtin:resnet18`), on a smaller
    image: it compiles, runs on the timed simulator and reports the partition, the per-layer
    table and the top-5 against onnxruntime."""
    from compiler.cli import main
    assert main(["run", "builtin:resnet18", "--image", "32"]) == 0
    out = capsys.readouterr().out
    assert "== partition" in out and "qconv" in out and " vta " in out
    assert "total: VTA" in out and "cycles" in out
    top = [ln for ln in out.splitlines() if ln.startswith("top-5 (VTA + CPU, int8)")]
    assert len(top) == 1 and top[0].count(",") >= 4
    assert "top-5 (float, onnxruntime)" in out and "output SQNR" in out


def test_executor_uploads_a_kernels_constants():
    """A GEMM-core add (the identity weight tile is a kernel constant, not an input) runs
    through the graph executor's own device path exactly as through the kernel's runner."""
    from types import SimpleNamespace

    from compiler import build, ops, placeholder
    from compiler.graph.executor import Executor
    a = placeholder((1, 2, 4, 4, 1, 16), "int8", "a")
    b = placeholder((1, 2, 4, 4, 1, 16), "int8", "b")
    k = build(ops.add(a, b), CFG)
    assert k.constants, "ops.add of two int8 tensors should run on the GEMM core"
    rng = np.random.default_rng(3)
    av, bv = (rng.integers(-128, 128, a.shape, dtype=np.int8) for _ in range(2))
    dev = SimDevice(CFG)
    want, _ = k.run(dev, {a: av, b: bv})
    step = SimpleNamespace(kernel=k, binds=[(a, ("value", "va")), (b, ("value", "vb"))],
                           node=SimpleNamespace(name="add", output="y"))
    ex = Executor(None, dev)
    got = ex._run_vta(step, {"va": av, "vb": bv}, {})
    got = got.buf.copy_to(got.dtype, shape=got.shape) if hasattr(got, "buf") else got
    ex.close()
    assert np.array_equal(got, want)


def test_layout_transforms_are_native_code(r18):
    """unpack (the classifier's outputs cropped from the padded block) runs through the LLVM
    backend, not host numpy; the stem's input is not packed but re-laid by a host im2col
    (numpy strided copies: its 3 channels x 7 x 7 taps in 10 channel blocks)."""
    _, _, c = r18
    steps = [s for s in c.program.steps if s.node.op in ("pack", "unpack", "im2col")]
    assert {s.node.op for s in steps} == {"im2col", "unpack"}
    steps = [s for s in steps if s.node.op == "unpack"]
    stem = next(s for s in c.program.steps if s.node.op == "qconv_pool")
    assert stem.node.attrs["im2col"] == 10 and stem.node.attrs["bias_taps"]
    assert stem.kernel.workload.kernel.shape[2:4] == (1, 1) and \
        stem.kernel.workload.bias is None                    # the bias rides in the GEMM
    for s in steps:
        assert s.kind == "cpu" and s.kernel.backend == "llvm", (s.node.name, s.kind)
