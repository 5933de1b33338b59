"""Command-queue mechanics: kernel invariants, the uop ring, auto-flush, force-serial balance,
debug dumps, argument checking."""

import io

import numpy as np
import pytest

from isa import AluOp, MemType, Opcode, VTAConfig, decode_stream
from vta_runtime import (CommandQueue, DependencyError, KernelError, KernelHandle, NullDevice,
                         QueueError, SimDevice, UopKernel, signature_key)


def gemm_finit(uops, loops=(), reset=0):
    def finit(cq, sig):
        for lp in loops:
            cq.uop_loop_begin(*lp)
        for u in uops:
            cq.uop_push(0, reset, *u)
        for _ in loops:
            cq.uop_loop_end()
    return finit


class TestKernelInvariants:
    def rec(self, body, **kw):
        cq = CommandQueue(NullDevice(**kw.pop("dev", {})), **kw)
        cq.push_gemm_op(KernelHandle("k"), body)
        return cq

    def test_dst_hazard_distance_default_two(self):
        with pytest.raises(KernelError, match="dst 1 was written by uop 1, only 1 uop"):
            self.rec(gemm_finit([(0, 0, 0), (1, 0, 0), (1, 1, 1)]))
        with pytest.raises(KernelError, match="dst 0 was written by uop 0, only 2 uop"):
            self.rec(gemm_finit([(0, 0, 0), (1, 0, 0), (0, 1, 1)]))
        self.rec(gemm_finit([(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 1)]))   # distance 3: fine

    def test_dst_hazard_distance_is_a_parameter(self):
        self.rec(gemm_finit([(0, 0, 0), (1, 0, 0), (0, 1, 1)]), dep_distance=1)
        with pytest.raises(KernelError, match="distance is 3"):
            self.rec(gemm_finit([(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 1)]), dep_distance=3)
        cfg = VTAConfig(ACC_DEP_DISTANCE=3)
        with pytest.raises(KernelError, match="distance is 3"):
            CommandQueue(NullDevice(cfg)).push_gemm_op(
                KernelHandle(), gemm_finit([(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 1)]))

    def test_mode_and_reset_consistency(self):
        def mixed(cq, sig):
            cq.uop_push(0, 0, 0, 0, 0)
            cq.uop_push(1, 0, 1, 1, 0, AluOp.ADD, 1, 1)
        with pytest.raises(KernelError, match="all GEMM or all ALU"):
            self.rec(mixed)
        def resets(cq, s):
            cq.uop_push(0, 0, 0, 0, 0)
            cq.uop_push(0, 1, 1, 0, 0)
        with pytest.raises(KernelError, match="reset_out 1 differs"):
            self.rec(resets)

    def test_alu_single_opcode_and_imm(self):
        def two_ops(cq, sig):
            cq.uop_push(1, 0, 0, 0, 0, AluOp.ADD, 1, 1)
            cq.uop_push(1, 0, 1, 1, 0, AluOp.ADD, 1, 2)
        with pytest.raises(KernelError, match="one opcode/use_imm/imm"):
            CommandQueue(NullDevice()).push_alu_op(KernelHandle(), two_ops)

    def test_loops(self):
        def three(cq, sig):
            for _ in range(3):
                cq.uop_loop_begin(2, 1, 1, 0)
        with pytest.raises(KernelError, match="at most 2 loops"):
            self.rec(three)
        def late_loop(cq, s):
            cq.uop_push(0, 0, 0, 0, 0)
            cq.uop_loop_begin(2, 1, 1, 0)

        def unclosed(cq, s):
            cq.uop_loop_begin(2, 1, 1, 0)
            cq.uop_push(0, 0, 0, 0, 0)
        with pytest.raises(KernelError, match="before the first uop"):
            self.rec(late_loop)
        with pytest.raises(KernelError, match="not closed"):
            self.rec(unclosed)
        with pytest.raises(KernelError, match="without a matching"):
            self.rec(lambda cq, s: cq.uop_loop_end())
        with pytest.raises(KernelError, match="extent must be at least 1"):
            self.rec(gemm_finit([(0, 0, 0)], [(0, 1, 1, 0)]))
        with pytest.raises(KernelError, match="does not fit the 14-bit"):
            self.rec(gemm_finit([(0, 0, 0)], [(1 << 14, 1, 1, 0)]))
        with pytest.raises(KernelError, match="dst_factor_out = 4096 does not fit"):
            self.rec(gemm_finit([(0, 0, 0)], [(2, 4096, 1, 0)]))

    def test_fields_and_empty(self):
        with pytest.raises(KernelError, match="uop 0: dst = 2048 does not fit in 11 bits"):
            self.rec(gemm_finit([(2048, 0, 0)]))
        with pytest.raises(KernelError, match="recorded no uops"):
            self.rec(gemm_finit([]))
        with pytest.raises(KernelError, match="finit returned 1"):
            self.rec(lambda cq, s: (cq.uop_push(0, 0, 0, 0, 0), 1)[1])
        with pytest.raises(KernelError, match="outside a kernel recording"):
            CommandQueue(NullDevice()).uop_push(0, 0, 0, 0, 0)

    def test_wrong_push_kind_and_handle(self):
        cq = CommandQueue(NullDevice())
        h = KernelHandle()
        cq.push_gemm_op(h, gemm_finit([(0, 0, 0)]))
        with pytest.raises(KernelError, match="recorded a GEMM kernel"):
            cq.push_alu_op(h, None)
        with pytest.raises(KernelError, match="ALU push recorded GEMM"):
            cq.push_alu_op(KernelHandle(), gemm_finit([(0, 0, 0)]))
        with pytest.raises(KernelError, match="expected a KernelHandle"):
            cq.push_gemm_op(object(), gemm_finit([(0, 0, 0)]))

    def test_failed_recording_is_not_cached(self):
        cq = CommandQueue(NullDevice())
        h = KernelHandle()
        with pytest.raises(KernelError):
            cq.push_gemm_op(h, gemm_finit([(0, 0, 0), (0, 1, 1)]))
        assert h.kernels == {} and cq.pending_count == 0
        cq.push_gemm_op(h, gemm_finit([(0, 0, 0)]))
        assert cq.kernels_recorded == 1

    @pytest.mark.parametrize("imm", [40000, -32769, 1 << 31])
    def test_imm_outside_int16_is_refused(self, imm):
        # the reference stores the low 16 bits silently (40000 -> -25536); we refuse
        k = UopKernel(VTAConfig())
        with pytest.raises(KernelError, match=rf"imm {imm} does not fit the ALU's 16-bit"):
            k.push(1, 0, 0, 0, 0, AluOp.ADD, 1, imm)
        assert k.uops == [] or len(k.uops) == 0

    def test_imm_int16_range(self):
        k2 = UopKernel(VTAConfig())
        for d in range(3):
            k2.push(1, 0, d, d, 0, AluOp.SHR, 1, -32768)     # in range: fine on every uop
        assert k2.imm == -32768

    def test_signature_keys(self):
        assert [signature_key(s) for s in (None, 0, 1, 98, -1)] == [0, 1, 2, 99, 0]
        assert signature_key((5).to_bytes(4, "little")) == 6
        for bad in (99, -2, "a", 1.0):
            with pytest.raises(KernelError):
                signature_key(bad)


class TestUopRing:
    def test_wrap_and_eviction_positions(self):
        cq = CommandQueue(NullDevice(), uop_depth=16)
        hs = [KernelHandle(str(i)) for i in range(4)]
        sizes = [6, 6, 6, 3]
        fins = [gemm_finit([(j % 3, 0, 0) for j in range(n)]) for n in sizes]
        for h, f in zip(hs, fins):
            cq.push_gemm_op(h, f)        # 0:[0,6) 1:[6,12) 2 wraps:[0,6) evicts 0; 3:[6,9) evicts 1
        cq.push_gemm_op(hs[2], fins[2])  # still resident: no load
        cq.push_gemm_op(hs[0], fins[0])  # evicted: reload at [9,15)
        cq.synchronize()
        loads = cq.last_run.uop_loads
        assert [(t[1], t[3]) for t in loads] == [(0, 6), (6, 6), (0, 6), (6, 3), (9, 6)]
        # append-only staging; the reloaded kernel 0 reads the bytes appended for it first
        assert [t[2] for t in loads] == [0, 6, 12, 18, 0]
        assert len(cq.last_run.uop_image) == 4 * sum(sizes)
        arr = decode_stream(cq.last_run.insns)
        g = np.flatnonzero(arr.opcode == Opcode.GEMM)
        assert [(int(arr.uop_bgn[i]), int(arr.uop_end[i])) for i in g] == \
            [(0, 6), (6, 12), (0, 6), (6, 9), (0, 6), (9, 15)]

    def test_eviction_executes_the_right_uops(self):
        """Two kernels that overflow the ring in one window both compute correctly."""
        dev = SimDevice()
        n = 5000
        a = dev.alloc(8 * 64)
        a.copy_from(np.arange(8 * 16, dtype=np.int32))
        out = dev.alloc(8 * 16)
        cq = CommandQueue(dev)
        cq.load_buffer_2d(a, 0, 8, 1, 8, 0, 0, 0, 0, 0, MemType.ACC)

        def alu_finit(dst_base):
            def f(c, s):   # n uops cycling over 4 tiles: each tile gets n/4 additions of 1
                for j in range(n):
                    c.uop_push(1, 0, dst_base + j % 4, dst_base + j % 4, 0, AluOp.ADD, 1, 1)
            return f
        cq.push_alu_op(KernelHandle("A"), alu_finit(0))
        cq.push_alu_op(KernelHandle("B"), alu_finit(4))
        cq.dep_push(2, 3)
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(0, MemType.OUT, out, 0, 8, 1, 8)
        cq.synchronize()
        assert [t[2] for t in cq.last_run.uop_loads] == [0, n]
        exp = (np.arange(8 * 16) + n // 4).astype(np.int8)
        assert np.array_equal(out.copy_to(np.int8), exp)
        assert cq.token_balance == [0, 0, 0, 0]


class TestAutoFlush:
    def test_instruction_buffer_overflow_synchronises(self):
        dev = NullDevice()
        cq = CommandQueue(dev, max_xfer=16 * 64, keep_history=True)
        h = KernelHandle()
        f = gemm_finit([(0, 0, 0)])
        for _ in range(200):
            cq.push_gemm_op(h, f)
        cq.synchronize()
        counts = [r.insn_count for r in cq.runs]
        assert len(counts) >= 4 and all(c <= 64 for c in counts)
        # the flush fires as soon as (count + 6) * 16 > max_xfer: after 59 instructions
        arr = decode_stream(cq.runs[0].insns)
        assert len(arr) == 59 + 4 and arr.opcode[-1] == Opcode.FINISH
        gemms = sum(int((decode_stream(r.insns).opcode == Opcode.GEMM).sum()) for r in cq.runs)
        assert gemms == 200
        # each run reloads the kernel: residency does not survive a run
        assert all(len(r.uop_loads) == 1 for r in cq.runs)
        assert cq.token_balance == [0, 0, 0, 0]

    def test_uop_loads_never_auto_synchronise_with_reference_staging(self):
        """Reference UopQueue::Push tests the uop queue's own dram_buffer_ (never appended to)
        for overflow, so a LOAD UOP never triggers a sync; ReadBarrier then CHECKs the image
        (the cache list) against VTA_MAX_XFER at synchronisation."""
        cq = CommandQueue(NullDevice(), max_xfer=256, staging="reference", keep_history=True)
        cq.push_gemm_op(KernelHandle("a"), gemm_finit([(j % 3, j, 0) for j in range(40)]))
        cq.push_gemm_op(KernelHandle("b"), gemm_finit([(j % 3, j, 1) for j in range(40)]))
        assert cq.num_runs == 0 and cq.pending_count == 4
        with pytest.raises(QueueError, match="staging image .320 bytes. exceeds"):
            cq.synchronize()
        # within the limit: one run, both kernels in the image
        cq = CommandQueue(NullDevice(), max_xfer=256, staging="reference", uop_depth=48)
        for c in range(3):      # 30-uop kernels: each wraps and evicts the previous one
            cq.push_gemm_op(KernelHandle(str(c)), gemm_finit([(j % 3, j, c) for j in range(30)]))
        cq.synchronize()
        assert cq.num_runs == 1 and [t[2] for t in cq.last_run.uop_loads] == [0, 0, 0]

    def test_auto_flush_results_on_simulator(self):
        dev = SimDevice()
        x = np.arange(-64, 64, dtype=np.int32)
        a, out = dev.alloc(x.nbytes), dev.alloc(128)
        a.copy_from(x)
        cq = CommandQueue(dev, max_xfer=16 * 32, keep_history=True)
        cq.load_buffer_2d(a, 0, 8, 1, 8, 0, 0, 0, 0, 0, MemType.ACC)

        def add1(c, s):
            c.uop_loop_begin(8, 1, 1)
            c.uop_push(1, 0, 0, 0, 0, AluOp.ADD, 1, 1)
            c.uop_loop_end()
        h = KernelHandle()
        for _ in range(50):
            cq.push_alu_op(h, add1)
        cq.dep_push(2, 3)
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(0, MemType.OUT, out, 0, 8, 1, 8)
        cq.synchronize()
        assert len(cq.runs) > 2       # ACC survives runs: the additions accumulate
        assert np.array_equal(out.copy_to(np.int8), (x + 50).astype(np.int8))
        assert cq.token_balance == [0, 0, 0, 0]


class TestDebug:
    def test_dumps(self):
        dev = NullDevice()
        a, r = dev.alloc(64 * 4), dev.alloc(16 * 4)
        cq = CommandQueue(dev)
        out = io.StringIO()
        cq.set_debug_mode(2 | 4, stream=out)
        cq.load_buffer_2d(a, 0, 4, 1, 4, 0, 0, 0, 0, 0, MemType.ACC)

        def k(c, s):
            c.uop_loop_begin(4, 1, 1)
            c.uop_push(1, 0, 0, 0, 0, AluOp.MAX, 1, 0)
            c.uop_loop_end()
        cq.push_alu_op(KernelHandle(), k)
        cq.dep_push(2, 3)
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(0, MemType.OUT, r, 0, 4, 1, 4)
        cq.synchronize()
        text = out.getvalue()
        assert text.startswith("There are 1 uops\n[0000]\t acc=0, inp=0, wgt=0\n")
        assert "There are 7 instructions" in text
        assert "INSTRUCTION 2: ALU - max imm" in text
        assert f"\tDRAM: 0x{a.phys // 64:08x}, SRAM:0x0000" in text
        assert "INSTRUCTION 4: NOP-MEMORY-STAGE" in text
        assert "INSTRUCTION 5: NOP-COMPUTE-STAGE" in text
        assert "\touter loop - iter: 1, dst: 0, src: 0\n\tinner loop - iter: 4, dst: 1, src: 1" \
            in text
        # running balances: after the ALU pushes to store, g2s = 1; all zero at the end
        blocks = text.split("INSTRUCTION ")
        assert "s2g_queue = 0, g2s_queue = 1" in blocks[3]
        assert blocks[-1].rstrip().endswith("l2g_queue = 0, g2l_queue = 0\n"
                                            "\ts2g_queue = 0, g2s_queue = 0".rstrip())
        out.truncate(0)
        cq.set_debug_mode(0)
        cq.synchronize()
        assert out.getvalue() == ""

    def test_dump_of_acc8_load(self):
        # reference DumpInsn: printf("LOAD ") then a type name + newline only for UOP, WGT,
        # INP and ACC, so an ACC_8BIT load runs straight into the "\tdep" line
        dev = NullDevice()
        a = dev.alloc(16 * 4)
        out = io.StringIO()
        cq = CommandQueue(dev)
        cq.set_debug_mode(2, stream=out)
        cq.load_buffer_2d(a, 0, 4, 1, 4, 0, 0, 0, 0, 0, MemType.ACC_8BIT)
        cq.synchronize()
        assert "INSTRUCTION 0: LOAD \tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0\n" \
            f"\tDRAM: 0x{a.phys // 16:08x}, SRAM:0x0000\n" in out.getvalue()

    def test_force_serial_on_simulator_matches_normal(self):
        from vta_runtime import programs as P
        rng = np.random.default_rng(9)
        x = rng.integers(-128, 128, (4, 1, 1, 16), dtype=np.int8)
        w = rng.integers(-128, 128, (4, 1, 16, 16), dtype=np.int8)
        normal = P.gemm(SimDevice(), x, w, 2)
        dev = SimDevice(serial=True)
        cq = CommandQueue(dev)
        cq.set_debug_mode(32)
        serial = P.gemm(dev, x, w, 2, cq=cq)
        assert np.array_equal(normal.output, serial.output)
        assert cq.token_balance == [0, 0, 0, 0]
        assert cq.last_run.insn_count > normal.queue.last_run.insn_count


class TestArguments:
    def test_dma_argument_errors(self):
        dev = NullDevice()
        b = dev.alloc(64 * 4)
        cq = CommandQueue(dev)
        with pytest.raises(QueueError, match="memory type 4 cannot be loaded"):
            cq.load_buffer_2d(b, 0, 1, 1, 1, 0, 0, 0, 0, 0, MemType.OUT)
        with pytest.raises(QueueError, match="x_pad_before = 16 does not fit in 4 bits"):
            cq.load_buffer_2d(b, 0, 1, 1, 1, 16, 0, 0, 0, 0, MemType.ACC)
        with pytest.raises(QueueError, match="run past the end"):
            cq.load_buffer_2d(b, 1, 4, 1, 4, 0, 0, 0, 0, 0, MemType.ACC)
        with pytest.raises(QueueError, match="exceed the ACC buffer depth 2048"):
            cq.load_buffer_2d(b, 0, 4, 1, 4, 0, 0, 0, 0, 2046, MemType.ACC)
        with pytest.raises(QueueError, match="stores read the OUT buffer"):
            cq.store_buffer_2d(0, MemType.ACC, b, 0, 1, 1, 1)
        with pytest.raises(QueueError, match="y_size must be an integer"):
            cq.store_buffer_2d(0, MemType.OUT, b, 0, 1, 1.0, 1)
        with pytest.raises(QueueError, match="wait_cycles"):
            cq.synchronize(-1)
        assert cq.pending_count == 0

    def test_device_error_resets_queue(self):
        from vta_runtime import DeviceError
        dev = SimDevice(max_work=10)
        a = dev.alloc(64 * 64)
        cq = CommandQueue(dev)
        cq.load_buffer_2d(a, 0, 64, 1, 64, 0, 0, 0, 0, 0, MemType.ACC)
        with pytest.raises(DeviceError, match="simulator"):
            cq.synchronize()
        assert cq.pending_count == 0

    def test_check_tokens(self):
        cq = CommandQueue(NullDevice(), check_tokens=True)
        cq.synchronize()
        cq.dep_push(2, 1)          # never popped
        with pytest.raises(DependencyError, match="g2l=1"):
            cq.synchronize()

    def test_pending_store_pop_under_force_serial(self):
        cq = CommandQueue(NullDevice())
        cq.set_debug_mode(32)
        cq.dep_pop(2, 3)
        with pytest.raises(DependencyError, match="store-stage pop is pending"):
            cq.synchronize()


class TestHiddenCaseBehaviours:
    def test_load_acc8_sign_extends_in_16_byte_units(self):
        dev = SimDevice()
        x = np.arange(-128, 128, dtype=np.int8)           # 16 tiles of 16 int8
        bx, out = dev.alloc(x.nbytes), dev.alloc(15 * 16)
        bx.copy_from(x)
        cq = CommandQueue(dev)
        cq.load_buffer_2d(bx, 1, 15, 1, 15, 0, 0, 0, 0, 0, MemType.ACC_8BIT)

        def shr1(c, s):
            c.uop_loop_begin(15, 1, 1)
            c.uop_push(1, 0, 0, 0, 0, AluOp.SHR, 1, 1)
            c.uop_loop_end()
        cq.push_alu_op(KernelHandle(), shr1)
        cq.dep_push(2, 3)
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(0, MemType.OUT, out, 0, 15, 1, 15)
        cq.synchronize()
        arr = decode_stream(cq.last_run.insns)
        assert arr.memory_type[0] == MemType.ACC_8BIT and arr.dram_base[0] == bx.phys // 16 + 1
        # compute stage: the dep_push(2, 3) of a window without ALU would merge into it
        assert np.array_equal(out.copy_to(np.int8), (x[16:].astype(np.int32) >> 1).astype(np.int8))

    def test_pop_after_synchronize_lands_in_next_window(self):
        """The blocked_gemm_vt1 pattern: a dep_pop(3, 2) issued after synchronize."""
        dev = SimDevice()
        x = np.arange(64, dtype=np.int32)
        bx, o1, o2 = dev.alloc(256), dev.alloc(64), dev.alloc(64)
        bx.copy_from(x)
        cq = CommandQueue(dev, keep_history=True)

        def add(c, s):
            c.uop_loop_begin(4, 1, 1)
            c.uop_push(1, 0, 0, 0, 0, AluOp.ADD, 1, 3)
            c.uop_loop_end()
        h = KernelHandle()
        for k, out in enumerate((o1, o2)):
            if k == 0:
                cq.load_buffer_2d(bx, 0, 4, 1, 4, 0, 0, 0, 0, 0, MemType.ACC)
            cq.push_alu_op(h, add)
            cq.dep_push(2, 3)
            cq.dep_pop(2, 3)
            cq.store_buffer_2d(0, MemType.OUT, out, 0, 4, 1, 4)
            cq.dep_push(3, 2)
            cq.synchronize()
            cq.dep_pop(3, 2)
        r1, r2 = cq.runs
        assert r1.token_balance == (0, 0, 1, 0)            # the leaked store->compute token
        arr = decode_stream(r2.insns)
        assert arr.opcode[0] == Opcode.LOAD and arr.pop_next[0] == 1   # LOAD UOP pops it
        assert cq.token_balance == [0, 0, 1, 0]             # the second pop is still pending
        assert np.array_equal(o1.copy_to(np.int8), (x + 3).astype(np.int8))
        assert np.array_equal(o2.copy_to(np.int8), (x + 6).astype(np.int8))


def _random_kernel_program(cq, choices, sizes, handles):
    for c in choices:       # kernel c: uops (j % 3, j, c), so its bytes identify it
        cq.push_gemm_op(handles[c], gemm_finit([(j % 3, j, c) for j in range(sizes[c])]))
    cq.synchronize()
    return cq.last_run


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6),
       picks=st.lists(st.integers(0, 5), min_size=1, max_size=30),
       depth=st.sampled_from([48, 64, 8192]))
def test_append_staging_equals_reference_without_eviction(sizes, picks, depth):
    from isa import decode_uops
    choices = [p % len(sizes) for p in picks]
    runs, evicted = {}, 0
    for mode in ("append", "reference"):
        cq = CommandQueue(NullDevice(), staging=mode, uop_depth=depth)
        handles = [KernelHandle(str(i)) for i in range(len(sizes))]
        runs[mode] = _random_kernel_program(cq, choices, sizes, handles)
        evicted = cq._ring.evictions
    a, r = runs["append"], runs["reference"]
    arr_a = decode_stream(a.insns)
    kernel_of_row_a = dict(zip(np.flatnonzero(arr_a.opcode == Opcode.GEMM).tolist(), choices))
    # same SRAM placement and instructions apart from LOAD UOP offsets, in both modes
    assert [t[:2] for t in a.uop_loads] == [t[:2] for t in r.uop_loads]
    assert a.insn_count == r.insn_count
    # append positions: first placement of each kernel in order; a reload reuses its position
    first, pos = {}, 0
    for row, _, off, n in a.uop_loads:
        c = kernel_of_row_a[row + 1]
        if c not in first:
            first[c], pos = pos, pos + n
        assert off == first[c]
    assert len(a.uop_image) == 4 * pos
    if not evicted:
        assert a.uop_loads == r.uop_loads and a.uop_image == r.uop_image
    # append-only: every LOAD UOP fetches exactly the uops of the kernel the next GEMM runs
    arr = decode_stream(a.insns)
    gemm_rows = np.flatnonzero(arr.opcode == Opcode.GEMM)
    kernel_of_row = dict(zip(gemm_rows.tolist(), choices))
    for row, sram, off, n in a.uop_loads:
        c = kernel_of_row[row + 1]
        d, s_, w = decode_uops(a.uop_image[4 * off:4 * (off + n)])
        assert n == sizes[c] and list(w) == [c] * n and list(s_) == list(range(n))
