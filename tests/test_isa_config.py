"""isa: VTAConfig derivation, JSON round trip, and validation errors."""

import json

import pytest

from isa import ConfigError, MemType, VTAConfig


def test_default_derived_constants():
    c = VTAConfig()
    assert (c.batch, c.block_in, c.block_out) == (1, 16, 16)
    assert (c.inp_elem_bytes, c.wgt_elem_bytes, c.acc_elem_bytes, c.out_elem_bytes) == \
        (16, 256, 64, 16)
    assert (c.uop_buff_depth, c.inp_buff_depth, c.wgt_buff_depth, c.acc_buff_depth) == \
        (8192, 2048, 1024, 2048)
    assert c.log_index_bits == (13, 11, 11, 10)
    assert c.bitstream == "1x16_i8w8a32_15_15_18_17"
    assert c.model == "sim_1x16_i8w8a32_15_15_18_17"
    assert [c.elem_bytes(m) for m in MemType] == [4, 256, 16, 64, 16, 16]
    assert c.macs_per_uop == 256 and c.bus_width == 64


def test_json_round_trip(tmp_path):
    c = VTAConfig(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                  LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
    p = tmp_path / "cfg.json"
    c.to_json(p)
    assert VTAConfig.from_json(p) == c


def test_reads_reference_vta_config_json(tmp_path):
    ref = {"TARGET": "sim", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
           "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
           "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}
    p = tmp_path / "vta_config.json"
    p.write_text(json.dumps(ref))
    assert VTAConfig.from_json(p) == VTAConfig()


@pytest.mark.parametrize("kw,msg", [
    (dict(LOG_ACC_BUFF_SIZE=18), r"the GEMM instruction needs 138 bits .* has 128"),
    (dict(LOG_UOP_BUFF_SIZE=16), r"needs .* bits with this configuration"),
    (dict(LOG_INP_WIDTH=2), r"LOG_INP_WIDTH is 2, but it must be between 3 and 4"),
    (dict(LOG_ACC_WIDTH=6), r"LOG_ACC_WIDTH is 6, but it must be between 4 and 5"),
    (dict(LOG_WGT_WIDTH=4, LOG_BLOCK=6), r"a WGT tile is 8192 bytes; VTA requires tiles of at most 4096"),
    (dict(LOG_BLOCK=4.0), r"LOG_BLOCK must be an integer"),
    (dict(LOG_WGT_BUFF_SIZE=7), r"less than one 256-byte WGT tile"),
    (dict(TARGET=3), r"TARGET must be a string"),
])
def test_invalid_configs_are_rejected(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        VTAConfig(**kw)


def test_json_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"LOG_BLOCK": 4,\n "NOPE": 1}')
    with pytest.raises(ConfigError, match=r"bad.json: unknown key 'NOPE'"):
        VTAConfig.from_json(p)
    p.write_text('{"LOG_BLOCK": 4,\n oops}')
    with pytest.raises(ConfigError, match=r"bad.json:2: invalid JSON"):
        VTAConfig.from_json(p)
    with pytest.raises(ConfigError, match=r"cannot read .*missing.json"):
        VTAConfig.from_json(tmp_path / "missing.json")
