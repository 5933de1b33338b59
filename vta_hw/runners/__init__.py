"""Runners of the generated core: Amaranth's simulator, Verilog generation, Icarus through
cocotb, Verilator with a C++ cycle loop and DRAM model (``fastrtl``), and the memory image
they share."""
