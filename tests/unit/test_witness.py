import re

import pytest

from reconciler.analysis.witness import examples


@pytest.mark.parametrize(
    "pattern", ["orders.*", "payments", r"customers\.(eu|us)\..+", "[a-z]+-events", r"\d{3}-x", ".*"]
)
def test_examples_fully_match_their_pattern(pattern):
    found = examples(pattern)
    assert found, pattern
    assert all(re.fullmatch(pattern, s) and s for s in found)


def test_literal_pattern_gives_itself():
    assert examples("payments") == ("payments",)


def test_an_unescaped_dot_gives_the_dotted_name_too():
    """`customers.eu` names the topic customers.eu (the dot matches itself): a policy on `customers\\..*` must see it."""
    assert "customers.eu" in examples("customers.eu")
    assert examples("orders\\..*")[0] == "orders."


def test_invalid_pattern_gives_nothing():
    assert examples("pay(ments") == ()
