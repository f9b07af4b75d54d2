"""The broker's domain: topics, partitions and their logs, producer state, the node's configuration."""
