"""Artifacts are untrusted (issue 20): the hostile ``.vtar`` files and directories of
benchmarks/probe_catalogue.py end in one ArtifactError naming the file, in bounded memory
and time; the optional HMAC signature (VTA_ARTIFACT_KEY) proves origin."""

import pathlib
import sys
import zipfile

import numpy as np
import pytest

from compiler.graph import artifact
from compiler.graph.artifact import ArtifactError

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from probe_catalogue import _conv_model, derived_fixtures  # noqa: E402


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    d = tmp_path_factory.mktemp("art")
    (d / "ok.onnx").write_bytes(_conv_model())
    xs = np.random.default_rng(0).normal(size=(2, 1, 16, 8, 8)).astype(np.float32)
    c = compile_model(str(d / "ok.onnx"), VTAConfig(), calib={"x": xs})
    artifact.save(c, str(d / "ok.vtar"))
    artifact.save(c, str(d / "okdir"))
    missing = derived_fixtures(str(d))
    assert missing == ["tune.jsonl"]
    return d


def test_valid_artifacts_load(arts):
    for name in ("ok.vtar", "okdir"):
        c = artifact.load(str(arts / name))
        assert c.program.graph.inputs == ["x"]


@pytest.mark.parametrize("name, msg", [
    ("bomb_listed.vtar", r"params/\d+\.npy.*(declared|bytes)"),   # 1.5 GiB member, listed
    ("bomb_extra.vtar", r"extra/zeros\.bin is in the archive but not listed"),
    ("man_deep.vtar", r"manifest\.json.*nested too deeply"),
    ("man_notjson.vtar", r"manifest\.json:1: invalid JSON"),
    ("man_dotdot.vtar", r"names a file outside the artifact: '\.\./\.\./etc/passwd'"),
    ("tampered.vtar", r"graph\.json( does not match its hash|.* are declared)"),
    ("garbage.vtar", r"not a compiled network"),
    ("truncated.vtar", r"not a compiled network|corrupt"),
    ("dir_devzero", r"params/\d+\.npy.*(symlink|symbolic link|not a regular)"),
    ("dir_fifo", r"graph\.json.*(FIFO|not a regular)"),
    ("dir_symlink_out", r"config\.json.*(symlink|symbolic link)"),
])
def test_hostile_artifacts_are_one_clear_error(arts, name, msg):
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ArtifactError, match=msg):
        artifact.load(str(arts / name))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 300, f"{name}: RSS grew {grown_mib:.0f} MiB"


def test_declared_size_is_checked_while_reading(arts, tmp_path):
    """A member that decompresses past the size the manifest declares stops there."""
    import json
    with zipfile.ZipFile(arts / "ok.vtar") as z:
        members = {n: z.read(n) for n in z.namelist()}
    man = json.loads(members["manifest.json"])
    man["sizes"]["graph.json"] = 10
    members["manifest.json"] = json.dumps(man).encode()
    with zipfile.ZipFile(tmp_path / "lie.vtar", "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    with pytest.raises(ArtifactError, match=r"graph\.json.*10 are declared|declared"):
        artifact.load(str(tmp_path / "lie.vtar"))


def test_hmac_signature_proves_origin(arts, tmp_path, monkeypatch):
    from compiler.graph.driver import compile_model
    from isa import VTAConfig
    xs = np.random.default_rng(0).normal(size=(2, 1, 16, 8, 8)).astype(np.float32)
    c = compile_model(str(arts / "ok.onnx"), VTAConfig(), calib={"x": xs})
    monkeypatch.setenv("VTA_ARTIFACT_KEY", "device secret")
    artifact.save(c, str(tmp_path / "signed.vtar"))
    with zipfile.ZipFile(tmp_path / "signed.vtar") as z:
        assert artifact.SIGNATURE in z.namelist()
    artifact.load(str(tmp_path / "signed.vtar"))
    with pytest.raises(ArtifactError, match="no manifest.sig, but VTA_ARTIFACT_KEY is set"):
        artifact.load(str(arts / "ok.vtar"))
    monkeypatch.setenv("VTA_ARTIFACT_KEY", "another key")
    with pytest.raises(ArtifactError, match="manifest.sig: the signature does not match"):
        artifact.load(str(tmp_path / "signed.vtar"))
    monkeypatch.delenv("VTA_ARTIFACT_KEY")
    artifact.load(str(tmp_path / "signed.vtar"))       # integrity only without a key
