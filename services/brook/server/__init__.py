"""The asyncio network layer: listener, connections, dispatch by API key, sendfile for large fetches."""

from .listener import KafkaServer

__all__ = ["KafkaServer"]
