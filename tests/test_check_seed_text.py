"""How `check` names a round's seeds in its plan and its verdict (check_plan.seed_text)."""

from mutransfer.commands.check_plan import seed_text


def test_consecutive_seeds_read_as_one_range():
    assert seed_text([0, 1, 2, 3]) == "0-3"
    assert seed_text([1]) == "1"


def test_seeds_with_a_gap_are_not_read_as_the_range_between_them():
    # [0, 5] is two seeds, not the six seeds 0-5
    assert seed_text([0, 5]) == "0, 5"
    assert seed_text([10, 11, 20, 21]) == "10-11, 20-21"


def test_a_range_starting_below_zero_is_not_read_as_a_subtraction():
    assert seed_text([-1, 0]) == "-1..0"
    assert seed_text([-3]) == "-3"


def test_no_seeds_read_as_a_dash():
    assert seed_text([]) == "-"
    assert seed_text(None) == "-"
