"""An in-repo Kubernetes API server emulator for end-to-end tests.

kubectl, helm, kopf and the `kubernetes` client talk to it over plain HTTP as to a real API server:
CRUD, list and watch (resourceVersion, bookmarks, 410 Gone), JSON/merge/strategic-merge patch,
status and scale subresources, CRDs with schema validation/defaulting/pruning, finalizers,
ownerReference garbage collection, namespaces, Table output, discovery and OpenAPI v3.

    from tests.e2e.kubeapi import EmulatorThread, write_kubeconfig
    emu = EmulatorThread().start()
    write_kubeconfig(tmp / "kubeconfig", emu.url)
    ...
    emu.stop()

or `python -m tests.e2e.kubeapi --port 8080 --kubeconfig /tmp/kubeconfig`.
"""

from .runner import EmulatorThread, kubeconfig, write_kubeconfig
from .server import KubeApiServer

__all__ = ["EmulatorThread", "KubeApiServer", "kubeconfig", "write_kubeconfig"]
