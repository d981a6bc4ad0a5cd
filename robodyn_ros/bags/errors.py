"""The error a bag raises: which bag, which topic, which message, and what is wrong with it."""

from __future__ import annotations

from robodyn_ros.model.errors import ModelError


class BagError(ModelError):
    """A bag that cannot be read or written as asked.

    The message reads ``bag '<path>'[, topic '<topic>']: [message <index> ]<reason>``: the bag always, the
    topic and the message's index on that topic (0-based, in bag order) when the fault lies there. A
    ``ModelError``, so callers that catch model and input errors together catch this one too.
    """

    def __init__(self, bag, reason: str, topic: str | None = None, index: int | None = None):
        self.bag, self.reason, self.topic, self.index = str(bag), reason, topic, index
        where = f"bag {self.bag!r}" + (f", topic {topic!r}" if topic is not None else "")
        super().__init__(f"{where}: " + (f"message {index} " if index is not None else "") + reason)
