"""The host-side board driver (vta_hw.board.host.BoardHost): against a pure-Python model of the
UART bridge protocol (framing, pipelining within the receive FIFO, timeouts, error decoding,
bad images), runs and the runtime's BoardDevice on it; the simulated board is
tests/test_hw_simboard.py."""

import argparse
import os
import sys

import numpy as np
import pytest

from isa import FinishInsn, MemInsn, MemType, Opcode, VTAConfig, encode_program
from vta_hw import ErrorCode, HwError, RtlRunError
from vta_hw.blocks.csr import Reg
from vta_hw.board.host import (BoardError, BoardHost, BoardLinkError, BoardTimeoutError,
                               open_serial)
from vta_hw.board.run import run_board
from vta_hw.board.uart import ACK, CMD_READ_MEM, CMD_READ_REG, CMD_WRITE_MEM, CMD_WRITE_REG, \
    RX_FIFO_DEPTH

VECDIR = os.path.join(os.path.dirname(__file__), "data", "vectors")


def _vector(name):
    return np.load(os.path.join(VECDIR, name + ".npz"), allow_pickle=False)


# ----------------------------------------------------------------------------- a fake board

class FakeBridge:
    """The HostBridge protocol in Python, executing programs with the functional simulator.

    Checks the pipelining rule on every write: the request bytes sent beyond the last fully
    answered command (answer completely read by the host) must fit the receive FIFO;
    ``max_in_flight`` records the worst case.  Knobs: ``polls`` (CTRL reads before done),
    ``error`` ((code, index) the 'hardware' reports), ``hang`` (never done), ``mute_after``
    (stop answering after that many commands), ``bad_ack_at`` (command number answered
    with a wrong byte), ``cycles`` (CYCLES register value once done).
    """

    def __init__(self, cfg=None, dram_words=1024, fifo=RX_FIFO_DEPTH, *, polls=2, error=None,
                 hang=False, mute_after=None, bad_ack_at=None, cycles=1234):
        self.cfg = cfg or VTAConfig()
        self.bb = self.cfg.bus_bytes
        self.mem = np.zeros(dram_words * self.bb, np.uint8)
        self.dram_words = dram_words
        self.fifo = fifo
        self.regs = {}
        self.polls, self.error, self.hang, self.cycles = polls, error, hang, cycles
        self.mute_after, self.bad_ack_at = mute_after, bad_ack_at
        self.rx = bytearray()
        self.answers = bytearray()
        self.unanswered = []          # [request bytes, answer bytes left] per command
        self.max_in_flight = 0
        self.n_commands = 0
        self.log = []                 # (cmd, arg) of every executed command
        self.writes = []              # every write() call's bytes
        self.reads = 0
        self.launches = []
        self.overflowed = False
        self._polls_left = 0

    def _in_flight(self):
        return sum(r for r, _ in self.unanswered) + len(self.rx)

    def write(self, data):
        data = bytes(data)
        self.writes.append(data)
        for b in data:
            self.rx.append(b)
            if self._in_flight() > self.fifo:
                self.overflowed = True
            self.max_in_flight = max(self.max_in_flight, self._in_flight())
            self._parse()
        return len(data)

    def _parse(self):
        lens = {CMD_WRITE_REG: 1 + 1 + 4, CMD_READ_REG: 2, CMD_WRITE_MEM: 5 + self.bb,
                CMD_READ_MEM: 5}
        if self.rx and self.rx[0] not in lens:
            self.rx.pop(0)            # the bridge ignores unknown command bytes (e.g. zeros)
            return
        if not self.rx or len(self.rx) < lens[self.rx[0]]:
            return
        cmd, n = self.rx[0], lens[self.rx[0]]
        req = bytes(self.rx[:n])
        del self.rx[:n]
        self.n_commands += 1
        ans = self._execute(cmd, req)
        if self.mute_after is not None and self.n_commands > self.mute_after:
            ans = b""
        if self.bad_ack_at == self.n_commands:
            ans = b"\x15" + ans[1:]
        self.answers += ans
        self.unanswered.append([n, len(ans)])
        self._settle()

    def _settle(self):
        while self.unanswered and self.unanswered[0][1] == 0:
            self.unanswered.pop(0)

    def _execute(self, cmd, req):
        if cmd == CMD_WRITE_REG:
            addr, val = req[1], int.from_bytes(req[2:6], "little")
            self.log.append(("W", addr, val))
            self.regs[addr] = val
            if addr == Reg.CTRL and val & 1:
                self._launch()
            return bytes([ACK])
        if cmd == CMD_READ_REG:
            addr = req[1]
            self.log.append(("R", addr))
            if addr == Reg.CTRL:
                if self._polls_left > 0:
                    self._polls_left -= 1
                    self.regs[Reg.CYCLES] = self.regs.get(Reg.CYCLES, 0) + 100
                elif self.regs.get(Reg.CTRL, 0) & 1 and not self.hang:
                    self._finish()
            return self.regs.get(addr, 0).to_bytes(4, "little")
        word = int.from_bytes(req[1:5], "little") % self.dram_words
        sl = slice(word * self.bb, (word + 1) * self.bb)
        if cmd == CMD_WRITE_MEM:
            self.log.append(("M", word))
            self.mem[sl] = np.frombuffer(req[5:], np.uint8)
            return bytes([ACK])
        self.log.append(("m", word))
        return self.mem[sl].tobytes()

    def _launch(self):
        count, addr = self.regs.get(Reg.INSN_COUNT, 0), self.regs.get(Reg.INSN_ADDR, 0)
        self.launches.append((addr, count))
        self.regs.update({Reg.CTRL: 1, Reg.CYCLES: 0, Reg.ERR_CODE: 0, Reg.ERR_INDEX: 0})
        self._polls_left = self.polls
        if count and self.error is None and not self.hang:
            from vta_sim import Simulator
            insns = self.mem[addr:addr + 16 * count].tobytes()
            Simulator(self.cfg).run(insns, self.mem)
        if count == 0:                # the host's stop: an idle core
            self._polls_left = 1 << 30

    def _finish(self):
        if self.error is not None:
            code, index = self.error
            self.regs.update({Reg.CTRL: 2 | 4, Reg.ERR_CODE: code, Reg.ERR_INDEX: index})
        else:
            self.regs.update({Reg.CTRL: 2, Reg.CYCLES: self.cycles, Reg.ACC_WRITES: 77})

    def read(self, n):
        self.reads += 1
        out = bytes(self.answers[:n])
        del self.answers[:n]
        k = len(out)
        while k and self.unanswered:
            take = min(k, self.unanswered[0][1])
            self.unanswered[0][1] -= take
            k -= take
            self._settle()
        return out


def _host(fake, **kw):
    return BoardHost(fake, fake.cfg, dram_words=fake.dram_words, **kw)


def _board_cli(argv):
    from vta_hw.cli import register
    parser = argparse.ArgumentParser(prog="vta")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


# ----------------------------------------------------------------------------- framing

def test_register_commands_are_framed_little_endian():
    fake = FakeBridge()
    h = _host(fake)
    h.write_reg(Reg.INSN_ADDR, 0x12345678)
    assert fake.writes[-1] == bytes([CMD_WRITE_REG, Reg.INSN_ADDR, 0x78, 0x56, 0x34, 0x12])
    fake.regs[Reg.CYCLES] = 0xA1B2C3D4
    assert h.read_reg(Reg.CYCLES) == 0xA1B2C3D4
    assert fake.writes[-1] == bytes([CMD_READ_REG, Reg.CYCLES])
    assert h.read_regs([Reg.INSN_ADDR, Reg.CYCLES]) == [0x12345678, 0xA1B2C3D4]
    assert fake.writes[-1] == bytes([CMD_READ_REG, Reg.INSN_ADDR, CMD_READ_REG, Reg.CYCLES])


def test_memory_commands_use_word_addresses_and_bus_words():
    fake = FakeBridge()
    h = _host(fake, skip_unchanged=False)
    data = np.arange(16, dtype=np.uint8)
    assert h.write_words(300, data) == 2
    assert fake.writes[-1] == (bytes([CMD_WRITE_MEM, 44, 1, 0, 0]) + bytes(range(8))
                               + bytes([CMD_WRITE_MEM, 45, 1, 0, 0]) + bytes(range(8, 16)))
    assert np.array_equal(fake.mem[300 * 8:302 * 8], data)
    fake.mem[301 * 8:302 * 8] = 0xEE
    got = h.read_words(301, 1)
    assert fake.writes[-1] == bytes([CMD_READ_MEM, 45, 1, 0, 0])
    assert got.dtype == np.uint8 and list(got) == [0xEE] * 8
    h.write_mem(8 * 5, b"\x01\x02\x03")           # the last word is zero-padded
    assert list(fake.mem[40:48]) == [1, 2, 3, 0, 0, 0, 0, 0]
    assert list(h.read_mem(8 * 5, 3)) == [1, 2, 3]


@pytest.mark.parametrize("depth", [RX_FIFO_DEPTH, 40])
def test_bulk_transfers_pipeline_within_the_fifo(depth):
    fake = FakeBridge(fifo=depth)
    h = _host(fake, fifo_depth=depth, skip_unchanged=False)
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, 500 * 8, dtype=np.uint8)
    assert h.write_words(7, data) == 500
    back = h.read_words(7, 500)
    assert np.array_equal(back, data)
    assert not fake.overflowed
    assert fake.max_in_flight <= depth
    # it does pipeline: many commands in flight, and answers are read in batches
    assert fake.max_in_flight > depth // 2
    assert fake.reads < 1000 / 2
    assert fake.log == [("M", 7 + i) for i in range(500)] + [("m", 7 + i) for i in range(500)]


def test_skip_unchanged_sends_only_changed_words_and_a_reset_board_gets_everything():
    fake = FakeBridge()
    h = _host(fake)
    data = np.arange(64, dtype=np.uint8)
    assert h.write_words(0, data) == 8
    data2 = data.copy()
    data2[20] = 99                                 # word 2
    assert h.write_words(0, data2) == 1
    assert np.array_equal(fake.mem[:64], data2)
    # the board was reset/reprogrammed: registers (the session cookie) and memory are zero
    fake.regs.clear()
    fake.mem[:] = 0
    assert h.write_words(0, data2) == 8
    assert np.array_equal(fake.mem[:64], data2)
    # a launch may store anywhere: nothing is known afterwards
    fake.hang = True
    h.launch(4096, 1)
    assert h.write_words(0, data2) == 8


# ----------------------------------------------------------------------------- link failures

def test_short_read_is_a_link_error_naming_the_command():
    fake = FakeBridge(mute_after=1)
    h = _host(fake)
    h.write_reg(Reg.INSN_COUNT, 5)
    with pytest.raises(BoardLinkError, match=r"^R CYCLES: the board answered 0 of 4 bytes "
                       r"before the read timed out"):
        h.read_reg(Reg.CYCLES)
    fake2 = FakeBridge(mute_after=3)
    h2 = _host(fake2, skip_unchanged=False)
    with pytest.raises(BoardLinkError, match=r"^m word 12: the board answered 0 of 8 bytes"):
        h2.read_words(9, 6)


def test_wrong_ack_is_detected_and_the_next_command_resynchronises():
    fake = FakeBridge(bad_ack_at=2)
    h = _host(fake)
    h.write_reg(Reg.INSN_COUNT, 1)
    with pytest.raises(BoardLinkError, match=r"^W INSN_ADDR: expected ACK \(0x06\), got 0x15"):
        h.write_reg(Reg.INSN_ADDR, 2)
    n = len(fake.writes)
    h.write_reg(Reg.INSN_ADDR, 3)                  # resync (zeros + link check) first
    assert fake.writes[n] == bytes(h.max_request)
    assert fake.regs[Reg.INSN_ADDR] == 3


def test_an_interrupted_transfer_resynchronises_before_the_next_command():
    fake = FakeBridge()
    h = _host(fake, skip_unchanged=False)
    real_read = fake.read

    def interrupted(n):
        fake.read = real_read
        raise KeyboardInterrupt
    fake.read = interrupted
    with pytest.raises(KeyboardInterrupt):
        h.read_words(0, 50)
    fake.mem[:8] = 7
    assert list(h.read_words(0, 1)) == [7] * 8      # stale answers were discarded
    assert bytes(h.max_request) in fake.writes


def test_a_silent_board_fails_the_link_check():
    h = _host(FakeBridge(mute_after=0))
    with pytest.raises(BoardLinkError, match=r"^W OUT_BASE: the board answered 0 of 1 bytes"):
        h.check_link()


def test_open_serial_without_pyserial_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "serial", None)
    with pytest.raises(BoardError, match=r"needs pyserial: pip install pyserial"):
        open_serial("/dev/ttyUSB0")
    with pytest.raises(BoardError, match=r"needs pyserial"):
        run_board(FINISH, np.zeros(8, np.uint8), port="/dev/ttyUSB0")
    with pytest.raises(BoardError, match=r"^run_board: give the board's serial port or "
                       r"simulate=True$"):
        run_board(FINISH, np.zeros(8, np.uint8))


FINISH = bytes([3]) + bytes(15)


def test_run_board_validates_before_starting_a_board(recwarn):
    # the simulator's static checks refuse the stream before any board (or simulation) starts:
    # no "coroutine was never awaited" warnings from a half-started simulated board
    from vta_hw import ProgramRejected
    with pytest.raises(ProgramRejected, match=r"non-empty multiple of 16 bytes, not 0"):
        run_board(b"", np.zeros(8, np.uint8), simulate=True)
    with pytest.raises(ProgramRejected, match=r"instruction 0 field dram_base: LOAD INP "
                                              r"accesses DRAM bytes \[0, 16\) beyond the "
                                              r"8-byte image"):
        prog = encode_program([MemInsn(Opcode.LOAD, MemType.INP, 0, 0, 1, 1, 1),
                               FinishInsn()], VTAConfig())
        run_board(prog, np.zeros(8, np.uint8), simulate=True)
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


@pytest.fixture
def pty_board():
    """A FakeBridge behind a pseudo-terminal: the real pyserial path (open_serial)."""
    pytest.importorskip("serial")
    import threading
    master, slave = os.openpty()
    fake = FakeBridge(dram_words=2048)
    stop = threading.Event()

    def serve():
        import select
        while not stop.is_set():
            if select.select([master], [], [], 0.02)[0]:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    return
                fake.write(data)
                out = fake.read(len(fake.answers))
                if out:
                    os.write(master, out)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield os.ttyname(slave), fake
    stop.set()
    t.join()
    os.close(master)
    os.close(slave)


def test_run_through_pyserial_on_a_pty(pty_board):
    port, fake = pty_board
    ser = open_serial(port, 115200, timeout=1.0)
    try:
        h = BoardHost(ser, dram_words=fake.dram_words)
        h.check_link()
        v = _vector("load_acc_001")
        dram = v["dram_in"].copy()
        res = h.run(v["insns"].tobytes(), dram)
        assert np.array_equal(dram, v["dram_out"]) and res.cycles == fake.cycles
        assert res.simulator == f"board:{port}"
    finally:
        ser.close()


def test_vta_board_check_on_a_port(pty_board, capsys):
    port, fake = pty_board
    _board_cli(["board", "check", "--port", port, "--dram-words", "2048"])
    assert capsys.readouterr().out.strip() == \
        f"board:{port}: the bridge answers (core idle, CTRL=0x0)"


def test_a_missing_port_is_a_board_error():
    pytest.importorskip("serial")
    with pytest.raises(BoardError, match=r"cannot open the serial port '/nonexistent/tty'"):
        open_serial("/nonexistent/tty")


# ----------------------------------------------------------------------------- runs

def test_run_matches_a_golden_vector_with_cycles_from_the_register():
    v = _vector("gemm_000")
    fake = FakeBridge(dram_words=2048, cycles=4321)
    h = _host(fake)
    dram = v["dram_in"].copy()
    res = h.run(v["insns"].tobytes(), dram)
    assert np.array_equal(dram, v["dram_out"]) and res.dram is dram
    assert (res.cycles, res.acc_writes) == (4321, 77)
    assert res.simulator == "board"
    addr, count = fake.launches[0]
    assert count == len(v["insns"]) // 16 and addr >= dram.size and addr % 16 == 0
    assert res.extra["bytes_sent"] > dram.size and not fake.overflowed


def test_hardware_error_is_decoded_like_the_other_runners():
    v = _vector("load_acc_001")
    fake = FakeBridge(error=(int(ErrorCode.SRAM_RANGE), 3))
    with pytest.raises(RtlRunError, match=r"^instruction 3: the hardware stopped: SRAM index "
                       r"out of range$") as e:
        _host(fake).run(v["insns"].tobytes(), v["dram_in"].copy())
    assert e.value.code is ErrorCode.SRAM_RANGE and e.value.index == 3
    fake = FakeBridge(error=(13, 0))
    with pytest.raises(RtlRunError, match=r"unknown error code 13"):
        _host(fake).run(v["insns"].tobytes(), v["dram_in"].copy())


def test_a_program_that_never_finishes_times_out_and_is_stopped():
    v = _vector("load_acc_001")
    fake = FakeBridge(hang=True, polls=1 << 30)
    with pytest.raises(BoardTimeoutError, match=r"did not finish within 500 cycles; the core "
                       r"was stopped"):
        _host(fake).run(v["insns"].tobytes(), v["dram_in"].copy(), max_cycles=500)
    assert fake.launches[-1] == (fake.launches[0][0], 0)    # the stop: an empty launch
    fake = FakeBridge(hang=True, polls=0)                     # CYCLES stuck: wall clock
    with pytest.raises(BoardTimeoutError, match=r"within 0.05 s") as e:
        _host(fake).run(v["insns"].tobytes(), v["dram_in"].copy(), timeout=0.05)
    assert isinstance(e.value, RtlRunError)


def test_bad_images_and_addresses_are_refused_before_anything_is_sent():
    fake = FakeBridge(dram_words=64)
    h = _host(fake)
    with pytest.raises(BoardError, match=r"^the image of 1024 bytes \(DRAM image 1000 bytes, "
                       r"instructions at 0x3f0, 1 of them\) does not fit the board's DRAM of "
                       r"512 bytes \(64 words of 8\)"):
        h.run(encode_program([FinishInsn()], fake.cfg), np.zeros(1000, np.uint8))
    with pytest.raises(BoardError, match=r"must be a uint8 numpy array .* not an array of int32"):
        h.run(encode_program([FinishInsn()], fake.cfg), np.zeros(10, np.int32))
    with pytest.raises(HwError, match=r"multiple of 16 bytes"):
        h.run(b"\x00" * 15, np.zeros(10, np.uint8))
    with pytest.raises(BoardError, match=r"^write_mem: byte address 0x4 is not aligned to the "
                       r"8-byte bus word$"):
        h.write_mem(4, b"1234")
    with pytest.raises(BoardError, match=r"^read_words: words \[60, 70\) are beyond the "
                       r"board's DRAM of 64 words \(512 bytes\)$"):
        h.read_words(60, 10)
    with pytest.raises(BoardError, match=r"whole number of 8-byte bus words"):
        h.write_words(0, b"123")
    with pytest.raises(BoardError, match=r"^launch: the instruction address must be a "
                       r"non-negative multiple of 16, not 8$"):
        h.launch(8, 1)
    with pytest.raises(BoardError, match=r"register value must be a 32-bit"):
        h.write_reg(Reg.CTRL, 1 << 32)
    assert fake.writes == []
    with pytest.raises(BoardError, match=r"must have write\(bytes\) and read\(n\)"):
        BoardHost(object())
    with pytest.raises(BoardError, match=r"^dram_words=8192, but the board has 64 words$"):
        BoardHost(fake, dram_words=8192)
    with pytest.raises(BoardError, match=r"^the host's configuration \(.*\) is not the "
                       r"board's"):
        BoardHost(fake, VTAConfig().replace(LOG_BUS_WIDTH=7))


def test_board_device_mirrors_live_buffers_and_reports_errors():
    from vta_runtime import DeviceError, SimDevice
    from vta_runtime import programs as P
    from vta_runtime.board_device import BoardDevice
    rng = np.random.default_rng(7)
    a = rng.integers(-300, 300, (3, 2, 1, 16)).astype(np.int32)
    fake = FakeBridge(dram_words=8192)
    dev = BoardDevice(transport=fake, dram_words=8192)
    first = P.relu(dev, a)
    assert np.array_equal(first.output, P.relu(SimDevice(), a).output)
    total = sum(hi - lo for lo, hi in dev._regions()) // 8
    # the second run of the same queue: the unchanged input buffer is not sent again
    second = P.relu(dev, a, cq=first.queue)
    assert np.array_equal(second.output, first.output)
    assert 0 < dev.stats["words_written"] < total
    assert dev.stats["cycles"] == fake.cycles and dev.num_runs == 2
    fake.error = (int(ErrorCode.ILLEGAL_ALU_OP), 5)
    with pytest.raises(DeviceError, match=r"^board: instruction 5: the hardware stopped: "
                       r"illegal alu_opcode$"):
        P.relu(dev, a, cq=first.queue)
    with pytest.raises(DeviceError, match=r"give a serial port, simulate=True or a transport"):
        BoardDevice()


def test_board_device_reading_back_only_the_store_targets():
    from vta_runtime import DeviceError, SimDevice
    from vta_runtime import programs as P
    from vta_runtime.board_device import BoardDevice
    rng = np.random.default_rng(8)
    a = rng.integers(-300, 300, (4, 2, 1, 16)).astype(np.int32)
    ref = P.relu(SimDevice(), a).output
    reads = {}
    for mode in ("live", "stores"):
        fake = FakeBridge(dram_words=8192)
        dev = BoardDevice(transport=fake, dram_words=8192, readback=mode)
        res = P.relu(dev, a)
        assert np.array_equal(res.output, ref), mode
        n_mem = sum(1 for e in fake.log if e[0] == "m")
        launch = max(i for i, e in enumerate(fake.log) if e[:2] == ("W", Reg.CTRL))
        reads[mode] = {e[1] for e in fake.log[launch:] if e[0] == "m"}
        assert n_mem == len(reads[mode])
    out_words = a.size // 8                         # int8 results, 8 per 64-bit word
    assert len(reads["stores"]) == out_words < len(reads["live"])
    assert reads["stores"] <= reads["live"]
    with pytest.raises(DeviceError, match=r"readback must be 'live' or 'stores', not 'all'"):
        BoardDevice(transport=FakeBridge(dram_words=8192), dram_words=8192, readback="all")
