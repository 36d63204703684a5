"""hub_client: the Python client of hub (see clients/python/README.md)."""
from .client import HubClient, HubError
from .session import PresenceSession, LOST_REASONS

__all__ = ["HubClient", "HubError", "PresenceSession", "LOST_REASONS"]
