"""Errors of the cluster metadata room (no aetcd type ever leaves `brook.metadata`)."""

from __future__ import annotations


class MetadataError(Exception):
    """Base class: something about the cluster metadata in etcd went wrong."""


class EtcdUnavailableError(MetadataError):
    """etcd could not be reached (or did not answer in time). The request may or may not have been
    applied when it was a write: re-read before retrying a compare-and-swap."""


class EtcdAuthError(MetadataError):
    """etcd refuses this client for good: wrong user or password, or a TLS handshake that fails
    (untrusted certificate). Retrying does not help; the message says which."""


class CompactedError(MetadataError):
    """A watch asked for history etcd has already compacted away."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"etcd history is compacted up to revision {compact_revision}")
        self.compact_revision = compact_revision


class LeaseNotFoundError(MetadataError):
    """A write under a lease etcd no longer has (it expired, e.g. while etcd restarted)."""


class BrokerIdInUseError(MetadataError):
    """Another live broker is registered under the same broker id."""


class TopicExistsError(MetadataError):
    pass


class UnknownTopicError(MetadataError):
    pass


class ConflictError(MetadataError):
    """A compare-and-swap lost: the key changed since it was read (its version is now `current_version`,
    0 when the key does not exist)."""

    def __init__(self, message: str, current_version: int) -> None:
        super().__init__(message)
        self.current_version = current_version


class FencedError(MetadataError):
    """A controller-only write by a broker that is no longer the controller of `expected_epoch`
    (`current_epoch` is the epoch in etcd; `current_controller` who holds it now, None when nobody)."""

    def __init__(self, expected_epoch: int, current_epoch: int, current_controller: int | None) -> None:
        super().__init__(
            f"controller epoch {expected_epoch} is fenced: etcd has epoch {current_epoch}"
            + (
                f" held by broker {current_controller}"
                if current_controller is not None
                else " and no controller"
            )
        )
        self.expected_epoch = expected_epoch
        self.current_epoch = current_epoch
        self.current_controller = current_controller
