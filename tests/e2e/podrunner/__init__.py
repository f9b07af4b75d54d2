"""A local pod runner for end-to-end tests against the Kubernetes API emulator (tests/e2e/kubeapi):
StatefulSet controller, scheduler, kubelet and kube-proxy for one host, where every pod is a set of
local processes on 127.0.0.1. See README.md in this directory."""

from .kubelet import PORT_ANNOTATION, Event
from .ports import PortAllocator
from .runner import (
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
    "PodRunner",
    "PortAllocator",
    "Process",
    "RunnerConfig",
    "RunnerThread",
    "default_commands",
    "ports_from_annotations",
]
