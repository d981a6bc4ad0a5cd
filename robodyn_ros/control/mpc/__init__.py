"""Nonlinear model-predictive control with CasADi, torque inputs (Cărmizaru 2022, ch. 5, Alg. 4 and eqs.
5.1-5.5, done for real time), in layers:

- :mod:`.config`: the options (:class:`MPCConfig`) and the parameter vector ``θ = [π, f_v, f_c, f_o]``;
- :mod:`.stage`: the dynamics of one interval (RK4 of ABA with friction), its Jacobians and adjoint;
- :mod:`.ocp`: the multiple-shooting transcription, costs and constraints; :mod:`.compile_cache`: its
  functions compiled to C and cached;
- :mod:`.gauss_newton`: the shooting map with the derivatives of a Gauss-Newton method;
- :mod:`.riccati`: the Riccati recursion of the Gauss-Newton QP (gains and rollout);
- :mod:`.rti`: the real-time iteration's two phases and the SQP step; :mod:`.nlp`: fatrop and ipopt;
- :mod:`.controller`: warm start, time limit and fallbacks; :mod:`.solution`: the result and the torque
  law between solves; :mod:`.background`: the controller built in a thread.
"""
from .background import BackgroundController
from .compile_cache import ocp_functions
from .config import MPCConfig, parameter_vector, problem_key
from .controller import ModelPredictiveController
from .ocp import OCPFunctions
from .solution import MPCSolution

__all__ = ["BackgroundController", "MPCConfig", "MPCSolution", "ModelPredictiveController", "OCPFunctions",
           "ocp_functions", "parameter_vector", "problem_key"]
