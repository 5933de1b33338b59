"""Probe: k back-to-back ALU instructions (4 iterations each, one micro-op) on the timed
simulator's default model and on the RTL (fast Verilator path); prints both cycle counts.
Found the model's missing cycle per directly following ALU instruction (BENCHMARKS.md,
"Micro-op load coalescing": why coalescing is opt-in)."""
import numpy as np
from isa import VTAConfig, decode_stream
from isa.insn import FinishInsn, MemInsn, AluInsn
from isa.encoding import encode
from isa.config import MemType, Opcode, AluOp
from vta_sim.timing import TimingParams, simulate_timing
from vta_hw.runners.rtlsim import run_rtl
CFG=VTAConfig()
def prog(k, vec, sep=0):
    ins=[MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1)]
    for j in range(k):
        ins.append(AluInsn(AluOp.MAX if vec else AluOp.ADD, 0, 1, iter_out=2, iter_in=2, dst_factor_out=2, dst_factor_in=1, src_factor_out=8, src_factor_in=2, use_imm=0 if vec else 1, imm=1))
        for _ in range(sep):
            ins.append(MemInsn(Opcode.LOAD, MemType.UOP, sram_base=0, dram_base=0, y_size=0, x_size=0, x_stride=0))
    ins.append(FinishInsn())
    return b"".join(encode(i, CFG) for i in ins)
P=TimingParams()
dram=np.zeros(1<<16,np.uint8)
for k, vec, sep in [(1,0,0),(2,0,0),(8,0,0),(32,0,0),(1,1,0),(8,1,0),(32,1,0)]:
    b=prog(k,vec,sep); s=simulate_timing(decode_stream(b,CFG),P).cycles
    r=run_rtl(b, dram.copy(), CFG, simulator="verilator").cycles
    print(k,vec,sep,"sim",s,"rtl",r, "diff", r-s)
