"""compiler.dse.space and .workload: SPACE.json and LAYERS.json are checked, with errors that
name the key or layer; an impossible space is a clear error."""

import json
import re

import pytest

from compiler.dse.space import (DseError, config_of, enumerate_space, parse_space, point_key,
                                timing_of)
from compiler.dse.workload import load_workload, workload_id

BASE = {"LOG_UOP_DEPTH": 11, "LOG_INP_DEPTH": 11, "LOG_WGT_DEPTH": 10, "LOG_ACC_DEPTH": 11}


def test_impossible_space_is_a_clear_error():
    # 1x4x4 has 32-bit OUT tiles: a 64- or 128-bit bus cannot be built; and 2^16 WGT tiles
    # overflow the GEMM instruction
    sp = parse_space({"LOG_BLOCK": 2, "LOG_BUS_WIDTH": [6, 7], **BASE})
    with pytest.raises(DseError, match=r"^no point of the space can be built: all 2 "
                                       r"combinations are rejected \(2 x an OUT tile"):
        enumerate_space(sp)
    sp = parse_space({"LOG_BLOCK": 3, **BASE, "LOG_WGT_DEPTH": 16})
    with pytest.raises(DseError, match="the GEMM instruction needs N bits"):
        enumerate_space(sp)


def test_rejected_points_are_counted_not_fatal():
    sp = parse_space({"LOG_BLOCK": [2, 3], "LOG_BUS_WIDTH": [5, 6], **BASE})
    pts, rejected = enumerate_space(sp)
    assert len(pts) == 3 and sum(rejected.values()) == 1
    for p in pts:
        config_of(p)                       # every returned point is a valid VTAConfig


def test_depths_become_byte_sizes_per_tile():
    sp = parse_space({"LOG_BLOCK": [2, 3], "LOG_BATCH": [0, 1], "LOG_BUS_WIDTH": 5, **BASE})
    pts, _ = enumerate_space(sp)
    for p in pts:
        c = config_of(p)
        assert (c.uop_buff_depth, c.inp_buff_depth, c.wgt_buff_depth, c.acc_buff_depth) == \
            (2048, 2048, 1024, 2048)


@pytest.mark.parametrize("doc, msg", [
    ([1, 2], "expected a JSON object"),
    ({}, "the space is empty"),
    ({"LOG_BLOK": [3]}, "unknown key 'LOG_BLOK'"),
    ({"LOG_BLOCK": []}, "LOG_BLOCK has no candidate values"),
    ({"LOG_BLOCK": ["3"]}, "LOG_BLOCK values must be integers, not '3'"),
    ({"LOG_BLOCK": [True]}, "LOG_BLOCK values must be integers"),
    ({"LOG_BLOCK": [3, 3]}, "LOG_BLOCK lists a value twice"),
    ({"alu_stages": [4]}, "alu_stages must be 1, 2 or 3, not 4"),
    ({"dram": ["hbm"]}, "dram model 'hbm' is not one of vta_hw, vta_hw_fpga, ddr"),
    ({"LOG_INP_DEPTH": 10, "LOG_INP_BUFF_SIZE": 14}, "give LOG_INP_BUFF_SIZE .* or "
                                                      "LOG_INP_DEPTH"),
])
def test_bad_spaces(doc, msg):
    with pytest.raises(DseError, match=msg):
        parse_space(doc, "s.json")


def test_budget_is_a_seeded_subset():
    sp = parse_space({"LOG_BLOCK": [2, 3], "LOG_BUS_WIDTH": [4, 5], "alu_stages": [1, 2, 3],
                      **BASE})
    full, _ = enumerate_space(sp)
    a, _ = enumerate_space(sp, budget=5, seed=1)
    b, _ = enumerate_space(sp, budget=5, seed=1)
    assert len(a) == 5 and a == b
    assert {point_key(p) for p in a} <= {point_key(p) for p in full}
    assert enumerate_space(sp, budget=1000)[0] == full
    big, _ = enumerate_space(sp, budget=9, seed=1)
    assert {point_key(p) for p in a} < {point_key(p) for p in big}     # nested: resumable


def test_alu_stages_sets_the_timing_models_alu_cost():
    sp = parse_space({"LOG_BLOCK": 3, "alu_stages": [1, 3], "dram": ["ddr", "vta_hw_fpga"],
                      **BASE})
    pts, _ = enumerate_space(sp)
    for p in pts:
        t = timing_of(p)
        assert t.alu_cycles_per_uop_imm == t.alu_cycles_per_uop_vec == p["alu_stages"]
    lat = {p["dram"]: timing_of(p).read_latency for p in pts}
    assert lat["ddr"] > lat["vta_hw_fpga"]


def test_resnet18_workload():
    layers, note = load_workload("resnet18")
    assert [l.name for l in layers] == [f"C{i}" for i in range(2, 12)]
    assert layers[1].stride == 2 and layers[2].k == 1 and "C2-C11" in note


def test_layers_json(tmp_path):
    p = tmp_path / "l.json"
    p.write_text(json.dumps({"layers": [
        {"name": "a", "hw": 14, "cin": 32, "cout": 64, "k": 3, "pad": 1, "stride": 1},
        {"name": "fc", "dense": True, "cin": 512, "cout": 10},
        {"name": "r", "h": 7, "w": 9, "cin": 16, "cout": 16, "k": 1, "pad": 0, "stride": 1}]}))
    layers, _ = load_workload(str(p))
    assert (layers[1].h, layers[1].k, layers[1].cin, layers[1].cout) == (1, 1, 512, 10)
    assert (layers[2].h, layers[2].w) == (7, 9)
    assert workload_id(layers) != workload_id(layers[:2])


@pytest.mark.parametrize("doc, msg", [
    ([], "expected a non-empty list of layers"),
    ([{"hw": 3}], "layer 0: a layer needs a non-empty \"name\""),
    ([{"name": "x", "hw": 14, "cin": 32, "cout": 32, "k": 3, "pad": 1}], r"layer 0 \(x\): "
                                                                          "missing stride"),
    ([{"name": "x", "hw": 14, "cin": 0, "cout": 32, "k": 3, "pad": 1, "stride": 1}],
     r"cin must be an integer >= 1, not 0"),
    ([{"name": "x", "hw": 2, "cin": 16, "cout": 16, "k": 7, "pad": 0, "stride": 1}],
     "kernel is larger than the padded 2x2 image"),
    ([{"name": "x", "hw": 2, "cin": 16, "cout": 16, "k": 1, "pad": 0, "stride": 1,
       "groups": 2}], r"unknown key\(s\) \['groups'\]"),
    ([{"name": "x", "dense": True, "cin": 16, "cout": 16}] * 2, "layer name\\(s\\) x used twice"),
])
def test_bad_layer_files(tmp_path, doc, msg):
    p = tmp_path / "l.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(DseError, match=re.escape(str(p)) + ".*" + msg):
        load_workload(str(p))


def test_bad_workload_names(tmp_path):
    with pytest.raises(DseError, match="--workload must be resnet18, a LAYERS.json or a "
                                       "MODEL.onnx, not 'vgg'"):
        load_workload("vgg")
    with pytest.raises(DseError, match="no such file|not found|cannot"):
        load_workload(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(DseError, match="bad.json:1: invalid JSON"):
        load_workload(str(bad))


def test_onnx_workload_takes_conv_and_dense_layers(tmp_path):
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.ones((16, 3, 3, 3), np.float32), "w0"),
             numpy_helper.from_array(np.ones((32, 16, 3, 3), np.float32), "w1"),
             numpy_helper.from_array(np.ones((10, 32 * 4 * 4), np.float32), "fw"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shp")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["y0"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["y0", "w1"], ["y1"], pads=[0, 0, 0, 0], strides=[2, 2]),
             helper.make_node("Reshape", ["y1", "shp"], ["f"]),
             helper.make_node("Gemm", ["f", "fw"], ["o"], transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 9, 9])], [helper.make_tensor_value_info(
            "o", TensorProto.FLOAT, [1, 10])], inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g), str(path))
    layers, note = load_workload(str(path))
    assert [(l.h, l.cin, l.cout, l.k, l.pad, l.stride) for l in layers] == [
        (9, 16, 32, 3, 0, 2), (1, 512, 10, 1, 0, 1)]
    assert "3 input channels (stays on the CPU" in note
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(DseError, match="bad.onnx: not an ONNX model"):
        load_workload(str(bad))


def test_a_huge_space_is_refused_before_any_work():
    sp = parse_space({f"LOG_{b}_DEPTH": list(range(4, 16)) for b in ("UOP", "INP", "WGT", "ACC")}
                     | {"LOG_BLOCK": [1, 2, 3, 4, 5, 6], "LOG_BUS_WIDTH": [3, 4, 5, 6, 7]})
    with pytest.raises(DseError, match=r"the space has 622,080 combinations; at most 200,000"):
        enumerate_space(sp)
