"""Online estimation: recursive least squares and the online estimator."""
from .online_estimator import OnlineEstimate, OnlineEstimator, is_physical_payload

__all__ = ["OnlineEstimate", "OnlineEstimator", "is_physical_payload"]
