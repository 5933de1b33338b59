"""The FPGA board: the ULX3S build with the open flow, the UART bridge, the host-side driver and the board in simulation."""
