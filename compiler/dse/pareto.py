"""Pareto fronts of the DSE: points no other point beats in both of two costs (both minimised).

Example::

    from compiler.dse.pareto import pareto_front
    pts = [(10, 5), (8, 7), (12, 4), (11, 6), (8, 8)]
    print(pareto_front(pts))        # [2, 0, 1]: (12, 4), (10, 5), (8, 7)
"""

from __future__ import annotations

__all__ = ["pareto_front"]


def pareto_front(costs) -> list[int]:
    """Indices of the non-dominated pairs of ``costs`` (a sequence of ``(a, b)``, both
    minimised), ordered by increasing ``b``.  A pair is dominated if another is no worse in
    both and better in one; of exact duplicates the first is kept."""
    order = sorted(range(len(costs)), key=lambda i: (costs[i][1], costs[i][0], i))
    front, best_a = [], None
    for i in order:
        a = costs[i][0]
        if best_a is None or a < best_a:
            front.append(i)
            best_a = a
    return front
