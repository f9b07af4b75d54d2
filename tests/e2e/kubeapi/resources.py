"""Resource types: the built-in catalog and those a CustomResourceDefinition declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUB_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class ScalePaths:
    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"
    # built-in workloads keep a metav1.LabelSelector in .spec.selector rather than a string
    selector_from_spec: bool = False


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    scale: ScalePaths | None = None
    has_generation: bool = False
    builtin: bool = True
    schema: JSON | None = None  # openAPIV3Schema (custom resources)
    columns: tuple[Column, ...] | None = None  # None: NAME and AGE
    list_kind: str = ""
    crd: str = ""  # name of the declaring CRD
    storage_version: str = ""  # for custom resources with several versions
    verbs: tuple[str, ...] = ALL_VERBS
    allow_create_on_update: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """Storage bucket: one per group and resource, shared by all served versions."""
        return (self.group, self.plural)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or f"{self.kind}List"


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    kw.setdefault("singular", kind.lower())
    return ResourceType(group, version, plural, kind, namespaced, **kw)


STATUS = frozenset({"status"})
STATUS_SCALE = frozenset({"status", "scale"})
WORKLOAD_SCALE = ScalePaths(".spec.replicas", ".status.replicas", None, selector_from_spec=True)

BUILTINS: list[ResourceType] = [
    # core
    _rt(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=frozenset({"status", "finalize"}),
    ),
    _rt("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _rt("", "v1", "secrets", "Secret"),
    _rt("", "v1", "services", "Service", short_names=("svc",), categories=("all",), subresources=STATUS),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _rt(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status", "binding", "eviction"}),
    ),
    _rt("", "v1", "events", "Event", short_names=("ev",), allow_create_on_update=True),
    _rt("", "v1", "endpoints", "Endpoints", short_names=("ep",), allow_create_on_update=True),
    _rt(
        "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), subresources=STATUS
    ),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",), subresources=STATUS),
    _rt("", "v1", "nodes", "Node", False, short_names=("no",), subresources=STATUS),
    _rt("", "v1", "resourcequotas", "ResourceQuota", short_names=("quota",), subresources=STATUS),
    _rt("", "v1", "limitranges", "LimitRange", short_names=("limits",)),
    # apps
    _rt(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short_names=("sts",),
        categories=("all",),
        subresources=STATUS_SCALE,
        scale=WORKLOAD_SCALE,
        has_generation=True,
    ),
    _rt(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        subresources=STATUS_SCALE,
        scale=WORKLOAD_SCALE,
        has_generation=True,
    ),
    _rt(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        subresources=STATUS_SCALE,
        scale=WORKLOAD_SCALE,
        has_generation=True,
    ),
    _rt(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        short_names=("ds",),
        categories=("all",),
        subresources=STATUS,
        has_generation=True,
    ),
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision"),
    # batch
    _rt("batch", "v1", "jobs", "Job", categories=("all",), subresources=STATUS, has_generation=True),
    _rt(
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        short_names=("cj",),
        categories=("all",),
        subresources=STATUS,
        has_generation=True,
    ),
    # autoscaling
    _rt(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
        categories=("all",),
        subresources=STATUS,
        has_generation=True,
    ),
    # policy
    _rt(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        subresources=STATUS,
        has_generation=True,
    ),
    # rbac
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # coordination
    _rt("coordination.k8s.io", "v1", "leases", "Lease"),
    # events
    _rt("events.k8s.io", "v1", "events", "Event", short_names=("ev",), allow_create_on_update=True),
    # networking
    _rt(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        short_names=("netpol",),
        has_generation=True,
    ),
    _rt(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        short_names=("ing",),
        subresources=STATUS,
        has_generation=True,
    ),
    _rt("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    # discovery
    _rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    # storage
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=("sc",)),
    # scheduling
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    # apiextensions
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        subresources=STATUS,
        has_generation=True,
    ),
]

# Virtual, create-only resources (reviews): the answer is computed, nothing is stored.
REVIEWS: list[ResourceType] = [
    _rt(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
    _rt(
        "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)
    ),
    _rt("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, verbs=("create",)),
]

# Group versions whose preferred version differs from the one we serve, or that we list first.
GROUP_ORDER = [
    "",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
]


def crd_resource_types(crd: JSON) -> list[ResourceType]:
    """The served versions of a CRD, each as a ResourceType (they share one storage bucket)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    versions = spec.get("versions") or []
    storage = next(
        (v["name"] for v in versions if v.get("storage")), versions[0]["name"] if versions else "v1"
    )
    out = []
    for v in versions:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        subresources = set()
        scale = None
        if "status" in subs:
            subresources.add("status")
        if "scale" in subs:
            subresources.add("scale")
            sc = subs["scale"] or {}
            scale = ScalePaths(
                sc.get("specReplicasPath", ".spec.replicas"),
                sc.get("statusReplicasPath", ".status.replicas"),
                sc.get("labelSelectorPath"),
            )
        cols = None
        if v.get("additionalPrinterColumns"):
            cols = tuple(
                Column(
                    c["name"],
                    c.get("type", "string"),
                    c.get("jsonPath", ""),
                    c.get("description", ""),
                    int(c.get("priority", 0)),
                    c.get("format", ""),
                )
                for c in v["additionalPrinterColumns"]
            )
        out.append(
            ResourceType(
                group=group,
                version=v["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=namespaced,
                singular=names.get("singular") or names.get("kind", "").lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(subresources),
                scale=scale,
                has_generation=True,
                builtin=False,
                schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                columns=cols,
                list_kind=names.get("listKind", ""),
                crd=(crd.get("metadata") or {}).get("name", ""),
                storage_version=storage,
            )
        )
    return out


@dataclass
class Catalog:
    """All served resource types, by (group, version, plural) and by (group, plural)."""

    types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)

    def add(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt

    def remove_crd(self, crd_name: str) -> None:
        for k in [k for k, rt in self.types.items() if rt.crd == crd_name]:
            del self.types[k]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def by_key(self, key: tuple[str, str]) -> list[ResourceType]:
        return [rt for rt in self.types.values() if rt.key == key]

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions served (preferred first: storage version for CRDs, else the highest)."""
        out: dict[str, list[str]] = {}
        for rt in self.types.values():
            vs = out.setdefault(rt.group, [])
            if rt.version not in vs:
                vs.append(rt.version)
        for g, vs in out.items():
            preferred = next(
                (rt.storage_version for rt in self.types.values() if rt.group == g and rt.storage_version),
                None,
            )
            vs.sort(key=_version_rank, reverse=True)
            if preferred in vs:
                vs.remove(preferred)
                vs.insert(0, preferred)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.types.values() if rt.group == group and rt.version == version]


def _version_rank(v: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, then by number."""
    import re

    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (0, 0, 0)
    stage = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))
