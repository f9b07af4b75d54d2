"""The broker's domain and lifecycle: topics, partitions and their logs, producer state, the metadata seam
(one node or a cluster). Its settings and where their values come from: brook.settings."""
