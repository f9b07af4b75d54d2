"""Iceberg topics: a topic's committed records appended to an Apache Iceberg table by its partition
leaders, exactly once per offset (docs/iceberg.md).

Modules: ports.py (catalog settings, table names), catalog.py (the catalog, the offsets a table records),
rows.py (records to Arrow rows, the value modes), writer.py (one partition's commits), writers.py (this
broker's writers). The package imports nothing itself: `brook topic describe` reads tables through
catalog.py without the broker's modules, and pyiceberg loads only where it is used.
"""
