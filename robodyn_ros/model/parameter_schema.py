"""A parameter schema: one :class:`ParameterSpec` per parameter (name, type, default, description, range,
choices), and the pure functions on a schema that need no ROS: validation of values, defaults, and the
config a set of overrides resolves to. The nodes declare from such schemas
(:mod:`robodyn_ros.ros.parameters`), the library validates its own configurations against the same specs
(e.g. :mod:`robodyn_ros.estimation.estimator_parameters`), so a parameter has one type, default and range
wherever it is given.

Types are Python types: ``bool, int, float, str`` and ``list[bool], list[int], list[float], list[str]``.
Like rclpy, an integer is NOT accepted for a float parameter by :func:`check_value` (a YAML ``gain: 1`` for a
float fails at declaration in rclpy with "of type 'INTEGER', expecting type 'DOUBLE'"; write ``1.0``).
"""
import math
from dataclasses import dataclass

SCALAR_TYPES = (bool, int, float, str)
ARRAY_TYPES = (list[bool], list[int], list[float], list[str])


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: ``name`` (dotted for groups, e.g. ``"mpc.horizon"``), ``type`` (see module doc),
    ``default``, ``description``, ``read_only`` (structural: fixed after declaration), ``range``
    (``(lo, hi)`` inclusive, None for an open end; element-wise for lists), ``choices`` (allowed
    values), ``live`` (applied while running by :func:`install_live_update`'s callback; a non-live
    parameter that is not read-only can be changed but takes effect on the next configure)."""

    name: str
    type: object
    default: object
    description: str
    read_only: bool = False
    range: tuple | None = None
    choices: tuple | None = None
    live: bool = False
    allow_inf: bool = False

    def __post_init__(self):
        if self.type not in SCALAR_TYPES + ARRAY_TYPES:
            raise ValueError(f"parameter {self.name}: type {self.type} is not one of bool, int, float, str or "
                             "a list of them")
        if self.range is not None and self.element_type not in (int, float):
            raise ValueError(f"parameter {self.name}: a range needs an int or float type")
        if self.read_only and self.live:
            raise ValueError(f"parameter {self.name}: read_only and live contradict each other")
        errors = check_value(self, self.default)
        if errors:
            raise ValueError(f"default of {errors[0]}")

    @property
    def element_type(self):
        """``int`` for ``int`` and ``list[int]``, and so on."""
        return self.type.__args__[0] if self.type in ARRAY_TYPES else self.type


def check_value(spec, value):
    """Errors (list of str, empty if fine) of ``value`` for ``spec``: type, range, choices."""
    element = spec.element_type
    if spec.type in ARRAY_TYPES:
        if not isinstance(value, (list, tuple)):
            return [f"{spec.name}: expected a list of {element.__name__}, got {value!r}"]
        items = list(value)
    else:
        items = [value]
    for item in items:
        if not is_of_type(item, element):
            hint = " (write it with a decimal point, e.g. 1.0)" if element is float and is_of_type(item, int) else ""
            return [f"{spec.name}: expected {element.__name__}, got {type(item).__name__} {item!r}{hint}"]
        if element is float and math.isnan(item):
            return [f"{spec.name}: NaN is not a valid value"]
        if element is float and math.isinf(item) and not spec.allow_inf:
            return [f"{spec.name}: {item!r} is not a valid value (it must be finite)"]
    if spec.range is not None:
        lo, hi = spec.range
        for item in items:
            if (lo is not None and item < lo) or (hi is not None and item > hi):
                return [f"{spec.name}: {item!r} is outside [{format_bound(lo, '-inf')}, {format_bound(hi, 'inf')}]"]
    if spec.choices is not None:
        for item in items:
            if item not in spec.choices:
                return [f"{spec.name}: {item!r} is not one of {list(spec.choices)}"]
    return []


def is_of_type(x, element):
    if element is bool:
        return isinstance(x, bool)
    if element is int:
        return isinstance(x, int) and not isinstance(x, bool)
    if element is float:
        return isinstance(x, float)
    return isinstance(x, str)


def format_bound(x, default):
    return default if x is None else repr(x)


def validate(specs, values):
    """Errors (list of str) of a ``{name: value}`` change set against the schema.

    Pure: no side effects, no rclpy. Names not in the schema are ignored (another part of the node, or
    rclpy's own ``use_sim_time``, may own them). Read-only is not checked here: rclpy refuses a change
    to a read-only parameter before any on-set callback runs.
    """
    by_name = {spec.name: spec for spec in specs}
    errors = []
    for name, value in values.items():
        spec = by_name.get(name)
        if spec is not None:
            errors += check_value(spec, value)
    return errors


def defaults(specs):
    """``{name: default}`` of the schema."""
    return {spec.name: copy_value(spec.default) for spec in specs}


def resolve_config(specs, overrides):
    """The config a node would read given ``overrides`` (e.g. :func:`load_params_yaml`'s result), without
    ROS: defaults updated by the overrides the schema knows, validated; ValueError listing every error."""
    values = defaults(specs)
    known = {spec.name for spec in specs}
    values.update({name: copy_value(value) for name, value in overrides.items() if name in known})
    errors = validate(specs, values)
    if errors:
        raise ValueError("invalid parameters: " + "; ".join(errors))
    return values


def copy_value(value):
    return list(value) if isinstance(value, (list, tuple)) else value
