"""VTA in Amaranth HDL: fetch, load, compute (GEMM core, tensor ALU), store, token queues,
SRAMs and the memory port, parameterised by ``isa.VTAConfig``; Verilog generation and FPGA
bitstreams with the open YoWASP flow."""
