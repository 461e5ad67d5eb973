"""Simulators: backends (MuJoCo, ...), robot models and tasks. Backends import their engine
lazily, so importing this package (e.g. for a task's config) never loads a simulator."""
