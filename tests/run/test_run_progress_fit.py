"""A heartbeat fit to a terminal 80 columns wide (run/start/progress.fit): the test's last part and
the model stay readable, the node id's middle goes first (issue 52: at 80 columns the heartbeat
cut the test's name and model, ``tests/...2-135m] 12 s: smollm2-135m (candidate...``).

The lines are the heartbeat's as a run prints them (tests/plugin/test_plugin_progress*.py run it
for real); ``fit`` is a function of the line and the width: no timing.
"""

from __future__ import annotations

from pytest_slam.run.start.progress import fit

COLUMNS = 80
HEAD = "pytest-slam: 12 of 140 tests, "
LONG = "tests/llm/test_support_bot.py::test_routes_a_refund_request_to_billing[smollm2-135m]"


def test_a_long_test_id_keeps_its_name_s_end_and_the_model_at_80_columns() -> None:
    fitted = fit(f"{HEAD}{LONG} 12 s: smollm2-135m (candidate), 14 tok", COLUMNS)
    assert len(fitted) < COLUMNS, fitted
    assert "_to_billing[smollm2-135m] 12 s: smollm2-135m" in fitted, fitted  # name's end, model
    assert fitted.startswith(f"{HEAD}..."), fitted  # the id's start went first
    assert not fitted.endswith("..."), fitted  # nothing cut after the model


def test_the_test_s_last_part_stays_whole_when_the_path_can_give_enough() -> None:
    """Wider than 80 columns, the id's path gives its middle and the test's name stays whole."""
    test = "tests/llm/integration/test_support_bot_routing.py::test_refund[smollm2-135m]"
    fitted = fit(f"{HEAD}{test} 12 s: smollm2-135m (candidate), 14 tok", 120)
    assert len(fitted) < 120, fitted
    assert fitted.startswith(f"{HEAD}tests/"), fitted
    assert fitted.endswith("...::test_refund[smollm2-135m] 12 s: smollm2-135m (candidate), 14 tok")


def test_two_calls_keep_the_test_and_both_models() -> None:
    """Tokens, a grouped line's words and then roles go before any model is cut."""
    line = (
        f"{HEAD}{LONG} 12 s: 2 calls in flight: gpt-4o-mini (reference), 3 tok; "
        "smollm2-135m (candidate) 11 s, 14 tok"
    )
    fitted = fit(line, 110)
    assert len(fitted) < 110, fitted
    assert "[smollm2-135m] 12 s: 2 calls: gpt-4o-mini; smollm2-135m 11 s" in fitted, fitted


def test_a_line_that_fits_is_left_as_it_is() -> None:
    line = "pytest-slam: 0 of 2 tests, test_x.py::test_y[smol] 3 s: smol (candidate), 4 tok"
    assert fit(line, COLUMNS) == line
