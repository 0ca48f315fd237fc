"""Configuration, built once and passed explicitly: the default numbers
(defaults.py), process settings and the environment (settings.py), each
workspace's stored settings (workspace.py), and the one logging set-up
(logs.py)."""

from .defaults import *  # noqa: F403 (the numbers are the package's interface)
from .settings import EnvSettings, Settings, default_socket_path, default_store_path, env_settings
from .workspace import WorkspaceConfig, check_fusion, normalise_fusion

__all__ = [
    "EnvSettings",
    "Settings",
    "WorkspaceConfig",
    "check_fusion",
    "default_socket_path",
    "default_store_path",
    "env_settings",
    "normalise_fusion",
]
