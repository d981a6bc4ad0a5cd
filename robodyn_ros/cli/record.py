"""robodyn record BAG [--topics TOPIC ...] [--storage mcap|sqlite3] [--duration S]: record live ROS 2
topics into a rosbag2 bag with rosbags, for users without the ros2 bag CLI.

Each topic is recorded with the type the ROS graph reports for it, as soon as a publisher appears. The
recording stops on Ctrl-C (SIGINT) or SIGTERM, or after ``--duration`` seconds, and the bag then appears
at BAG complete; on any failure (or when nothing was received) nothing is left at BAG (the bag is
written in a hidden temporary folder and renamed at the end). Progress (messages per topic) on stderr.
"""
from __future__ import annotations

import argparse
import signal
import sys

from ..model.errors import ModelError
from ..ros.recorder import record_topics

DEFAULT_TOPICS = ("/joint_states",)


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn record", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="bag directory to create (must not exist)")
    p.add_argument("--topics", nargs="+", default=list(DEFAULT_TOPICS), metavar="TOPIC",
                   help="topics to record (default /joint_states)")
    p.add_argument("--storage", default="mcap", choices=("mcap", "sqlite3"), help="bag storage (default mcap)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
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
    stopping = []
    previous = {s: signal.signal(s, lambda *_: stopping.append(True)) for s in (signal.SIGINT, signal.SIGTERM)}

    def progress(recorder, elapsed):
        if args.quiet:
            return
        counts = ", ".join(f"{t} {n}" + (" (waiting for a publisher)" if t in recorder.pending else "")
                           for t, n in recorder.counts.items())
        sys.stderr.write(f"\rrecording {elapsed:6.1f} s: {counts}")
        sys.stderr.flush()

    try:
        if args.duration is not None and not args.duration > 0:
            raise ModelError(f"--duration {args.duration}: must be positive")
        path, counts = record_topics(args.bag, args.topics, storage=args.storage, duration=args.duration,
                                     use_sim_time=args.use_sim_time, stop=lambda: bool(stopping),
                                     progress=progress)
    except ModelError as exc:
        print(f"\nrobodyn record: error: {' '.join(str(exc).split())}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line, no partial bag
        print(f"\nrobodyn record: error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not args.quiet:
        sys.stderr.write("\n")
    silent = [t for t, n in counts.items() if n == 0]
    print(f"wrote {path}: " + ", ".join(f"{t} {n} messages" for t, n in counts.items()))
    if silent:
        print(f"warning: nothing was received on {', '.join(silent)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
