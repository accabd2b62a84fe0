"""The collector's pause: off inside, restored after, whatever the block does."""

from __future__ import annotations

import gc

import pytest

from pytest_slam.util.gcpause import gc_paused


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_exception_in_the_block_still_restores_the_collector() -> None:
    with pytest.raises(ZeroDivisionError), gc_paused():
        _ = 1 / 0
    assert gc.isenabled()


def test_a_nested_pause_leaves_it_off_until_the_outer_one_ends() -> None:
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_had_switched_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
