"""Joint friction, kept apart from the rigid-body terms (API convention):
``tau_f = viscous * v + coulomb * sign(v) + offset`` per degree of freedom."""
from __future__ import annotations

import numpy as np


def friction_torque(model, v, viscous=None, coulomb=None, offset=None):
    """Friction torque (nv,) at joint velocity ``v`` (nv,); parameters default to the model's (the URDF
    ``<dynamics damping friction>``), each (nv,) when given."""
    v = model.check_vector("v", v, model.nv)
    fv = model.viscous if viscous is None else model.check_vector("viscous", viscous, model.nv)
    fc = model.coulomb if coulomb is None else model.check_vector("coulomb", coulomb, model.nv)
    fo = model.friction_offset if offset is None else model.check_vector("offset", offset, model.nv)
    return fv * v + fc * np.sign(v) + fo
