"""bench/hot.py's pure parts: the pauses of a copy read off the target's listed ends over time (`stalls`)."""

from __future__ import annotations

from bench.hot import stalls


def test_stalls_add_up_the_pauses_within_the_window():
    moves = [(0.0, 1), (0.1, 10), (0.2, 20), (1.2, 30), (1.3, 40), (1.4, 50), (1.9, 60), (9.0, 70)]
    # 0.2 -> 1.2 (1.0 s) and 1.4 -> 1.9 (0.5 s) are pauses; 1.9 -> 9.0 is after the window's end
    total, longest = stalls(moves, 0.0, 1.9, gap=0.25)
    assert abs(total - 1.5) < 1e-9
    assert abs(longest - 1.0) < 1e-9


def test_no_moves_no_stalls():
    assert stalls([], 0.0, 1.0) == (0.0, 0.0)
    assert stalls([(0.5, 1)], 0.0, 1.0) == (0.0, 0.0)
