"""Recommended answers go first with one line saying what and why (supervisor/guard/recommend)."""

from supervisor.guard.recommend import marked, recommend


def test_the_recommended_option_goes_first_matched_in_any_case():
    assert recommend(("A", "B", "C"), " b ", "it is  safer") == (
        ("B", "A", "C"), "★ Recommended: B (the first button): it is safer")


def test_a_recommendation_that_is_no_option_becomes_the_first():
    assert recommend(("A", "B"), "wait a day") == (
        ("wait a day", "A", "B"), "★ Recommended: wait a day (the first button)")
    assert recommend((), "yes") == (("yes",), "★ Recommended: yes (the first button)")


def test_nothing_recommended_leaves_the_options_alone():
    assert recommend(("A", "B"), "") == (("A", "B"), "")
    assert recommend(("A", "B"), "   ", "why not") == (("A", "B"), "")


def test_the_clis_recommended_label_and_a_long_reason():
    labels = ("Skip it", "Fix it (Recommended)")
    assert marked(labels) == "Fix it (Recommended)" and marked(("a", "b")) == ""
    options, line = recommend(labels, marked(labels), "x" * 1000)
    assert options == ("Fix it (Recommended)", "Skip it")
    assert line.startswith("★ Recommended: Fix it (the first button): x") and len(line) < 360
