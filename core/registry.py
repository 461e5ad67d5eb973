"""A registry of implementations keyed by kind and the YAML ``type:`` field; imports lazily.

Core names no implementation. Plugins register themselves: every layer that ships plugins
has a light ``plugins`` module whose ``PLUGINS`` maps kind -> type -> :class:`Entry`
(``tether.robots.plugins`` discovers robot folders instead of listing them), and another
distribution adds its own with an entry point in the ``tether.plugins`` group naming such a
module::

    [project.entry-points."tether.plugins"]
    my_robots = "my_package.plugins"

Entries are "module:attribute" strings, so listing or validating a config never imports a
simulator or torch: only building does.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from tether.core.errors import ConfigError

KINDS = (
    # a robot folder: its description (tether.core.robot)
    "robot",
    # a simulator engine: ``sim.type`` (config class; target builds the engine's backend for
    # the experiment robot's kind)
    "sim",
    # an engine's backend for one robot kind, named "<engine>/<kind>" (e.g. "mujoco/arm")
    "backend",
    # a training simulator that is not a SimBackend (a batched numpy env, a gymnasium view),
    # looked up by trainers by name; option ``protocol`` says what it returns
    "env",
    "task",
    "policy",
    # the experiment's optional ``train:`` section; a trainer target is a class with
    # ``train(cfg, out, resume) -> dict``, ``evaluate(checkpoint, options) -> dict`` and
    # ``export(checkpoint, fmt, out) -> Path`` (see tether.cli.train)
    "trainer",
    # ``hardware.type``: a builder ``(hw, spec, node) -> Robot``; option ``mock_node`` names
    # the mock driver node (tether_ros.mock_nodes) that ``hardware.mock`` starts
    "hardware",
    # ROS 2 I/O of one robot kind (arm, mobile_base, quadcopter): topics, messages and the
    # conversions every node uses (registered by tether_ros)
    "ros_io",
)

# the layers of this distribution that ship plugins (each has a light ``plugins`` module)
BUILTIN_PLUGIN_MODULES = (
    "tether.robots.plugins",
    "tether.sim.plugins",
    "tether.policies.plugins",
    "tether.hardware.plugins",
    "tether_ros.plugins",
)
ENTRY_POINT_GROUP = "tether.plugins"


@dataclass(frozen=True)
class Entry:
    """``config``: pydantic class validating the YAML section (a light import), or None;
    ``target``: the class or factory that builds the thing from that config;
    ``options``: plain facts about the plugin that callers read without importing it."""

    config: str | None
    target: str
    options: Mapping[str, str] = field(default_factory=dict)


# a policy option: how the policy must be served over ROS 2. PER_OBSERVATION: it answers
# each observation with that step's action computed from it (a per-step residual), so a
# chunk executor, which runs rows planned earlier, cannot serve it
SERVING = "serving"
PER_OBSERVATION = "per_observation"

_REGISTRY: dict[str, dict[str, Entry]] = {}
# plugin modules already merged into _REGISTRY
_LOADED: set[str] = set()


def _plugin_modules() -> list[str]:
    mods = list(BUILTIN_PLUGIN_MODULES)
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    mods += [ep.value.partition(":")[0] for ep in eps]
    return mods


def _discover() -> dict[str, dict[str, Entry]]:
    """Merge every plugin module's ``PLUGINS`` (once each). A built-in layer that is not
    installed (tether_ros outside a ROS environment) is skipped; a plugin module named by an
    entry point that fails to import is an error naming it."""
    for mod in _plugin_modules():
        if mod in _LOADED:
            continue
        _LOADED.add(mod)
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if mod in BUILTIN_PLUGIN_MODULES and exc.name and mod.startswith(exc.name):
                continue
            raise
        plugins = getattr(module, "PLUGINS", None)
        if plugins is None:
            raise ConfigError(f"plugin module '{mod}' has no PLUGINS table")
        for kind, entries in plugins.items():
            if kind not in KINDS:
                raise ConfigError(
                    f"plugin module '{mod}' registers unknown kind '{kind}' "
                    f"(kinds: {', '.join(KINDS)})"
                )
            for name, e in entries.items():
                # an explicit register() (tests, notebooks) wins over discovery
                _REGISTRY.setdefault(kind, {}).setdefault(name, e)
    return _REGISTRY


def register(kind: str, type_: str, target: str, config: str | None = None, **options: str) -> None:
    """Add (or replace) an implementation; ``target``/``config`` are "module:attr" strings."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind '{kind}' (kinds: {', '.join(KINDS)})")
    _discover()
    _REGISTRY.setdefault(kind, {})[type_] = Entry(config, target, dict(options))


def unregister(kind: str, type_: str) -> None:
    """Remove an implementation (tests that registered a fake)."""
    _discover().get(kind, {}).pop(type_, None)


def available(kind: str) -> list[str]:
    """Registered type names of one kind, sorted."""
    return sorted(_discover().get(kind, {}))


def entry(kind: str, type_: str) -> Entry:
    try:
        return _discover()[kind][type_]
    except KeyError:
        known = ", ".join(available(kind)) or "none"
        raise ConfigError(f"unknown {kind} type '{type_}' (available: {known})") from None


def served_per_observation(policy_type: str) -> bool:
    """Whether the policy type must answer every observation (option SERVING)."""
    return entry("policy", policy_type).options.get(SERVING) == PER_OBSERVATION


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def config_class(kind: str, type_: str) -> Any:
    """The pydantic config class for ``kind``/``type_``, or None when it takes no config."""
    e = entry(kind, type_)
    return _resolve(e.config) if e.config else None


def load(kind: str, type_: str) -> Any:
    """Import and return the implementation (class or factory)."""
    return _resolve(entry(kind, type_).target)


def build(kind: str, cfg: Any, *args: Any, **kwargs: Any) -> Any:
    """Build the implementation named by ``cfg.type`` with ``cfg`` and extra arguments."""
    return load(kind, cfg.type)(cfg, *args, **kwargs)
