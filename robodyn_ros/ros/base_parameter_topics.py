"""The estimator's base parameters and covariance as a controller node receives them (``use_base_parameters``,
inverse_dynamics and mpc nodes): message checks, then ``loop.apply_base_parameters(beta, covariance)``."""
from __future__ import annotations

from std_msgs.msg import Float64MultiArray

from . import messages as rm
from . import qos


class BaseParameterTopics:
    """Subscribes ``node`` to ``base_parameters_topic`` and ``base_covariance_topic``; each base-parameter
    message goes to ``loop`` (a ControlLoop or MpcLoop with a ``base_update``) with the covariance received
    since the previous one (None: the loop keeps the last)."""

    def __init__(self, node, loop):
        self.node, self.loop = node, loop
        self.names = list(loop.base_update.base.names)
        self.covariance = None
        c = node.config
        node.sub(Float64MultiArray, c["base_parameters_topic"], self.on_base_parameters, qos.ESTIMATE_QOS)
        node.sub(Float64MultiArray, c["base_covariance_topic"], self.on_covariance, qos.ESTIMATE_QOS)

    def on_base_parameters(self, msg):
        try:
            beta = rm.float64_multiarray_to_array(msg, len(self.names))
            if rm.float64_multiarray_labels(msg) not in (None, self.names):
                raise rm.MessageRejected("base parameter labels differ from this model's (another robot, joints "
                                         "or coulomb_width?)")
        except rm.MessageRejected as exc:
            self.node.reject("base_parameters", exc)
            return
        self.loop.apply_base_parameters(beta, self.covariance)
        self.covariance = None
        failure = self.loop.base_update.failure_note()
        if failure is not None:
            self.node.warn_throttled("consistent_fit", failure)

    def on_covariance(self, msg):
        r = len(self.names)
        try:
            self.covariance = rm.float64_multiarray_to_array(msg, r * r).reshape(r, r)
        except rm.MessageRejected as exc:
            self.node.reject("base_covariance", exc)
