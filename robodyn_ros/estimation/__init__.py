"""Online estimation: recursive least squares and the online estimator."""
from ..identification.payload import is_physical_payload
from .online_estimator import OnlineEstimate, OnlineEstimator

__all__ = ["OnlineEstimate", "OnlineEstimator", "is_physical_payload"]
