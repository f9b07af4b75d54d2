"""brook-operator: runs Brook clusters and their topics on Kubernetes (kopf).

Rooms: `spec` (typed custom resources), `resources/` (pure builders: Cluster → manifests), `status`,
`topics`, `rolling`, `scaledown`, `election` (pure decisions), `kafka_admin` (the one module talking
Kafka), `kube` (the one module talking to the Kubernetes API besides kopf), `cluster` (the reconcile
flow), `handlers/` (thin kopf handlers), `main` (the `brook-operator` command).
"""

GROUP = "brook.dev"
VERSION = "v1alpha1"
