"""A node's parameters from ONE schema: declaration with descriptors, validation, the typed
config, live updates, and a ROS-free reader of ``--params-file`` YAML.

A schema is a tuple of :class:`ParameterSpec`. The same specs drive

* :func:`declare_parameters`: ``declare_parameter`` with a ``ParameterDescriptor`` (description, range,
  ``read_only`` for structural parameters such as the URDF or joint names);
* :func:`validate`: pure, side-effect free; used by the ``add_on_set_parameters_callback`` that
  :func:`install_live_update` registers, and by the in-process bringup that never sees rclpy;
* :func:`read_config`: the ``{name: value}`` dict a node builds its objects from;
* :func:`install_live_update`: validate in the on-set callback, apply in the post-set callback
  (no side effects in the first, where another callback may still refuse the change; effects only after
  rclpy has committed it).

Types are Python types: ``bool, int, float, str`` and ``list[bool], list[int], list[float], list[str]``.
Like rclpy, an integer is NOT accepted for a float parameter (a YAML ``gain: 1`` for a float fails at
declaration in rclpy with "of type 'INTEGER', expecting type 'DOUBLE'"; write ``1.0``): :func:`validate`
reports the same mistake with that advice, so the in-process bringup fails the way ``ros2 run`` would.
"""
import math
import re

import yaml

from ..model.parameter_schema import (ARRAY_TYPES, SCALAR_TYPES, ParameterSpec, check_value, copy_value, defaults,
                                      format_bound, resolve_config, validate)

__all__ = ["ParameterSpec", "check_value", "validate", "defaults", "resolve_config", "closest_name",
           "unknown_parameters", "parameter_table", "descriptor_for", "declare_parameters", "read_config",
           "install_live_update", "load_params_yaml", "params_yaml_entries"]


def closest_name(name, names):
    """The name of ``names`` closest to ``name`` (difflib's ratio at least 0.6), or None."""
    import difflib

    match = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_parameters(names, known):
    """One phrase naming the parameters of ``names`` that are not in ``known``, each with the closest known
    name (``'refrence' (did you mean 'reference'?)``), or None when every name is known."""
    unknown = [name for name in names if name not in known]
    if not unknown:
        return None
    phrases = []
    for name in unknown:
        guess = closest_name(name, known)
        phrases.append(f"'{name}'" + (f" (did you mean '{guess}'?)" if guess else ""))
    return f"unknown parameter{'s' if len(unknown) > 1 else ''} " + ", ".join(phrases)


def parameter_table(specs, extra=()):
    """Plain-text table of a schema for ``--help``: per parameter one line with its name, type, default and
    allowed values (range or choices; read-only: fixed once the node exists; live: applied while running),
    then its description, indented. ``extra``: further specs listed after the schema's (e.g. ``autostart``)."""
    import textwrap

    lines = []
    for spec in tuple(specs) + tuple(extra):
        allowed = []
        if spec.range is not None:
            lo, hi = spec.range
            each = "each " if spec.type in ARRAY_TYPES else ""
            allowed.append(f"{each}in [{format_bound(lo, '-inf')}, {format_bound(hi, 'inf')}]")
        if spec.choices is not None:
            allowed.append("one of " + ", ".join(map(str, spec.choices)))
        if spec.read_only:
            allowed.append("read-only")
        if spec.live:
            allowed.append("live")
        default = _format_default(spec.default)
        lines.append(f"  {spec.name}  ({_type_name(spec)}, default {default}"
                     + (f"; {'; '.join(allowed)}" if allowed else "") + ")")
        lines += textwrap.wrap(" ".join(spec.description.split()), width=100, initial_indent="      ",
                               subsequent_indent="      ")
    return "\n".join(lines)


def _format_default(value):
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_default(v) for v in value) + "]"
    return repr(value)


# ------------------------------------------------------------------------------------------------ rclpy
def descriptor_for(spec):
    """``rcl_interfaces/ParameterDescriptor`` of a spec (ranges only for scalar int/float, as ROS has)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    description = spec.description
    if spec.choices is not None:
        description += f" One of {list(spec.choices)}."
    descriptor = ParameterDescriptor(description=description, read_only=spec.read_only)
    if spec.range is not None and spec.type is float:
        lo, hi = spec.range
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=-math.inf if lo is None else float(lo), to_value=math.inf if hi is None else float(hi))]
    elif spec.range is not None and spec.type is int:
        lo, hi = spec.range
        descriptor.integer_range = [IntegerRange(from_value=-(2**63) if lo is None else lo,
                                                 to_value=2**63 - 1 if hi is None else hi)]
    elif spec.range is not None:
        descriptor.additional_constraints = f"each element in [{format_bound(spec.range[0], '-inf')}, " \
                                            f"{format_bound(spec.range[1], 'inf')}]"
    return descriptor


def _parameter_type(spec):
    from rclpy.parameter import Parameter

    return {bool: Parameter.Type.BOOL, int: Parameter.Type.INTEGER, float: Parameter.Type.DOUBLE,
            str: Parameter.Type.STRING, list[bool]: Parameter.Type.BOOL_ARRAY,
            list[int]: Parameter.Type.INTEGER_ARRAY, list[float]: Parameter.Type.DOUBLE_ARRAY,
            list[str]: Parameter.Type.STRING_ARRAY}[spec.type]


def declare_parameters(node, specs):
    """Declare every spec on ``node`` with its descriptor; overrides from ``--ros-args`` apply.

    An empty-list default is declared by type (rclpy types ``[]`` as a byte array), then, without an
    override, set to an empty list of that type before it becomes read-only: an uninitialised parameter
    made rclpy's get_parameters service answer nothing at all for a request naming it, so ``ros2 param
    dump`` printed no parameter of the node. Values that rclpy accepts but the schema does not (choices,
    list ranges, NaN) raise ValueError naming them, as does a type mismatch (rclpy's exception, reworded
    with the fix).
    """
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
    from rclpy.parameter import Parameter

    for spec in specs:
        descriptor = descriptor_for(spec)
        try:
            if spec.type in ARRAY_TYPES and len(spec.default) == 0:
                writable = descriptor_for(spec)
                writable.read_only = False
                declared = node.declare_parameter(spec.name, _parameter_type(spec), writable)
                if declared.type_ == Parameter.Type.NOT_SET:
                    node.set_parameters([Parameter(spec.name, _parameter_type(spec), [])])
                if descriptor.read_only:
                    descriptor.type = _parameter_type(spec).value
                    node.set_descriptor(spec.name, descriptor)
            else:
                node.declare_parameter(spec.name, copy_value(spec.default), descriptor)
        except InvalidParameterTypeException as exc:
            raise ValueError(f"parameter {spec.name} of node {node.get_name()}: {exc} (expected "
                             f"{_type_name(spec)}; a float needs a decimal point in YAML)") from None
        except InvalidParameterValueException as exc:   # outside the descriptor's range
            raise ValueError(f"parameter {spec.name} of node {node.get_name()}: "
                             f"{' '.join(str(exc).split())}") from None
    errors = validate(specs, read_config(node, specs))
    if errors:
        raise ValueError(f"invalid parameters of node {node.get_name()}: " + "; ".join(errors))


def _type_name(spec):
    return spec.type.__name__ if spec.type in SCALAR_TYPES else f"list[{spec.element_type.__name__}]"


def read_config(node, specs):
    """``{name: value}`` of the declared schema parameters (lists as Python lists)."""
    config = {}
    for spec in specs:
        value = node.get_parameter(spec.name).value
        config[spec.name] = list(value) if spec.type in ARRAY_TYPES else value
    return config


def install_live_update(node, specs, apply_callback):
    """Validate every change against the schema in an on-set callback (pure) and, once rclpy committed
    it, call ``apply_callback({name: value})`` from a post-set callback with the LIVE parameters that
    changed (non-live changes are stored and read on the next configure).

    Call it after :func:`declare_parameters` (rclpy runs both callbacks on declaration too). Returns the
    two callbacks, so a lifecycle node can remove them on cleanup (``remove_on_set_parameters_callback``,
    ``remove_post_set_parameters_callback``).
    """
    from rcl_interfaces.msg import SetParametersResult

    live = {spec.name for spec in specs if spec.live}

    def on_set(parameters):
        errors = validate(specs, {p.name: _plain(p.value) for p in parameters})
        return SetParametersResult(successful=not errors, reason="; ".join(errors))

    def post_set(parameters):
        changed = {p.name: _plain(p.value) for p in parameters if p.name in live}
        if changed:
            apply_callback(changed)

    node.add_on_set_parameters_callback(on_set)
    node.add_post_set_parameters_callback(post_set)
    return on_set, post_set


def _plain(value):
    """rclpy hands arrays back as ``array.array`` or lists; the schema speaks lists."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else list(value)


# ------------------------------------------------------------------------------------------ params YAML
class _ParamsFileLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` typing plain scalars as rcl_yaml_param_parser does, not as YAML 1.1 does: keys
    stay as written (a parameter ``y`` is not ``True``), a plain value is a bool (``true``, ``yes``, ``y``,
    ``on`` and their negations, in rcl's spellings), else an integer, else what strtod reads (``1e-3``,
    ``.inf``), else a string; a quoted value is a string."""

    yaml_implicit_resolvers = {}   # no YAML 1.1 resolution: every plain scalar goes to _rcl_scalar

    def construct_mapping(self, node, deep=False):
        mapping = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(None, None, "a key must be a name", key_node.start_mark)
            mapping[key_node.value] = self.construct_object(value_node, deep=deep)
        return mapping


_PLAIN = "!rcl-plain-scalar"
_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_INT = re.compile(r"[+-]?\d+")
_SPECIAL_FLOATS = {".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan, ".inf": math.inf, ".Inf": math.inf,
                   ".INF": math.inf, "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf}


def _rcl_scalar(loader, node):
    text = node.value
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.fullmatch(text):
        return int(text)
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if "_" in text:  # Python's float() reads "1_0"; strtod does not
        return text
    try:
        return float(text)
    except ValueError:
        return text


_ParamsFileLoader.add_implicit_resolver(_PLAIN, re.compile(r".*", re.DOTALL), None)
_ParamsFileLoader.add_constructor(_PLAIN, _rcl_scalar)


def load_params_yaml(path, node_name):
    """The ``{name: value}`` overrides that ``--ros-args --params-file path`` gives node ``node_name``.

    Follows rcl_yaml_param_parser and rclpy: node keys may be nested namespaces (``/ns: node:
    ros__parameters:``); a key is matched against the node's fully qualified name with ``/*`` standing
    for one name token and ``/**`` for any number of them; matching entries apply in file order, later
    ones overriding earlier ones; nested parameter dicts flatten to dotted names. Plain scalars are typed
    as rcl types them (:class:`_ParamsFileLoader`); a list mixing types other than int/float is an error.
    """
    result = {}
    for _, params in params_yaml_entries(path, node_name):
        result.update(params)
    return result


_WORD = r"(/\w+)"   # one name token of a fully qualified node name


def params_yaml_entries(path, node_name):
    """The entries of parameter file ``path`` that apply to node ``node_name``, in file order, as ``(key,
    {name: value})`` pairs: ``key`` the node key as written (a key with ``*`` is a wildcard entry, shared with
    other nodes). :func:`load_params_yaml` merges them; the same errors."""
    with open(path, encoding="utf-8") as stream:
        root = yaml.load(stream, Loader=_ParamsFileLoader)   # a SafeLoader: builds plain data only
    if root is None:
        return []
    if not isinstance(root, dict):
        raise ValueError(f"{path}: a ROS parameter file is a mapping of node names")
    fqn = node_name if node_name.startswith("/") else "/" + node_name
    entries = []
    for key, params in _node_entries(root, "", path):
        pattern = key if key.startswith("/") else "/" + key
        regex = pattern.replace("/**", _WORD + "*").replace("/*", _WORD)
        if re.fullmatch(regex, fqn):
            entries.append((key, params))
    return entries



def _node_entries(mapping, prefix, path):
    """(node key, {param: value}) pairs in file order: a key is a namespace or node name (its value a mapping
    of further keys) or ``ros__parameters`` (its value the parameters of the node named by the keys above)."""
    for key, value in mapping.items():
        if key == "ros__parameters":
            if not isinstance(value, dict):
                raise ValueError(f"{path}: ros__parameters of {prefix or '/'} is not a mapping")
            yield prefix, dict(_flatten_parameters(value, "", path))
        elif isinstance(value, dict):
            yield from _node_entries(value, f"{prefix}/{key.strip('/')}" if prefix else key, path)
        else:
            raise ValueError(f"{path}: {prefix}/{key} is neither a namespace nor ros__parameters")


def _flatten_parameters(mapping, prefix, path):
    """``(dotted name, value)`` of a ``ros__parameters`` mapping: nested mappings give dotted names."""
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten_parameters(value, name, path)
        elif isinstance(value, list):
            yield name, _checked_list(value, name, path)
        else:
            yield name, value


def _checked_list(items, name, path):
    """``items`` if rcl accepts it as an array parameter: scalars of one type."""
    if any(isinstance(item, (dict, list)) for item in items):
        raise ValueError(f"{path}: {name} is a list of non-scalars")
    kinds = {type(item) for item in items}
    if kinds == {int, float}:
        raise ValueError(f"{path}: {name} mixes integers and floats (rcl rejects it: write every number "
                         "with a decimal point)")
    if len(kinds) > 1:
        raise ValueError(f"{path}: {name} mixes types {sorted(k.__name__ for k in kinds)}")
    return items
