"""When a ROS process of this package (a node, ``robodyn record``) stops: on SIGINT (Ctrl-C), on SIGTERM,
and when the process that started it (``ros2 launch``, ``ros2 run``) is gone.

Without handlers of its own, a SIGINT raised KeyboardInterrupt wherever the main thread was, which in a
node is mostly inside a callback that rclpy's EventsExecutor calls from C++: pybind11 then reported
``RuntimeError: Unable to convert call argument '0' to Python object``, or the executor logged ``[FATAL]
Exception in 'timers' callback``, and the node exited 1. SIGTERM killed the process (exit -15) before it
destroyed its DDS participant, leaving its Fast DDS shared-memory segments behind. rclpy installs no
handlers for a context of one's own (``rclpy.init(context=...)``), and its handlers for the default
context shut the context down from another thread while callbacks still run.

:class:`ProcessStop` instead: while the process starts (imports, rclpy init, URDF, kernels, configure,
activate: no executor callback runs) the first signal raises :class:`StopRequested`, which cuts the
start-up short; once :meth:`ProcessStop.running`, a signal only records itself, and the main loop asks
:meth:`ProcessStop.requested` between two ``spin_once`` calls, so no callback is ever interrupted. Later
signals are only recorded: ``ros2 launch`` forwards to its processes the Ctrl-C that the terminal already
sent them, then escalates to SIGTERM.

The parent: ``ros2 launch`` dies of SIGTERM (upstream launch handles it only where a Python handler for it
is installed, and then says "using SIGTERM can result in orphaned processes"), and so does ``ros2 run``;
their processes would keep running, a controller commanding the robot, with nobody to stop them. A
process whose parent is gone stops as on SIGTERM (unless it started as an orphan already).
"""
from __future__ import annotations

import os
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequested(BaseException):
    """A stop signal received while the process was starting (:class:`ProcessStop`)."""


class ProcessStop:
    """SIGINT, SIGTERM and the parent's exit as a request to stop cleanly (module docstring).

    ``raise_while_starting``: the first signal before :meth:`running` raises :class:`StopRequested` (False:
    it is only recorded). Installs its handlers on construction; :meth:`ignore_signals` when the process
    is about to exit."""

    def __init__(self, raise_while_starting=True):
        self.received = None           # name of the first stop signal, or None
        self.starting = raise_while_starting
        self.parent = os.getppid()
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.received = self.received or signal.Signals(signum).name
        if self.starting:
            self.starting = False
            raise StopRequested(self.received)

    def running(self):
        """From now on a signal is recorded, never raised; True when a stop was requested already."""
        self.starting = False
        return self.requested()

    def parent_exited(self):
        """Whether the process that started this one is gone (never for a process started as an orphan)."""
        return self.parent > 1 and os.getppid() != self.parent

    def requested(self):
        """Whether to stop now: a stop signal arrived or the parent is gone."""
        return self.received is not None or self.parent_exited()

    @property
    def reason(self):
        """``"SIGINT"``, ``"SIGTERM"``, ``"parent exited"`` or None."""
        return self.received or ("parent exited" if self.parent_exited() else None)

    @staticmethod
    def ignore_signals():
        """Ignore SIGINT and SIGTERM from now on, for a process about to exit. Not the previous handlers:
        the interpreter resets handlers of its own to the default while it exits, and the Ctrl-C that ros2
        launch forwards a few ms after the terminal's then killed a process that had stopped cleanly
        (exit -2)."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
