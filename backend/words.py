"""Numbers with their nouns, as a person writes them: `1 node`, `2 restarts`, `an 11-word note`.
One place, so the CLI, the lesson's evidence and every panel agree; plain functions that import
nothing (the CLI's one-line errors use them before pydantic loads)."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 node`, `0 nodes`, `2 restarts`; `plural` where adding an s is wrong (`1 pass`, `2 passes`)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def article(n: int) -> str:
    """"a" or "an" before the number `n` said aloud: an 8, an 11, an 18, an 80-something, an
    11,000; a 1, a 110."""
    digits = str(abs(n))
    lead = digits[: len(digits) % 3 or 3]  # the first group of thousands is what is said first
    return "an" if digits.startswith("8") or lead in ("11", "18") else "a"


def counted(n: int, noun: str) -> str:
    """A number used as an adjective, with its article: `a 7-word`, `an 11-word` (+ noun)."""
    return f"{article(n)} {n}-{noun}"
