"""The controller process: :class:`Manager` and its :class:`ManagerConfig` (see manager.py)."""

from llmkube.manager.config import DEFAULT_LEASE_NAME, ManagerConfig
from llmkube.manager.logs import configure_logging
from llmkube.manager.manager import CacheSyncTimeout, Manager, Setup

__all__ = ["DEFAULT_LEASE_NAME", "CacheSyncTimeout", "Manager", "ManagerConfig", "Setup", "configure_logging"]
