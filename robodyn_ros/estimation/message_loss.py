"""Messages lost between publishers and a subscriber, from the publishers' sequence numbers.

DDS numbers every sample a writer sends (1, 2, 3, ...), and the subscriber learns the number of each message
it takes (ROS 2's ``publication_sequence_number``). A keep-last queue that overflows before its messages are
taken, or a best-effort transport that drops one, leaves a gap in those numbers; the middleware itself
reports neither an overwritten queue entry nor, for every transport, a lost sample. The count starts at
each publisher's first message taken (what it sent before cannot be told from what it sent before this
subscriber connected), and a message without a number (an RMW that does not give them) is only counted as
such.
"""
from __future__ import annotations


class PublicationGaps:
    """Messages lost per subscriber, from ``(publisher, sequence)`` of the messages taken in arrival order.

    ``lost``: messages missing between two taken from the same publisher; ``taken``: messages observed;
    ``unnumbered``: taken messages without a sequence number (not counted either way). A publisher is any
    hashable id (its GID: a restarted writer has a new one); a message numbered at or below its publisher's
    newest (DDS delivers a writer's samples in order, so a duplicate) is neither a loss nor moves the count."""

    def __init__(self):
        self.lost = 0
        self.taken = 0
        self.unnumbered = 0
        self._newest = {}

    def observe(self, publisher, sequence):
        """Note one taken message; returns the number of messages lost just before it (0 or more)."""
        self.taken += 1
        if sequence is None:
            self.unnumbered += 1
            return 0
        newest = self._newest.get(publisher)
        if newest is not None and sequence <= newest:
            return 0
        self._newest[publisher] = sequence
        if newest is None:
            return 0
        gap = sequence - newest - 1
        self.lost += gap
        return gap
