"""A local pod runner for end-to-end tests: the node agent (kubelet) and kube-proxy of the real control
plane (tests/e2e/controlplane) for one host, where every pod is a set of local processes on
127.0.0.1. See README.md in this directory."""

from .kubelet import PORT_ANNOTATION, Event
from .ports import PortAllocator
from .runner import (
    Image,
    PodRunner,
    Process,
    RunnerConfig,
    RunnerThread,
    default_commands,
    ports_from_annotations,
)

__all__ = [
    "PORT_ANNOTATION",
    "Event",
    "Image",
    "PodRunner",
    "PortAllocator",
    "Process",
    "RunnerConfig",
    "RunnerThread",
    "default_commands",
    "ports_from_annotations",
]
