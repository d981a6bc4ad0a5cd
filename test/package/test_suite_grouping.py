"""The suite's own scheduling: with ``--dist loadgroup`` (setup.cfg) the tests that start many processes (the
ROS 2 workspace, the soak, the twin over DDS: marked ``xdist_group("processes")``) run on one worker one after
another. pytest-xdist reads a test's group from a suffix of its id; a pytest that drops the suffix (9.2 with
pytest-xdist 3.8) would run them on both workers at once, which starves their nodes on a two-core machine."""
import os

import pytest


@pytest.mark.xdist_group("processes")
def test_a_grouped_test_carries_its_group_to_the_scheduler(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@processes"), (
        f"pytest-xdist's scheduler does not see the group of {request.node.nodeid}: install the test extra's pytest")
