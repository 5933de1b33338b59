"""ONNX sequence and optional values on the float path (compiler.ops.sequence): each small
graph built with onnx.helper runs through the ONNX backend and is checked against
onnxruntime (an optional input of None, which onnxruntime does not take, by hand); misuse is a
typed error naming the node; a compiled program (vta compile) refuses sequence inputs and
outputs, naming them, and compiles sequences inside the graph to tensor nodes."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.cli import main  # noqa: E402
from compiler.graph.ir import GraphError  # noqa: E402
from compiler.graph.onnx_backend import VtaBackend  # noqa: E402
from compiler.graph.onnx_import import (NeedsStructureError, OnnxImportError,  # noqa: E402
                                        import_onnx)

F, B = TensorProto.FLOAT, TensorProto.BOOL
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _t(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _seq(name, t=F):
    return helper.make_value_info(name, helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(t, None)))


def _i64(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def _ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _same(a, b):
    if isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif b is None:
        assert a is None
    else:
        a = np.asarray(a)
        assert a.shape == np.shape(b) and a.dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


RNG = np.random.default_rng(23)


def _x(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def test_sequence_operators_against_onnxruntime():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "d", "one"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "minus1"], ["s3"]),
             helper.make_node("SequenceAt", ["s3", "one"], ["at"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["s3"], ["stk"], axis=-1, new_axis=1),
             helper.make_node("Relu", ["cat"], ["r"])]
    m = _model(nodes, [_t(n, [2, 3]) for n in "abcd"],
               [_t("at", [2, 3]), _t("n", [], TensorProto.INT64), _t("cat", [2, 9]),
                _t("stk", [2, 3, 3]),
                _t("r", [2, 9]), _seq("s2")], [_i64("one", 1), _i64("minus1", -1)])
    feeds = {n: _x(2, 3) for n in "abcd"}
    got = VtaBackend.prepare(m).run(feeds)
    want = _ort(m, feeds)
    for a, b in zip(got, want):
        _same(a, b)
    assert len(got[5]) == 4 and got[1].dtype == np.int64 and got[1].shape == ()


@pytest.mark.parametrize("split,attrs", [(None, {}), (None, {"keepdims": 0}),
                                         (2, {"axis": 1}), ([1, 4], {"axis": -1}),
                                         ([2, 0, 1], {"axis": 0})])
def test_split_to_sequence_against_onnxruntime(split, attrs):
    ins = ["x"] + (["split"] if split is not None else [])
    inits = [_i64("split", split)] if split is not None else []
    nodes = [helper.make_node("SplitToSequence", ins, ["s"], **attrs),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    m = _model(nodes, [_t("x", [3, 5])], [_seq("s"), _t("n", [], TensorProto.INT64)], inits)
    x = _x(3, 5)
    got = VtaBackend.prepare(m).run([x])
    for a, b in zip(got, _ort(m, {"x": x})):
        _same(a, b)


def test_sequence_input_and_output_per_structure():
    """A sequence input of any length and element shapes: the graph is imported per
    structure (not per value) and the output sequence comes back as a list."""
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "zero"], ["first"]),
             helper.make_node("Identity", ["s2"], ["out"])]
    m = _model(nodes, [_seq("s"), _t("x", [2, 2])], [_seq("out"), _t("first", ["h", "w"])],
               [_i64("zero", 0)])
    rep = VtaBackend.prepare(m)
    assert rep.structured == ["s"] and rep.graph is None
    for seq in ([_x(2, 2), _x(2, 2)], [_x(3, 1)], [_x(3, 1)], [_x(2, 2)] * 3):
        x = _x(2, 2)
        got = rep.run({"s": seq, "x": x})
        want = _ort(m, {"s": seq, "x": x})
        _same(got[0], want[0])
        _same(got[1], want[1])
    assert len(rep._graphs) == 3                  # [3] twice: one import for that structure
    with pytest.raises(GraphError, match="input 's' is a sequence"):
        rep.run({"s": _x(2, 2), "x": _x(2, 2)})


def test_empty_sequence_and_int_elements():
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
             helper.make_node("SequenceInsert", ["e", "i"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "i", "zero"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)]
    m = _model(nodes, [_t("i", [3], TensorProto.INT64)],
               [_t("y", [6], TensorProto.INT64), _seq("e", TensorProto.INT64)],
               [_i64("zero", 0)])
    i = np.array([4, -1, 7], np.int64)
    got = VtaBackend.prepare(m).run([i])
    _same(got[0], _ort(m, {"i": i})[0])
    assert got[1] == []


def _opt(name, inner):
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def test_optional_values_against_the_reference():
    tens = helper.make_tensor_type_proto(F, [2])
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"]),
             helper.make_node("Optional", [], ["none"], type=tens),
             helper.make_node("OptionalHasElement", ["none"], ["has_none"]),
             helper.make_node("OptionalHasElement", ["maybe"], ["has_maybe"]),
             helper.make_node("Identity", ["maybe"], ["maybe_out"]),
             helper.make_node("Neg", ["v"], ["y"])]
    m = _model(nodes, [_t("x", [2]), _opt("maybe", helper.make_sequence_type_proto(tens))],
               [_t("has", [], B), _t("y", [2]), _t("has_none", [], B), _t("has_maybe", [], B),
                _opt("maybe_out", helper.make_sequence_type_proto(tens)), _opt("none", tens)])
    outs = list(m.graph.output)                 # the reference on the tensor optionals
    ref = _model(nodes[:5] + nodes[7:], [_t("x", [2])], outs[:3] + outs[5:])
    rep = VtaBackend.prepare(m)
    for maybe in (None, [_x(2), _x(2)], []):
        x = _x(2)
        got = rep.run({"x": x, "maybe": maybe})
        want = _ort(ref, {"x": x})               # (onnxruntime takes no None input)
        want[3:3] = [np.array(maybe is not None), maybe]     # OptionalHasElement, Identity
        for a, b in zip(got, want):
            _same(a if a is None or isinstance(a, list) else np.asarray(a),
                  b if b is None or isinstance(b, list) else np.asarray(b))
        assert bool(got[3]) == (maybe is not None) and got[5] is None


def test_loop_carries_a_sequence():
    """A Loop whose carried value is a sequence (test_loop13_seq's form) unrolls."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["f"], to=F),
         helper.make_node("Mul", ["f", "x"], ["xi"]),
         helper.make_node("SequenceInsert", ["s_in", "xi"], ["s_out"])], "body",
        [_t("i", [], TensorProto.INT64), _t("c", [], TensorProto.BOOL), _seq("s_in")],
        [_t("c_out", [], TensorProto.BOOL), _seq("s_out")])
    nodes = [helper.make_node("SequenceEmpty", [], ["e"]),
             helper.make_node("Loop", ["m", "", "e"], ["s"], body=body),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    m = _model(nodes, [_t("x", [3])], [_t("y", [4, 3])], [_i64("m", 4)])
    x = _x(3)
    _same(VtaBackend.prepare(m).run([x])[0], _ort(m, {"x": x})[0])


# ---------------------------------------------------------------- errors name the node
def _err_model(nodes, inputs, outputs, inits=()):
    return _model(nodes, inputs, outputs, inits)


def test_a_sequence_into_a_tensor_operator_names_the_node():
    for op, extra, inits in (("Relu", [], []),
                             ("Conv", ["w"], [numpy_helper.from_array(
                                 np.ones((1, 1, 1, 1), np.float32), "w")])):
        nodes = [helper.make_node("SequenceConstruct", ["x"], ["s"]),
                 helper.make_node(op, ["s"] + extra, ["y"], name="use_seq")]
        m = _err_model(nodes, [_t("x", [1, 1, 2, 2])], [_t("y", [1, 1, 2, 2])], inits)
        with pytest.raises(OnnxImportError, match=rf"node 'use_seq' \({op}\): "):
            import_onnx(m)                       # onnx.checker's type check names it


def test_the_importer_refuses_a_sequence_into_a_tensor_rule():
    """Behind the checker: every rule not marked ``structured`` is refused a sequence or an
    optional input, naming the node, before it runs."""
    from compiler.graph.ir import Graph
    from compiler.graph.onnx_import import ImportContext
    from compiler.ops.sequence import Opt, Seq
    ctx = ImportContext(Graph("g"), {"x": np.ones((2, 2), np.float32)}, {})
    ctx.structs.update({"s": Seq(("x",), F), "o": Opt("x")})
    for op, inp, what in (("Relu", "s", "a sequence"), ("Conv", "o", "an optional")):
        with pytest.raises(OnnxImportError, match=rf"node 'n' \({op}\): input 0 \('{inp}'\) "
                                                  rf"is {what} value; {op} takes tensors"):
            ctx.node(helper.make_node(op, [inp, "x"][:1 + (op == "Conv")], ["y"], name="n"), 0)
    ctx.consts["p"] = np.array(0, np.int64)
    ctx.node(helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at"), 0)
    assert ctx.src("y") == "x"


@pytest.mark.parametrize("node,inputs,inits,match", [
    (helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at"), [], [_i64("p", 2)],
     r"node 'at' \(SequenceAt\): position 2 is out of range for a sequence of 2 elements"),
    (helper.make_node("SequenceErase", ["s", "p"], ["y"], name="er"), [], [_i64("p", -3)],
     r"node 'er' \(SequenceErase\): position -3 is out of range"),
    (helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=2, name="cat"), [], [],
     r"node 'cat' \(ConcatFromSequence\): .*'axis'.*2"),          # onnx.checker's words
    (helper.make_node("SequenceAt", ["s", "p"], ["y"], name="dyn"),
     [_t("q", [2])], [], r"node 'dyn' \(SequenceAt\): input position \('p'\) must be a "
                         r"constant"),
])
def test_bad_sequence_use_is_a_typed_error(node, inputs, inits, match):
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"])]
    if node.name == "dyn":                  # the position computed from run-time data
        nodes.append(helper.make_node("ArgMax", ["q"], ["p"], keepdims=0))
    m = _err_model(nodes + [node], [_t("x", [2, 2])] + inputs, [_seq("y") if
                   node.op_type == "SequenceErase" else _t("y", [2, 2])], inits)
    with pytest.raises(OnnxImportError, match=match):
        VtaBackend.prepare(m).run({"x": _x(2, 2), "q": _x(2)})


def test_empty_optional_and_empty_sequence_are_typed_errors():
    tens = helper.make_tensor_type_proto(F, [2])
    m = _err_model([helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")],
                   [_opt("o", tens)], [_t("y", [2])])
    rep = VtaBackend.prepare(m)
    _same(rep.run({"o": np.ones(2, np.float32)})[0], np.ones(2, np.float32))
    with pytest.raises(OnnxImportError, match=r"node 'get' \(OptionalGetElement\): input 0 "
                                              r"\('o'\) is an empty optional"):
        rep.run({"o": None})
    m = _err_model([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="c")],
                   [_seq("s")], [_t("y", [None])])
    with pytest.raises(OnnxImportError, match=r"node 'c' \(ConcatFromSequence\): the "
                                              r"sequence is empty"):
        VtaBackend.prepare(m).run({"s": []})


# ---------------------------------------------------------------- compiled programs
def _seq_io_model():
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["out"])]
    return _model(nodes, [_seq("s"), _t("x", [1, 2, 4, 4])], [_seq("out")])


def test_import_without_structure_names_the_input_and_output():
    with pytest.raises(NeedsStructureError, match=r"graph input 's' is a "
                                                  r"sequence\(tensor\(float32\)\)") as e:
        import_onnx(_seq_io_model())
    assert e.value.input == "s"
    m = _model([helper.make_node("SequenceConstruct", ["x"], ["out"])],
               [_t("x", [1, 2])], [_seq("out")])
    with pytest.raises(OnnxImportError, match=r"graph output 'out' is a "
                                              r"sequence\(tensor\(float32\)\): a compiled "
                                              r"program \(vta compile, .vtar\) has tensor"):
        import_onnx(m)


def _internal_seq_model():
    w = numpy_helper.from_array(RNG.normal(size=(4, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("SplitToSequence", ["img"], ["s"], axis=1),
             helper.make_node("SequenceAt", ["s", "one"], ["b"]),
             helper.make_node("SequenceInsert", ["s", "b"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["x2"], axis=1),
             helper.make_node("Conv", ["x2", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    return _model(nodes, [_t("img", [1, 2, 8, 8])], [_t("y", [1, 4, 8, 8])],
                  [w, _i64("one", 1), _i64("zero", 0)])


def test_vta_compile_refuses_sequence_io_and_compiles_inner_sequences(tmp_path, capsys):
    p, out = tmp_path / "seq.onnx", tmp_path / "seq.vtar"
    onnx.save(_seq_io_model(), str(p))
    assert main(["compile", str(p), "-o", str(out), "--calibration", "global_scale"]) != 0
    assert "graph input 's' is a sequence(tensor(float32))" in capsys.readouterr().err
    assert not out.exists()
    m = _internal_seq_model()
    g = import_onnx(m)
    assert {n.op for n in g.nodes} <= {"slice", "concat", "conv", "relu"}
    img = _x(1, 2, 8, 8)
    _same(VtaBackend.prepare(m).run([img])[0], _ort(m, {"img": img})[0])
    # compiled and run (vta run), it is the model written with tensor operators
    w = next(i for i in m.graph.initializer if i.name == "w")
    plain = _model([helper.make_node("Slice", ["img", "one", "two", "one"], ["c1"]),
                    helper.make_node("Concat", ["c1", "c1"], ["x2"], axis=1)]
                   + list(m.graph.node)[-2:], list(m.graph.input), list(m.graph.output),
                   [w, _i64("one", [1]), _i64("two", [2])])
    np.savez(tmp_path / "x.npz", img=img)
    ys = []
    for name, model in (("seq", m), ("plain", plain)):
        p, out, y = (tmp_path / f"{name}{e}" for e in (".onnx", ".vtar", ".npz"))
        onnx.save(model, str(p))
        assert main(["compile", str(p), "-o", str(out), "--calibration", "global_scale"]) == 0
        assert main(["run", str(out), "--inputs", str(tmp_path / "x.npz"),
                     "--output", str(y)]) == 0
        ys.append(np.load(y)["y"])
    _same(ys[0], ys[1])
    assert np.abs(ys[0]).max() > 0


# ---------------------------------------------------------------- the backend as onnxruntime's
def test_run_node_takes_sequences_as_lists():
    a, b = _x(2, 3), _x(1, 3)
    (y,) = VtaBackend.run_node(helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
                               [[a, b]])
    _same(y, np.concatenate([a, b]))
    (s,) = VtaBackend.run_node(helper.make_node("SequenceInsert", ["s", "t", "p"], ["y"]),
                               [[a], b, np.array(0, np.int64)])
    _same(s, [b, a])


def test_symbolic_dimensions_follow_the_values_given():
    """A model declaring symbolic dimensions runs on any shape (imported per shape, an
    empty input bound as a constant for that run only), as onnxruntime runs it."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0),
             helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0)]
    m = _model(nodes, [_t("x", ["N", "C"])], [_t("n", [], TensorProto.INT64),
                                              _t("r", []), _seq("s")])
    rep = VtaBackend.prepare(m)
    assert rep.symbolic == {"x": 2} and rep.graph is None
    for shape in ((2, 3), (4, 1), (2, 3), (0, 2), (3, 2)):
        x = _x(*shape)
        got = rep.run([x])
        want = _ort(m, {"x": x})
        for a, b in zip(got, want):
            _same(a, b)
    assert rep.bound == [] and len(rep._graphs) == 4
    with pytest.raises(OnnxImportError, match=r"graph input 'x'"):     # bind=False: no constant
        VtaBackend.prepare(m, bind=False).run([np.zeros((0, 2), np.float32)])


def test_sequence_map_against_onnxruntime():
    """SequenceMap: a body over each element of two sequences and a tensor, reading an outer
    value too; and float16 elements (carried in float32) joining a float16 sequence."""
    H = TensorProto.FLOAT16
    body = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["ab"]),
         helper.make_node("Add", ["ab", "t"], ["abt"]),
         helper.make_node("Sub", ["abt", "outer"], ["o1"]),
         helper.make_node("Shape", ["a"], ["o2"])], "body",
        [_t("a", ["n"]), _t("b", ["n"]), _t("t", [1])],
        [_t("o1", ["n"]), _t("o2", [1], TensorProto.INT64)])
    nodes = [helper.make_node("Neg", ["t"], ["outer"]),
             helper.make_node("SequenceMap", ["sa", "sb", "t"], ["r1", "r2"], body=body),
             helper.make_node("SequenceInsert", ["sh", "h"], ["sh2"])]
    m = _model(nodes, [_seq("sa"), _seq("sb"), _t("t", [1]), _seq("sh", H), _t("h", [2], H)],
               [_seq("r1"), _seq("r2", TensorProto.INT64), _seq("sh2", H)])
    rep = VtaBackend.prepare(m)
    for n in ((3, 1, 4), (2,), ()):
        feeds = {"sa": [_x(k) for k in n], "sb": [_x(k) for k in n], "t": _x(1),
                 "sh": [_x(2).astype(np.float16)], "h": _x(2).astype(np.float16)}
        got = rep.run(feeds)
        for a, b in zip(got, _ort(m, feeds)):
            _same(a, b)


def test_other_non_tensor_types_are_typed_errors():
    tens = helper.make_tensor_type_proto(F, [2])
    for tp in (helper.make_map_type_proto(TensorProto.INT64, tens),
               helper.make_sequence_type_proto(helper.make_sequence_type_proto(tens))):
        m = _model([helper.make_node("Identity", ["x"], ["y"])], [helper.make_value_info(
            "x", tp)], [helper.make_value_info("y", tp)])
        with pytest.raises(OnnxImportError, match=r"unsupported type"):
            VtaBackend.prepare(m).run({"x": [[np.ones(2, np.float32)]]})
