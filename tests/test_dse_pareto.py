"""compiler.dse.pareto: the front is exactly the set of non-dominated points."""

import itertools

import numpy as np
import pytest

from compiler.dse.pareto import pareto_front


def brute_force(costs):
    """The definition: i is on the front unless some j is no worse in both and better in
    one; of exact duplicates only the first counts."""
    out = []
    for i, (a, b) in enumerate(costs):
        dominated = any((c <= a and d <= b and (c < a or d < b)) or ((c, d) == (a, b) and j < i)
                        for j, (c, d) in enumerate(costs) if j != i)
        if not dominated:
            out.append(i)
    return out


def test_hand_made_set():
    pts = [(10, 5), (8, 7), (12, 4), (11, 6), (8, 8), (20, 1), (9, 7)]
    # (11, 6) is beaten by (10, 5); (8, 8) by (8, 7); (9, 7) by (8, 7)
    assert pareto_front(pts) == [5, 2, 0, 1]


def test_ordered_by_the_second_cost_and_strictly_improving_first():
    rng = np.random.default_rng(3)
    pts = [tuple(map(int, p)) for p in rng.integers(0, 30, (60, 2))]
    f = pareto_front(pts)
    bs = [pts[i][1] for i in f]
    as_ = [pts[i][0] for i in f]
    assert bs == sorted(bs) and all(x > y for x, y in zip(as_, as_[1:]))


@pytest.mark.parametrize("seed", range(20))
def test_matches_the_definition_on_random_sets(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    pts = [tuple(map(int, p)) for p in rng.integers(0, 8, (n, 2))]   # many ties
    assert sorted(pareto_front(pts)) == brute_force(pts)


def test_duplicates_keep_one_and_empty_is_empty():
    assert pareto_front([(1, 1), (1, 1), (2, 0)]) == [2, 0]
    assert pareto_front([]) == []


def test_every_point_off_the_front_is_dominated_by_one_on_it():
    rng = np.random.default_rng(7)
    pts = [tuple(p) for p in rng.random((200, 2))]
    f = set(pareto_front(pts))
    for i, (a, b) in enumerate(pts):
        if i not in f:
            assert any(pts[j][0] <= a and pts[j][1] <= b for j in f)
    for i, j in itertools.combinations(f, 2):
        (a, b), (c, d) = pts[i], pts[j]
        assert not (a <= c and b <= d) and not (c <= a and d <= b)
