"""A real Kubernetes control plane for the end-to-end tests: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler as local processes (server.py), a throwaway PKI (pki.py)
and the test-side handle `Kube` (harness.py)."""

from .harness import Kube
from .server import ControlPlane, ControlPlaneError, find_binaries

__all__ = ["ControlPlane", "ControlPlaneError", "Kube", "find_binaries"]
