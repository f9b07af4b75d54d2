"""Replication: the follower's fetcher and its connection to the leader, the ISR and high-watermark
rules, acks=all waiting, leader epochs and fetch-from-follower; partitions reached through the
Protocols of replica.py."""
