"""Brook: a Kafka-compatible broker for Kubernetes, in Python."""

__version__ = "0.1.0"
