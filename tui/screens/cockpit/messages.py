"""What one part of the cockpit screen asks of another: messages up to the screen, which routes
each to the part that owns the work with a method call down (Textual's rule, kept between parts
as between widgets). No part holds another."""

from __future__ import annotations

from textual.message import Message


class FollowJob(Message):
    """A lesson step launched a job: follow it (the following part)."""

    def __init__(self, job: str) -> None:
        super().__init__()
        self.job = job


class CheckpointsChanged(Message):
    """The followed job stepped (`soon`: its checkpoints may change shortly) or ended (at once):
    the storage part reads the volume again."""

    def __init__(self, soon: bool) -> None:
        super().__init__()
        self.soon = soon


class AttemptsChanged(Message):
    """The followed job changed, or one of its attempts ended: the attempt ledger, where it is
    shown, is read again (the attempts part)."""
