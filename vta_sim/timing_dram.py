"""The pure arithmetic of the timing model's DRAM transfers (:mod:`vta_sim.timing_engine`
runs the events): how a contiguous transfer splits into bursts, and when vta_hw's loader has
written a LOAD's zero padding against the load's own data bursts (``pad_zero_side``)."""

from __future__ import annotations

__all__ = ["bursts", "zero_side_end"]


def zero_side_end(t0: int, lead: int, gap: int, tail: int, rows: int, reload: int,
                   per_tile: int, spans: list) -> int:
    """The cycle vta_hw's loader has written the zero padding of a LOAD (``pad_zero_side``).

    From ``t0`` (the first read request) the zero side works through ``lead`` padding tiles
    (the ``y_pad_0`` rows and the first row's ``x_pad_0``), then per data row a counter
    reload of ``reload`` cycles and the run after the row (``gap`` = ``x_pad_1 + x_pad_0``
    tiles, after the last row ``tail`` = ``x_pad_1`` plus the ``y_pad_1`` rows; without data
    rows ``lead + tail`` tiles), ``per_tile`` cycles a tile.  A tile is written only in a
    cycle without a data beat of this load (the SRAM's one write port; ``spans``: the load's
    bursts' ``(start, end)`` data cycles, in order); a reload takes any cycle, so a data
    burst holds the zero side up unless it is reloading (vta_hw.blocks.loader: ``zcnt``
    counts down only without ``data_wr``, reloads at ``zcnt == 0``).  Work per burst, not
    per cycle."""
    gap, lead, tail = gap * per_tile, lead * per_tile, tail * per_tile
    period = reload + gap              # one row's reload and the run after it
    n = lead + rows * period - gap + tail if rows else lead + tail
    k, c = 0, t0                       # events done, cycle
    held = False                       # event k is a padding tile: data cycles hold it up
    for s, e in spans:
        if e <= c:
            continue
        if s > c:                      # free cycles: any event
            if n - k <= s - c:
                return c + n - k
            k += s - c
            c = s
            held = False
        if not held:                   # (held: k is unchanged since, so it still is)
            m = e - c                  # data cycles: only reloads
            while m and lead <= k < n:
                j = k - lead
                y, off = divmod(j, period) if period else (rows, 0)
                if y >= rows or off >= reload:
                    break              # a padding tile: wait for the burst's end
                run = (reload - off) if gap or y == rows - 1 else (rows - 1 - y) * period + \
                    reload - off
                d = min(m, run)
                k, m, c = k + d, m - d, c + d
            if k >= n:
                return c
            held = m > 0               # stopped at a padding tile (k < lead or as above)
        c = e
    return c + n - k


def bursts(addr: int, nbytes: int, max_bytes: int, boundary: int) -> list[int]:
    """Sizes of the bursts a contiguous transfer splits into."""
    out = []
    end = addr + nbytes
    while addr < end:
        nxt = min(end, (addr // boundary + 1) * boundary, addr + max_bytes)
        out.append(nxt - addr)
        addr = nxt
    return out
