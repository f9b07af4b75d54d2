"""Replication: leader epochs, the follower's fetcher and its connection to the leader."""
