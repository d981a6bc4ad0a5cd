"""PublicationGaps: messages lost between publishers and a subscriber, from the publishers' sequence numbers."""
from robodyn_ros.estimation.message_loss import PublicationGaps


def test_gaps_in_each_publishers_numbers_are_the_lost_messages():
    gaps = PublicationGaps()
    taken = [("a", 4), ("a", 5), ("b", 1), ("a", 9), ("b", 2), ("b", 6), ("a", 10)]
    assert [gaps.observe(*m) for m in taken] == [0, 0, 0, 3, 0, 3, 0]   # the first of each: where counting starts
    assert (gaps.lost, gaps.taken, gaps.unnumbered) == (6, 7, 0)


def test_unnumbered_repeated_and_older_messages_are_not_losses():
    gaps = PublicationGaps()
    assert [gaps.observe(*m) for m in [("a", None), ("a", 3), ("a", 3), ("a", 2), ("a", 4), ("a", None), ("a", 6)]] \
        == [0, 0, 0, 0, 0, 0, 1]                  # 2 after 3 does not move the count back: 4 loses nothing
    assert (gaps.lost, gaps.taken, gaps.unnumbered) == (1, 7, 2)
