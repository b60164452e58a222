"""Numbers with their nouns (backend/words.py): what every panel, the CLI and the evidence say."""

from __future__ import annotations

import pytest

from backend.words import article, count, counted


@pytest.mark.parametrize("n,noun,expected", [(1, "node", "1 node"), (0, "node", "0 nodes"),
                                             (2, "restart", "2 restarts"),
                                             (1, "process", "1 process"), (3, "process", "3 processes")])
def test_a_count_agrees_with_its_noun(n, noun, expected):
    assert count(n, noun, "processes" if noun == "process" else None) == expected


@pytest.mark.parametrize("n,expected", [(1, "a"), (7, "a"), (8, "an"), (11, "an"), (18, "an"), (80, "an"),
                                        (86, "an"), (110, "a"), (800, "an"), (11_000, "an"),
                                        (18_500, "an"), (100, "a"), (1_100, "a")])
def test_the_article_follows_the_number_said_aloud(n, expected):
    assert article(n) == expected


def test_a_counted_adjective():
    assert counted(11, "word") == "an 11-word" and counted(12, "word") == "a 12-word"
