"""The payload topic never carries a non-physical payload: :func:`physical_payload` maps any estimate to
the nearest physical one (property-based), and on wrist-wrench estimates with nothing attached (the
Panda moving, with sensor noise) it gives "no payload" or a physical one, never a negative mass or
inertia."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robodyn_ros.identification.payload import is_physical_payload, physical_payload
from robodyn_ros.identification.physical_consistency import pseudo_inertia
from robodyn_ros.model.spatial import numpy_inertia_params, numpy_inertia_split

SETTINGS = dict(deadline=None, derandomize=True, database=None, max_examples=200)


def principal_moments(pi):
    _, _, Ic = numpy_inertia_split(pi)
    return np.linalg.eigvalsh(Ic)


@settings(**SETTINGS)
@given(pi=st.lists(st.floats(-10.0, 10.0), min_size=10, max_size=10), min_mass=st.sampled_from([0.0, 0.05]))
def test_any_estimate_becomes_a_physical_payload(pi, min_mass):
    pi = np.array(pi)
    out = physical_payload(pi, min_mass=min_mass)
    assert is_physical_payload(out, tol=1e-9), out
    assert out[0] >= 0.0
    if out[0] > 0:
        e = principal_moments(out)
        scale = max(1.0, np.abs(e).max())
        assert e[0] >= -1e-9 * scale and e[0] + e[1] >= e[2] - 1e-9 * scale, e
    else:
        assert not out.any()
    assert np.allclose(physical_payload(out, min_mass=min_mass), out, atol=1e-9)      # a projection
    if pi[0] > min_mass and is_physical_payload(pi, tol=0.0):
        assert np.array_equal(out, pi)                                                # physical: unchanged


def test_negative_or_vanishing_mass_is_no_payload():
    box = numpy_inertia_params(2.0, np.array([0.0, 0.0, 0.05]), np.diag([0.003, 0.003, 0.002]))
    assert is_physical_payload(box) and np.array_equal(physical_payload(box), box)
    noise = np.array([-0.004, 1e-4, -2e-4, 3e-5, -1e-5, 2e-6, -3e-6, 1e-6, 0.0, -2e-5])
    assert not is_physical_payload(noise)
    assert np.array_equal(physical_payload(noise), np.zeros(10))
    assert np.array_equal(physical_payload(box * 0.01, min_mass=0.05), np.zeros(10))   # 20 g: below the bound


def test_non_physical_inertia_is_projected_to_the_nearest_pseudo_inertia():
    """2 kg with one negative principal moment: the projection keeps a positive mass, makes the principal
    moments satisfy the triangle inequalities, and moves the pseudo-inertia by the norm of its negative
    eigenvalues (the Frobenius distance of eigenvalue clipping)."""
    bad = numpy_inertia_params(2.0, np.array([0.01, 0.0, 0.05]), np.diag([0.004, 0.003, -0.002]))
    assert not is_physical_payload(bad)
    out = physical_payload(bad)
    assert is_physical_payload(out, tol=1e-12) and out[0] > 1.9
    lam = np.linalg.eigvalsh(pseudo_inertia(bad))
    assert np.linalg.norm(pseudo_inertia(out) - pseudo_inertia(bad)) == pytest.approx(np.linalg.norm(lam[lam < 0]), rel=1e-9)


@pytest.mark.parametrize("pi", [np.full(10, np.nan), np.zeros(9), [np.inf] + [0.0] * 9])
def test_non_finite_estimate_is_refused(pi):
    assert not is_physical_payload(pi)
    with pytest.raises(ValueError, match="10 finite numbers"):
        physical_payload(pi)


def test_estimates_with_nothing_attached_are_published_as_no_payload():
    """The wrist-wrench least squares on the Panda moving along a smooth trajectory, with the demo's sensor
    noise (0.1 N, 0.01 N m) and nothing attached: the raw estimates include negative masses and
    non-physical inertias (what the payload topic carried); after :func:`physical_payload` every one is a
    physical payload, and each light one is "no payload"."""
    import robodyn_ros as rd
    from robodyn_ros.identification.payload import payload_from_wrench
    model = rd.Model.from_urdf("panda", locked_joints={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})
    t = np.linspace(0.0, 4.0, 800)[:, None]
    home = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    w = 2 * np.pi / 4.0 * np.arange(1, 8) / 3
    Q, V, A = home + 0.3 * np.sin(w * t), 0.3 * w * np.cos(w * t), -0.3 * w ** 2 * np.sin(w * t)
    raw = []
    for seed in range(12):
        rng = np.random.default_rng(seed)
        W = np.hstack([rng.normal(0, 0.1, (len(t), 3)), rng.normal(0, 0.01, (len(t), 3))])
        raw.append(payload_from_wrench(model, "panda_link8", Q, V, A, W, estimate_bias=False).pi)
    assert any(pi[0] < 0 for pi in raw) and any(not is_physical_payload(pi) for pi in raw)
    for pi in raw:
        out = physical_payload(pi)
        assert is_physical_payload(out, tol=1e-9)
        if out[0] > 0:
            assert (principal_moments(out) >= -1e-12).all()
        else:
            assert not out.any()
        assert not physical_payload(pi, min_mass=0.05).any()
