"""confluent-kafka-python's schema registry integration tests against a Brook broker (see README.md)."""
