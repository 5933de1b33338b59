"""The board driver end to end through the simulated board (vta_hw.board.simboard.SimulatedBoard:
the bitstream's UartSystem in Amaranth's simulator, over real UART bits), the `vta board`
command on it, and (slow) every vector and the FPGA board targets.  The protocol-level tests
against a pure-Python bridge are tests/test_hw_host.py."""

import argparse
import json
import os

import numpy as np
import pytest

from isa import (AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, VTAConfig,
                 encode_program)
from vta_hw import ErrorCode, HwError, RtlRunError
from vta_hw.blocks.csr import Reg
from vta_hw.board.host import BoardError, BoardHost, BoardLinkError, BoardTimeoutError
from vta_hw.board.uart import CMD_READ_MEM, CMD_WRITE_MEM

from .test_hw_host import VECDIR, _board_cli, _vector



# ----------------------------------------------------------------------------- simulated board

@pytest.mark.slow   # opt-in (--run-slow): a long Amaranth-simulator run; see the README
def test_golden_vector_over_real_uart_bits():
    """The bitstream's design (UART, bridge FIFO, core with the FPGA's 3-stage ALU, on-chip
    DRAM) simulated bit by bit: load, launch, poll, read back; byte-exact."""
    from vta_hw.board.simboard import SimulatedBoard
    v = _vector("load_acc_001")
    board = SimulatedBoard(divisor=4)
    h = BoardHost(board)
    dram = v["dram_in"].copy()
    res = h.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"])
    assert not board.overflow                    # pipelined, never beyond the FIFO
    assert res.simulator == "simulated-uart"
    assert 0 < res.cycles < board.cycles
    # the transfers took about the line time of the bytes (the pipeline kept the line busy)
    line = 10 * board.divisor * max(res.extra["bytes_sent"], res.extra["bytes_received"])
    assert board.cycles < 1.3 * line


def test_a_command_left_half_sent_is_recovered_on_the_simulated_board():
    """A previous host died after sending part of a command: the first command of a new
    host is misparsed (a clear link error), and resync() recovers, on the real bridge."""
    from vta_hw.board.simboard import SimulatedBoard
    board = SimulatedBoard(serial=False, read_timeout_cycles=300)
    board.write(bytes([CMD_WRITE_MEM, 5, 0]))
    h = BoardHost(board)
    with pytest.raises(BoardLinkError, match=r"^R INSN_COUNT: "):
        h.read_reg(Reg.INSN_COUNT)
    board.write(bytes([CMD_READ_MEM, 9]))          # and again, before an explicit resync
    h.resync()
    v = _vector("load_acc_001")
    dram = v["dram_in"].copy()
    h.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"])


def test_a_deadlocked_program_times_out_on_the_simulated_board_and_is_stopped():
    from vta_hw.board.simboard import SimulatedBoard
    board = SimulatedBoard(serial=False)
    h = BoardHost(board)
    cfg = VTAConfig()
    stuck = encode_program([GemmInsn(0, 1, 1, 1, 0, 0, 0, 0, 0, 0, pop_prev=1),
                            FinishInsn()], cfg)        # waits for a token nobody pushes
    with pytest.raises(BoardTimeoutError, match=r"did not finish within 400 cycles; the core "
                       r"was stopped"):
        h.run(stuck, np.zeros(64, np.uint8), max_cycles=400)
    assert h.read_reg(Reg.CTRL) & 2 == 0               # stopped, not finished
    v = _vector("load_acc_001")                         # and the next program runs
    dram = v["dram_in"].copy()
    res = h.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"]) and res.cycles > 0


def test_simulated_board_checks_its_divisor():
    from vta_hw.board.simboard import SimulatedBoard
    with pytest.raises(BoardError, match=r"^the UART divisor must be an integer of at least 4, "
                       r"not 3$"):
        SimulatedBoard(divisor=3)


def test_byte_level_board_runs_vectors_and_reports_illegal_instructions():
    from vta_hw.board.simboard import SimulatedBoard
    board = SimulatedBoard(serial=False)
    h = BoardHost(board)
    for name in ("load_acc8_000", "alu_shr_imm_000"):
        v = _vector(name)
        dram = v["dram_in"].copy()
        h.run(v["insns"].tobytes(), dram)
        assert np.array_equal(dram, v["dram_out"]), name
    cfg = VTAConfig()
    bad = encode_program([AluInsn(AluOp.ADD, 0, 1, 1, 1, 0, 0, 0, 0),
                          MemInsn(Opcode.LOAD, MemType.UOP, cfg.uop_buff_depth, 0, 1, 1, 1,
                                  0, 0, 0, 0), FinishInsn()], cfg)
    with pytest.raises(RtlRunError, match=r"^instruction 1: the hardware stopped: SRAM index "
                       r"out of range$") as e:
        h.run(bad, np.zeros(64, np.uint8), validate=False)     # the hardware's own check
    assert e.value.code is ErrorCode.SRAM_RANGE
    with pytest.raises(RtlRunError, match=r"^instruction 1 field sram_base: LOAD UOP writes "
                       r"SRAM elements") as e:
        h.run(bad, np.zeros(64, np.uint8))                     # the simulator's static check
    v = _vector("load_acc_001")                   # the board runs the next program normally
    dram = v["dram_in"].copy()
    h.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"])


def test_board_device_matches_sim_device():
    from vta_runtime import SimDevice
    from vta_runtime import programs as P
    from vta_runtime.board_device import BoardDevice
    rng = np.random.default_rng(42)
    a = rng.integers(-256, 256, (2, 4, 1, 16)).astype(np.int32)
    dev = BoardDevice(simulate=True, serial=False)
    res = P.relu(dev, a)
    ref = P.relu(SimDevice(), a)
    assert np.array_equal(res.output, ref.output)
    assert np.array_equal(res.output, np.clip(a, 0, 127).astype(np.int8))
    assert dev.stats["cycles"] > 0 and res.queue.token_balance == [0, 0, 0, 0]


def test_vta_board_run_simulated_writes_image_and_stats(tmp_path, capsys):
    v = _vector("load_acc_001")
    (tmp_path / "i.bin").write_bytes(v["insns"].tobytes())
    (tmp_path / "d.bin").write_bytes(v["dram_in"].tobytes())
    build = tmp_path / "build"                      # what 'vta hw build' leaves
    build.mkdir()
    (build / "report.json").write_text(json.dumps({"config": VTAConfig().to_dict(),
                                                   "dram_bytes": 4096 * 8}))
    _board_cli(["board", "run", "--simulate", "--sim-mode", "bytes", "--build", str(build),
                "--insns", str(tmp_path / "i.bin"), "--dram", str(tmp_path / "d.bin"),
                "--out", str(tmp_path / "o.bin"), "--stats", str(tmp_path / "s.json")])
    out = np.frombuffer((tmp_path / "o.bin").read_bytes(), np.uint8)
    assert np.array_equal(out, v["dram_out"])
    st = json.loads((tmp_path / "s.json").read_text())
    assert st["cycles"] > 0 and st["simulator"] == "simulated-bytes"
    assert st["bytes_sent"] > v["dram_in"].size and st["dram_words"] == 4096
    assert "o.bin: 14 instructions" in capsys.readouterr().out
    common = ["board", "run", "--simulate", "--insns", "i", "--dram", "d", "--out", "o"]
    with pytest.raises(HwError, match=r"^--dram-words 8192, but the bitstream in .* has 4096 "
                       r"words$"):
        _board_cli(common + ["--build", str(build), "--dram-words", "8192"])
    with pytest.raises(HwError, match=r"^give --build or --config, not both"):
        _board_cli(common + ["--build", str(build), "--config", "c.json"])
    (build / "report.json").write_text("{}")
    with pytest.raises(HwError, match=r"report.json: not a 'vta hw build' report"):
        _board_cli(common + ["--build", str(build)])


def test_vta_board_needs_a_port_or_simulate(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _board_cli(["board", "run", "--insns", "i", "--dram", "d", "--out", "o"])
    assert "one of the arguments --port --simulate is required" in capsys.readouterr().err


# ----------------------------------------------------------------------------- slow

VECTORS = sorted(p[:-4] for p in os.listdir(VECDIR) if p.endswith(".npz"))


@pytest.fixture(scope="module")
def byte_board_host():
    from vta_hw.board.simboard import SimulatedBoard
    return BoardHost(SimulatedBoard(serial=False))


@pytest.mark.slow
@pytest.mark.parametrize("name", VECTORS)
def test_every_vector_on_one_simulated_board(name, byte_board_host):
    """One board for all vectors, as on hardware: each run reuses what the previous left in
    DRAM (only changed words are written)."""
    v = _vector(name)
    dram = v["dram_in"].copy()
    byte_board_host.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"])
    assert not byte_board_host.transport.overflow


@pytest.mark.slow
def test_pipelining_beyond_the_fifo_loses_bytes_on_the_simulated_board():
    """The FIFO limit is real: a host that keeps more than RX_FIFO_DEPTH request bytes in
    flight (register reads answer 4 bytes per 2 received, so requests pile up) overflows
    the bridge, and the lost bytes show up as a short read naming the command."""
    from vta_hw.board.simboard import SimulatedBoard
    board = SimulatedBoard(read_timeout_cycles=500)
    greedy = BoardHost(board, fifo_depth=1 << 16)
    with pytest.raises(BoardLinkError, match=r"^R INSN_ADDR: the board answered [0-3] of 4 "
                       r"bytes"):
        greedy.read_regs([Reg.INSN_ADDR] * 400)
    assert board.overflow
    board = SimulatedBoard(read_timeout_cycles=500)
    polite = BoardHost(board)
    polite.write_reg(Reg.INSN_ADDR, 0x01020304)
    assert polite.read_regs([Reg.INSN_ADDR] * 400) == [0x01020304] * 400
    assert not board.overflow


def test_board_target_takes_the_builds_baud_rate(tmp_path):
    """``--build DIR`` uses the baud rate the bitstream was built with (report.json), unless
    ``--baud`` overrides it; without --build the default is 115200."""
    from vta_hw.cli import _board_target
    build = tmp_path / "build"
    build.mkdir()
    report = {"config": VTAConfig().to_dict(), "dram_bytes": 4096 * 8, "baud": 1_000_000}
    (build / "report.json").write_text(json.dumps(report))

    def target(*argv):
        parser = argparse.ArgumentParser(prog="vta")
        from vta_hw.cli import register
        register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["board", "run", "--port", "/dev/null", "--insns", "i",
                                  "--dram", "d", "--out", "o", *argv])
        _board_target(args)
        return args.baud
    assert target("--build", str(build)) == 1_000_000
    assert target("--build", str(build), "--baud", "921600") == 921600
    assert target() == 115200


def test_fpga_top_rejects_a_baud_rate_the_clock_cannot_make():
    from vta_hw.board.fpga import FpgaTop
    cfg = VTAConfig().replace(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                              LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
    assert FpgaTop(cfg, 50.0, baud=1_000_000).baud == 1_000_000     # 50 cycles per bit
    with pytest.raises(HwError, match=r"20000000 baud UART needs 2.50 clock cycles per bit"):
        FpgaTop(cfg, 50.0, baud=20_000_000)
    with pytest.raises(HwError, match=r"within 2% of an integer"):
        FpgaTop(cfg, 50.0, baud=10_000_000 * 10 // 9)               # 4.5 cycles per bit


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm_bigidx_000", "alu_max_vec_000"])
def test_golden_vectors_on_the_1x16x16_lut_multiplier_board(name):
    """The ULX3S-85F 1x16x16 bitstream's core options (3-cycle ALU, 160 of the 256 GEMM
    products in LUTs), simulated as the board (bridge byte port, on-chip DRAM): byte-exact
    through the host driver.  The golden vectors need the default buffer depths, so the
    configuration here is the default one; compiled networks for the bitstream's smaller
    buffers are checked on the fast RTL path (BENCHMARKS.md)."""
    from vta_hw.board.simboard import SimulatedBoard
    v = _vector(name)
    board = SimulatedBoard(serial=False, lut_mults=160)
    dram = v["dram_in"].copy()
    res = BoardHost(board).run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"]) and res.cycles > 0
