"""One program on a board, real or simulated: :func:`run_board`.

It sits above both transports, :mod:`.host` (``BoardHost``, the serial port) and
:mod:`.simboard` (``SimulatedBoard``), so neither imports the other back.
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig

from ..runners.image import RunResult, check_program
from .host import BoardError, BoardHost, open_serial
from .simboard import SimulatedBoard

__all__ = ["run_board"]


def run_board(insns: bytes, dram: np.ndarray, cfg: VTAConfig | None = None, *,
              port: str | None = None, baud: int = 115200, simulate: bool = False,
              dram_words: int = 8192, max_cycles: int | None = None,
              timeout: float | None = None,
              read_timeout: float = 2.0, validate: bool = True, progress=None,
              **sim_kw) -> RunResult:
    """One program on a board, like :func:`vta_hw.runners.amaranth_sim.run_amaranth`: ``dram`` is
    updated in place and a :class:`~vta_hw.runners.image.RunResult` returned.  ``port`` opens the
    board's serial port; ``simulate=True`` uses a fresh
    :class:`~vta_hw.board.simboard.SimulatedBoard` (``**sim_kw``: ``serial``, ``divisor``, ...).
    ``progress`` (a callable taking one line) hears each phase: write, run, read back.

    Raises
    ------
    BoardError, RtlRunError
        as :meth:`BoardHost.run`; also when neither ``port`` nor ``simulate`` is given.
    """
    cfg = cfg or VTAConfig()
    if validate:        # before a board (or its simulation) is started
        if isinstance(insns, np.ndarray):
            insns = insns.tobytes()
        check_program(bytes(insns), np.asarray(dram).size, cfg)
    if simulate:
        transport = SimulatedBoard(cfg, dram_words=dram_words, **sim_kw)
    elif port is not None:
        transport = open_serial(port, baud, timeout=read_timeout)
    else:
        raise BoardError("run_board: give the board's serial port or simulate=True")
    try:
        host = BoardHost(transport, cfg, dram_words=dram_words)
        if not simulate:
            host.resync()            # a previous host may have left a command half sent
        return host.run(insns, dram, max_cycles=max_cycles, timeout=timeout,
                        validate=validate, progress=progress)
    finally:
        transport.close()
