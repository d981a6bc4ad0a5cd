"""Every public name of the package stays what it is after any sequence of calls: a fresh interpreter,
started outside the checkout with only ``PYTHONPATH`` pointing at it, calls each public function twice
(the second call of ``rnea_derivatives`` and ``aba_derivatives`` once failed because importing their
submodules rebound the package attributes to the modules). Every name of ``robodyn_ros.__all__`` is called
(or, for an exception or a result type, named in ``NOT_CALLED``), and the names the outside acceptance
checks use (the project's API reference) stay exported."""
import json
import os
import subprocess
import sys
import textwrap
from conftest import CHECKOUT


SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import robodyn_ros as rd

    before = {name: getattr(rd, name) for name in rd.__all__}
    model = rd.Model.from_urdf("panda", locked_joints={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})
    rng = np.random.default_rng(0)
    q, v, a, j, s = (rng.normal(size=model.nv) * 0.3 for _ in range(5))
    f_ext = rng.normal(size=(model.nbodies, 6))
    TETRA = (np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]),
             np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]))
    five_bar = lambda: rd.SphericalFiveBar([[0, 0, 1], [1, 0, 1], [0, 1, 1], [0.3, 0, 1], [-1, 1, 1]],
                                           [1.0, 0.8, 0.6, 0.9],
                                           [[0.1, 0, 0.2], [0, 0.1, 0.2], [0.1, 0.1, 0.1], [-0.1, 0, 0.2]],
                                           [0.01, 0.012, 0.008, 0.01])
    closed = (five_bar().solve_passive([0.2, -0.1]), rng.normal(size=5), rng.normal(size=5))
    calls = {
        "Model.from_urdf": lambda: rd.Model.from_urdf("panda"),
        "rnea": lambda: rd.rnea(model, q, v, a, f_ext),
        "crba": lambda: rd.crba(model, q),
        "aba": lambda: rd.aba(model, q, v, a, f_ext),
        "nonlinear_effects": lambda: rd.nonlinear_effects(model, q, v),
        "coriolis_matrix": lambda: rd.coriolis_matrix(model, q, v),
        "gravity_torque": lambda: rd.gravity_torque(model, q),
        "friction_torque": lambda: rd.friction_torque(model, v),
        "rnea_derivatives": lambda: rd.rnea_derivatives(model, q, v, a),
        "aba_derivatives": lambda: rd.aba_derivatives(model, q, v, a),
        "regressor": lambda: rd.regressor(model, q, v, a),
        "slotine_li_regressor": lambda: rd.slotine_li_regressor(model, q, v, v, a),
        "rnea_time_derivatives": lambda: rd.rnea_time_derivatives(model, q, v, a, j),
        "rnea_time_derivatives snap": lambda: rd.rnea_time_derivatives(model, q, v, a, j, s),
        "forward_kinematics": lambda: rd.forward_kinematics(model, q),
        "frame_placement": lambda: rd.frame_placement(model, q, "panda_link8"),
        "frame_jacobian": lambda: rd.frame_jacobian(model, q, "panda_link8"),
        "body_jacobians": lambda: rd.body_jacobians(model, q),
        "inertial_parameters": lambda: model.with_inertial_parameters(model.inertial_parameters()),
        "dM_dq": lambda: rd.dM_dq(model, q),
        "dC_dq": lambda: rd.dC_dq(model, q, v),
        "dC_dv": lambda: rd.dC_dv(model, q, v),
        "dg_dq": lambda: rd.dg_dq(model, q),
        "mass_matrix_time_derivative": lambda: rd.mass_matrix_time_derivative(model, q, v),
        "coriolis_matrix_time_derivative": lambda: rd.coriolis_matrix_time_derivative(model, q, v, a),
        "gravity_torque_time_derivative": lambda: rd.gravity_torque_time_derivative(model, q, v),
        "body_jacobian_derivatives": lambda: rd.body_jacobian_derivatives(model, q, v, a),
        "twist_derivatives": lambda: rd.twist_derivatives(model, q, v, a),
        "mesh_inertial_parameters": lambda: rd.mesh_inertial_parameters(*TETRA, 1000.0),
        "mesh_inertial_parameters_vertex_derivative":
            lambda: rd.mesh_inertial_parameters_vertex_derivative(*TETRA, 1000.0),
        "transformed_inertial_parameters_derivative":
            lambda: rd.transformed_inertial_parameters_derivative(model.inertias[0], np.eye(3), q[:3]),
        "SphericalFiveBar": lambda: five_bar().tree,
        "five_bar_actuator_torques": lambda: rd.five_bar_actuator_torques(five_bar(), *closed),
        "five_bar_actuator_torque_derivatives":
            lambda: rd.five_bar_actuator_torque_derivatives(five_bar(), *closed),
        "OnlineEstimator":
            lambda: rd.OnlineEstimator(model).update(0.0, q, v, rd.rnea(model, q, v, a)).payload_estimate,
    }
    def flat(r):
        if isinstance(r, rd.Model):
            return np.array([float(int(r.fingerprint()[:12], 16))])
        if isinstance(r, dict):
            return flat(list(r.values()))
        if isinstance(r, (tuple, list)):
            return np.concatenate([flat(x) for x in r]) if r else np.zeros(0)
        return np.ravel(np.asarray(r, dtype=float))

    results = {}
    for name, call in calls.items():
        first, second = call(), call()
        results[name] = bool(np.array_equal(flat(first), flat(second)))
    # the compiled kernels of a small model (a 2-link pendulum builds in seconds), then the same calls again
    pendulum = rd.Model.from_urdf(sys.argv[1])
    z = np.array([0.3, -0.2])
    kernels = rd.compile_kernels(pendulum)
    results["compile_kernels"] = rd.compile_kernels(pendulum) is not None and kernels.compiled
    for name in ("rnea", "aba", "rnea_derivatives", "aba_derivatives", "regressor"):
        fn = getattr(rd, name)
        results[name + " compiled"] = bool(np.array_equal(flat(fn(pendulum, z, z, z)), flat(fn(pendulum, z, z, z))))
    changed = [name for name in rd.__all__ if getattr(rd, name) is not before[name]]
    print(json.dumps({"results": results, "changed": changed, "all": list(rd.__all__),
                      "not_callable": [n for n in rd.__all__ if n not in ("ModelError",) and
                                       not callable(getattr(rd, n))],
                      "file": rd.__file__}))
''')

# the names of the API reference that outside checks import from the package
API_REFERENCE = ("Model", "ModelError", "rnea", "crba", "aba", "nonlinear_effects", "coriolis_matrix", "gravity_torque",
                 "friction_torque", "rnea_derivatives", "aba_derivatives", "regressor", "rnea_time_derivatives",
                 "compile_kernels", "OnlineEstimator")
# exported types that are raised or returned rather than called
NOT_CALLED = ("ModelError", "OnlineEstimate")

PENDULUM = """<robot name='pendulum'><link name='base'/>
<link name='l1'><inertial><origin xyz='0 0 -0.5'/><mass value='1'/><inertia ixx='0.02' ixy='0' ixz='0' iyy='0.02'
 iyz='0' izz='0.001'/></inertial></link>
<link name='l2'><inertial><origin xyz='0 0 -0.4'/><mass value='0.8'/><inertia ixx='0.01' ixy='0' ixz='0' iyy='0.01'
 iyz='0' izz='0.001'/></inertial></link>
<joint name='j1' type='revolute'><parent link='base'/><child link='l1'/><axis xyz='0 1 0'/>
 <limit lower='-3' upper='3' effort='50' velocity='5'/></joint>
<joint name='j2' type='revolute'><parent link='l1'/><child link='l2'/><origin xyz='0 0 -1'/><axis xyz='0 1 0'/>
 <limit lower='-3' upper='3' effort='50' velocity='5'/></joint></robot>"""


def test_public_names_survive_two_calls_in_a_fresh_interpreter_outside_the_checkout(tmp_path):
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM)
    env = dict(os.environ, PYTHONPATH=CHECKOUT)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(urdf)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(CHECKOUT), out["file"]       # the checkout, not an installed copy
    assert out["changed"] == [] and out["not_callable"] == [], out
    failed = [name for name, ok in out["results"].items() if not ok]
    assert not failed, f"second call differs or failed: {failed}"
    assert len(out["results"]) >= 40
    called = {name.split(" ")[0].split(".")[0] for name in out["results"]}
    assert not [n for n in out["all"] if n not in called and n not in NOT_CALLED], "public names never called"
    assert not [n for n in API_REFERENCE if n not in out["all"]], "names of the API reference not exported"
    assert "coriolis_matrix_garofalo" not in out["all"] and "body_wrench_regressor" not in out["all"]
