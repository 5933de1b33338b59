"""Runners of the generated core: Amaranth's simulator, Verilog generation, Icarus/Verilator through cocotb, and the memory image they share."""
