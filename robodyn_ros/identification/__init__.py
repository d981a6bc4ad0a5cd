"""Identification of inertial, armature, friction and payload parameters.

- :mod:`.base_parameters`: full parameter vector, base (identifiable) parameters by QR (Gautier & Khalil),
  readable names, identifiability explanation (Cărmizaru ch. 4).
- :mod:`.batch_regressor`: the joint-torque regressor vectorised over samples.
- :mod:`.least_squares`: weighted least squares (tall-skinny QR accumulation), physically consistent fit
  (log-Cholesky pseudo-inertias, CasADi + IPOPT).
- :mod:`.batch`: the offline pipeline from measured signals to an identified Model (in memory, or streamed
  from a sample source in bounded memory).
- :mod:`.chunked_filter`: the zero-phase low-pass window by window over a stream of samples.
- :mod:`.validation`: held-out relative torque errors of identified and nominal models.
- :mod:`.excitation`: the regressor condition number of a motion; exciting trajectories within URDF limits.
- :mod:`.payload`: payload from a wrist F/T sensor or from joint torques; CUSUM change detector.
- :mod:`.results`: YAML and URDF writers (atomic).
"""
from .base_parameters import BaseParameters, compute_base_parameters, identifiability_explanation
from .batch import IdentificationResult, identify, predict_torques
from .least_squares import InsufficientExcitation, consistent_fit, weighted_least_squares
from .payload import PayloadChangeDetector, payload_from_joint_torques, payload_from_wrench

__all__ = ["BaseParameters", "compute_base_parameters", "identifiability_explanation", "IdentificationResult",
           "identify", "predict_torques", "InsufficientExcitation", "consistent_fit", "weighted_least_squares",
           "PayloadChangeDetector", "payload_from_joint_torques", "payload_from_wrench"]
