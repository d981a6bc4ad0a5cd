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
    return viscous_coulomb_torque(v, fv, fc, fo)


def viscous_coulomb_torque(v, viscous, coulomb, offset):
    """``f_v v + f_c sign(v) + f_o`` (nv,) for checked float arrays (nv,): the formula of
    :func:`friction_torque` without its argument checks, for 1 kHz loops whose ``v`` is already validated."""
    return viscous * v + coulomb * np.sign(v) + offset
