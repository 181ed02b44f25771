"""The driver's side-channel thread (engine/driver.py `Periodic`): the checkpoint rounds run there."""

from __future__ import annotations

import threading

from reconciler.engine.driver import Periodic


def test_an_error_is_reported_and_the_action_runs_again_at_its_next_interval():
    calls: list[int] = []
    errors: list[str] = []
    second = threading.Event()

    def action() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("the source cluster did not answer")
        second.set()

    side = Periodic("checkpoints", action, lambda: 0.01, errors.append)
    side.start()
    assert second.wait(10)
    assert side.stop(timeout=10)
    assert errors == ["checkpoints: RuntimeError: the source cluster did not answer"]


def test_stop_waits_for_a_round_in_progress_and_says_when_it_did_not_end():
    entered, release = threading.Event(), threading.Event()
    ended: list[bool] = []

    def slow() -> None:
        entered.set()
        release.wait(10)
        ended.append(True)

    side = Periodic("checkpoints", slow, lambda: 0.01, lambda _: None)
    side.start()
    assert entered.wait(10)
    assert side.stop(timeout=0.05) is False  # still inside its round
    release.set()
    assert side.stop(timeout=10) is True
    assert ended == [True]  # the round ran to its end, and no other began after stop
