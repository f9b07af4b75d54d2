"""Thin kopf handlers: read the event, call the flow modules (`cluster`, `topics`), patch status.

Importing this package registers every handler with kopf's default registry.
"""

from . import autoscaling, cluster, settings, topic, user

__all__ = ["autoscaling", "cluster", "settings", "topic", "user"]
