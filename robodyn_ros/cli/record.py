"""robodyn record BAG [--topics TOPIC ...] [--storage mcap|sqlite3] [--duration S] [--span S]: record live ROS 2
topics into a rosbag2 bag with rosbags, for users without the ros2 bag CLI.

Each topic is recorded with the type the ROS graph reports for it, as soon as a publisher appears. The
recording stops on Ctrl-C (SIGINT) or SIGTERM, after ``--duration`` seconds of wall time, or once the first
topic's recorded header stamps span ``--span`` seconds (the robot's time: a simulator running faster than real
time is recorded for less wall time; whichever comes first), and the bag then appears
at BAG complete; on any failure (or when nothing was received) nothing is left at BAG (the bag is
written in a hidden temporary folder and renamed at the end). Progress (messages per topic) on stderr.
Joint states with a non-finite position, an infinite velocity or effort, or a value beyond 1e9 (a diverged
simulator's) are not written: one warning line counts them per topic.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..model.errors import ModelError
from ..ros.process_stop import ProcessStop
from ..ros.recorder import record_topics

DEFAULT_TOPICS = ("/joint_states",)


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn record", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="bag directory to create (must not exist)")
    p.add_argument("--topics", nargs="+", default=list(DEFAULT_TOPICS), metavar="TOPIC",
                   help="topics to record (default /joint_states)")
    p.add_argument("--storage", default="mcap", choices=("mcap", "sqlite3"), help="bag storage (default mcap)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    p.add_argument("--span", type=float, help="stop once the first topic's header stamps span this many seconds "
                   "(the robot's time, e.g. a simulator's faster than real time)")
    p.add_argument("--use-sim-time", action="store_true", help="stamp messages with /clock time")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv=None):
    """Entry point of ``robodyn record``; returns the exit code (0 ok, 2 bad input or nothing recorded)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    stop = ProcessStop(raise_while_starting=False)

    def progress(recorder, elapsed):
        if args.quiet:
            return
        counts = ", ".join(f"{t} {n}" + (" (waiting for a publisher)" if t in recorder.pending else "")
                           for t, n in recorder.counts.items())
        spanned = f" ({recorder.span:.1f} s of stamps)" if args.span is not None else ""
        _say(sys.stderr, f"\rrecording {elapsed:6.1f} s{spanned}: {counts}", end="")

    try:
        for name, value in (("--duration", args.duration), ("--span", args.span)):
            if value is not None and not 0 < value < float("inf"):
                raise ModelError(f"{name} {value}: must be positive")
        path, counts, dropped = record_topics(args.bag, args.topics, storage=args.storage, duration=args.duration,
                                              span=args.span, use_sim_time=args.use_sim_time, stop=stop.requested,
                                              progress=progress)
    except ModelError as exc:
        _say(sys.stderr, f"\nrobodyn record: error: {' '.join(str(exc).split())}\nnothing was written")
        return 2
    except Exception as exc:  # noqa: BLE001 - one line, no partial bag
        _say(sys.stderr, f"\nrobodyn record: error: {type(exc).__name__}: {' '.join(str(exc).split())}\n"
                         "nothing was written")
        return 1
    finally:
        stop.ignore_signals()
    if not args.quiet:
        _say(sys.stderr, "")
    silent = [t for t, n in counts.items() if n == 0]
    _say(sys.stdout, f"wrote {path}: " + ", ".join(f"{t} {n} messages" for t, n in counts.items()))
    if silent:
        _say(sys.stderr, f"warning: nothing was received on {', '.join(silent)}")
    if dropped:
        _say(sys.stderr, "warning: not recorded, joint states with non-finite or absurd values: " + "; ".join(
            f"{t} {n} (the first: {reason})" for t, (n, reason) in dropped.items()))
    return 0


def _say(stream, text, end="\n"):
    """Write a line to ``stream``; a reader that is gone (the ``ros2 launch`` that started this recorder was
    killed) silences the stream instead of failing the recording."""
    try:
        stream.write(text + end)
        stream.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())   # the interpreter's last flush too


if __name__ == "__main__":
    sys.exit(main())
