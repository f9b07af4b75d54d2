"""The partition log: segment files of opaque record batches, their sparse indexes, recovery and retention.

Synchronous file I/O only (no asyncio, no sockets): the broker calls it from its event loop, and serves
reads as FileSlices with sendfile. Only the 61-byte batch headers are parsed, but for compaction and
lookups by timestamp (records.py).
"""

from brook.log.append import AppendResult
from brook.log.dir_health import LogDirHealth
from brook.log.file_slice import FileSlice
from brook.log.partition_log import PartitionLog
from brook.log.segment import TimestampAndOffset

__all__ = ["AppendResult", "FileSlice", "LogDirHealth", "PartitionLog", "TimestampAndOffset"]
