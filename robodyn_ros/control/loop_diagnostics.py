"""What the controller loops' watchdogs say together (:class:`~robodyn_ros.control.tracking_watchdog.
TrackingWatchdog`, :class:`~robodyn_ros.control.adaptation_watchdog.AdaptationWatchdog`), shared by
:class:`~robodyn_ros.control.control_loop.ControlLoop` and :class:`~robodyn_ros.control.mpc_loop.MpcLoop`.
"""
from __future__ import annotations


def diagnostics_notes(tracking, adaptation, base_update):
    """The warnings of a controller's watchdogs (tracking; adaptation with the base-parameter update's reason)."""
    notes = [tracking.note()]
    if adaptation is not None:
        notes.append(adaptation.note(base_update.waiting_reason()))
        if base_update.initial_verdict == "refused":
            notes.append(base_update.initial_note)
    return [note for note in notes if note]


def apply_diagnostics_parameters(changed, tracking, adaptation):
    """Live changes of ``tracking_error.threshold``, ``tracking_error.window`` and ``adaptation_timeout``."""
    if "tracking_error.threshold" in changed:
        tracking.threshold = float(changed["tracking_error.threshold"])
    if "tracking_error.window" in changed:
        tracking.window = float(changed["tracking_error.window"])
    if "adaptation_timeout" in changed and adaptation is not None:
        adaptation.timeout = float(changed["adaptation_timeout"])
