"""Every public name of the package stays what it is after any sequence of calls: a fresh interpreter,
started outside the checkout with only ``PYTHONPATH`` pointing at it, calls each public function twice
(the second call of ``rnea_derivatives`` and ``aba_derivatives`` once failed because importing their
submodules rebound the package attributes to the modules)."""
import json
import os
import subprocess
import sys
import textwrap

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import robodyn_ros as rd
    from robodyn_ros.model.backend import NUMPY

    before = {name: getattr(rd, name) for name in rd.__all__}
    model = rd.Model.from_urdf("panda", locked_joints={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})
    rng = np.random.default_rng(0)
    q, v, a, j, s = (rng.normal(size=model.nv) * 0.3 for _ in range(5))
    f_ext = rng.normal(size=(model.nbodies, 6))
    calls = {
        "Model.from_urdf": lambda: rd.Model.from_urdf("panda"),
        "rnea": lambda: rd.rnea(model, q, v, a, f_ext),
        "crba": lambda: rd.crba(model, q),
        "aba": lambda: rd.aba(model, q, v, a, f_ext),
        "nonlinear_effects": lambda: rd.nonlinear_effects(model, q, v),
        "coriolis_matrix": lambda: rd.coriolis_matrix(model, q, v),
        "coriolis_matrix_garofalo": lambda: rd.coriolis_matrix_garofalo(model, q, v),
        "gravity_torque": lambda: rd.gravity_torque(model, q),
        "friction_torque": lambda: rd.friction_torque(model, v),
        "rnea_derivatives": lambda: rd.rnea_derivatives(model, q, v, a),
        "aba_derivatives": lambda: rd.aba_derivatives(model, q, v, a),
        "regressor": lambda: rd.regressor(model, q, v, a),
        "slotine_li_regressor": lambda: rd.slotine_li_regressor(model, q, v, v, a),
        "body_wrench_regressor": lambda: rd.body_wrench_regressor(NUMPY, f_ext[0], f_ext[1]),
        "rnea_time_derivatives": lambda: rd.rnea_time_derivatives(model, q, v, a, j),
        "rnea_time_derivatives snap": lambda: rd.rnea_time_derivatives(model, q, v, a, j, s),
        "forward_kinematics": lambda: rd.forward_kinematics(model, q),
        "frame_placement": lambda: rd.frame_placement(model, q, "panda_link8"),
        "frame_jacobian": lambda: rd.frame_jacobian(model, q, "panda_link8"),
        "body_jacobians": lambda: rd.body_jacobians(model, q),
        "inertial_parameters": lambda: model.with_inertial_parameters(model.inertial_parameters()),
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
    print(json.dumps({"results": results, "changed": changed,
                      "not_callable": [n for n in rd.__all__ if n not in ("ModelError",) and
                                       not callable(getattr(rd, n))],
                      "file": rd.__file__}))
''')

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
    assert len(out["results"]) >= 27
