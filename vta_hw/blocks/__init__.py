"""The core's blocks, one Amaranth component per file, and the core that wires them."""
