"""The main job's console report says what each number is (issue 20): the SQNR sample is a
calibration sample (not held out), each compile time names what it covers, the partition
table's detail column is never cut mid-token, and the per-layer table keeps modelled VTA
time and measured CPU time in separate, labelled columns."""

import re

import pytest

pytest.importorskip("onnx")

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.models import sample_images, small_cnn  # noqa: E402
from compiler.graph.program import clip  # noqa: E402

CFG = VTAConfig()


@pytest.fixture(scope="module")
def compiled():
    m = small_cnn()
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    xs = sample_images(3, shape[2], seed=5, channels=shape[1])
    c = compile_model(m, CFG, calib={m.graph.input[0].name: xs})
    return c, m.graph.input[0].name, xs


@pytest.mark.parametrize("width", [12, 20, 33, 48, 64])
def test_clip_cuts_between_tokens_with_an_ellipsis(width):
    text = "conv2d relu_8_conv: data (1, 10, 112, 112, 1, 16) kernel (4, 10, 1, 1, 16, 16)"
    out = clip(text, width)
    assert len(out) <= width and out.endswith("...")
    body = out[:-3]
    assert text.startswith(body)
    assert body.count("(") == body.count(")")              # no tuple cut open
    assert text[len(body)] in " ,"                          # cut where a token ends
    assert clip("short", 48) == "short"


def test_report_names_the_sqnr_samples_and_the_compile_time(compiled):
    c, _, xs = compiled
    rep = c.report()
    assert "calibration sample(s)" not in rep.replace("calibration samples (not held", "")
    assert f"percentile on {len(xs)} sample(s)" in rep
    assert "on 1 of those calibration samples (not held out)" in rep
    line = next(ln for ln in rep.splitlines() if ln.startswith("compile_model:"))
    assert "import+passes" in line and "codegen" in line and "excludes" in line
    for ln in c.program.partition_table().splitlines():
        if ln.rstrip().endswith("..."):
            det = ln.rstrip()[:-3]
            assert det.count("(") == det.count(")")


def test_per_layer_table_separates_modelled_vta_and_measured_cpu_time(compiled):
    c, name, xs = compiled
    ex = c.executor(SimDevice(CFG, timed=True))
    ex.run({name: xs[:1]})
    lines = ex.table().splitlines()
    head = lines[0].split()
    assert "VTA" in head and "CPU" in head and head.count("ms") == 2
    assert "assumed 100 MHz" in lines[1] and "measured" in lines[1]
    rows = [ln.split() for ln in lines if re.match(r"\s*\d+ ", ln)]
    assert {r[3] for r in rows} >= {"vta", "cpu"}
    for r in rows:
        vta_ms, cpu_ms = r[5], r[6]
        if r[3] == "vta":
            assert cpu_ms == "-" and float(vta_ms) > 0
        else:
            assert vta_ms == "-" and float(cpu_ms) >= 0
    assert "modelled at an assumed 100 MHz" in lines[-2]


def test_per_layer_table_names_the_timing_model(compiled):
    from vta_sim import TimingParams
    c, name, xs = compiled
    for timing, want in ((True, "timing model vta_hw_rtl: "),
                         (TimingParams.preset("tsim"), "timing model tsim: "),
                         (TimingParams(read_latency=99), "timing model custom: ")):
        ex = c.executor(SimDevice(CFG, timed=timing))
        ex.run({name: xs[:1]})
        assert ex.table().splitlines()[-1].startswith(f"VTA cycles from: {want}")


def test_resnet18_stem_and_maxpool_run_on_vta_and_the_docs_say_so():
    """The 3-channel stem (im2col + 1x1 conv) and the max-pool are VTA steps; no README or
    docs/ sentence says the first conv or pooling stays on the CPU (unless it names the
    ``--first-conv-cpu`` option that puts it there)."""
    import pathlib

    from compiler.graph.models import resnet18
    c = compile_model(resnet18(image=32, width=16, classes=10), CFG,
                      calib={"input": sample_images(2, 32, seed=3)})
    where = {s.node.op: s.kind for s in reversed(c.program.steps)}
    first_conv = next(s for s in c.program.steps if s.node.op == "qconv_pool")
    assert first_conv.kind == "vta"         # the stem with its max pool (vta/conv_pool.py)
    assert where.get("im2col") == "host"

    root = pathlib.Path(__file__).resolve().parents[1]
    bad = []
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = re.sub(r"\s+", " ", path.read_text())
        for sent in re.split(r"(?<=[.;:])\s", text):
            low = sent.lower()
            says_cpu = re.search(r"stays? on the cpu|vta does not run|runs? on the cpu", low)
            about = re.search(r"first conv|3-channel|3 input channels|stem|pooling", low)
            if says_cpu and about and "--first-conv-cpu" not in low and "on vta" not in low:
                bad.append(f"{path.name}: {sent[:120]}")
    assert not bad, bad
