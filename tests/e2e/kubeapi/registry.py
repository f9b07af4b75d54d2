"""API semantics over the store: create/update/patch/delete with Kubernetes' rules for metadata,
resourceVersion preconditions, generation, status and scale subresources, finalizers and
deletionTimestamp, CRD registration, schema validation of custom resources, and the controllers
that finish deletions (namespace and CRD cleanup, garbage collection by ownerReferences).
"""

from __future__ import annotations

import copy
import json
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import builtins, schema
from .errors import ApiError, FieldError, already_exists, conflict, invalid, not_found, qualified
from .meta import (
    check_name,
    fields_match,
    jsonpath,
    labels_match,
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector,
    set_dotted,
    timestamp,
)
from .patch import PatchError, apply_patch_merge, json_equal, json_patch, merge_patch, strategic_merge
from .resources import Catalog, ResourceType, crd_resource_types
from .storage import Event, Store

log = logging.getLogger("kubeapi")

JSON = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NS_KEY = ("", "namespaces")
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"


@dataclass
class Ctx:
    """Per-request options and the warnings to answer in `Warning` headers."""

    dry_run: bool = False
    field_validation: str = "Warn"  # Strict, Warn or Ignore; kubectl sends Strict
    field_manager: str = ""
    force: bool = False
    warnings: list[str] = field(default_factory=list)


def _meta(obj: JSON) -> JSON:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = obj["metadata"] = {}
    return m


def _deleting(obj: JSON) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _without(obj: JSON, *keys: str) -> JSON:
    return {k: v for k, v in obj.items() if k not in keys}


OBJECT_META_FIELDS = {
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
}


def _normalize_meta(meta: JSON) -> list[str]:
    """ObjectMeta round-trips through its Go type: unknown fields go, empty ones are omitted."""
    unknown = [k for k in meta if k not in OBJECT_META_FIELDS]
    for k in list(meta):
        if k in unknown or meta[k] in (None, "", {}, []):
            del meta[k]
    return unknown


def _drop_nulls(value: Any) -> None:
    """Built-in kinds decode into Go structs: a JSON null is the same as an absent field."""
    if isinstance(value, dict):
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for v in value.values():
            _drop_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _drop_nulls(v)


class Registry:
    def __init__(self, store: Store, catalog: Catalog) -> None:
        self.store = store
        self.catalog = catalog
        self.wake_controllers: Callable[[], None] = lambda: (
            None
        )  # replaced by the server: wakes the GC/cleanup loop
        store.listeners.append(self._on_event)

    # ------------------------------------------------------------ bootstrap

    def bootstrap(self) -> None:
        rt = self.catalog.get("", "v1", "namespaces")
        assert rt is not None
        for ns in SYSTEM_NAMESPACES:
            self.create(rt, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, Ctx())
        sa = self.catalog.get("", "v1", "serviceaccounts")
        assert sa is not None
        for ns in SYSTEM_NAMESPACES:
            self._default_service_account(ns)
        svc = self.catalog.get("", "v1", "services")
        assert svc is not None
        self.create(
            svc,
            "default",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "clusterIP": "10.96.0.1",
                    "ports": [{"name": "https", "port": 443, "targetPort": 6443}],
                },
            },
            Ctx(),
        )

    def _default_service_account(self, ns: str) -> None:
        sa = self.catalog.get("", "v1", "serviceaccounts")
        if sa and self.store.get(sa.key, ns, "default") is None:
            self.create(
                sa, ns, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, Ctx()
            )

    # ------------------------------------------------------------ events → catalog, controllers

    def _on_event(self, key: tuple[str, str], ev: Event) -> None:
        if key == CRD_KEY:
            name = _meta(ev.obj)["name"]
            self.catalog.remove_crd(name)
            if ev.type == "DELETED":
                spec = ev.obj.get("spec") or {}
                self.store.drop_bucket((spec.get("group", ""), (spec.get("names") or {}).get("plural", "")))
            else:
                for rt in crd_resource_types(ev.obj):
                    self.catalog.add(rt)
        if key == NS_KEY and ev.type == "ADDED":
            self._default_service_account(_meta(ev.obj)["name"])
        meta = _meta(ev.obj)
        if ev.type == "DELETED" or meta.get("deletionTimestamp") or meta.get("ownerReferences"):
            self.wake_controllers()

    # ------------------------------------------------------------ presentation

    def present(self, rt: ResourceType, obj: JSON) -> JSON:
        """The object as served by `rt`'s version (custom resources convert by apiVersion only)."""
        if obj.get("apiVersion") == rt.group_version and obj.get("kind") == rt.kind:
            return obj
        return dict(obj, apiVersion=rt.group_version, kind=rt.kind)

    # ------------------------------------------------------------ reads

    def get(self, rt: ResourceType, ns: str, name: str) -> JSON:
        obj = self.store.get(rt.key, ns, name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def select(
        self, rt: ResourceType, ns: str | None, label_selector: str = "", field_selector: str = ""
    ) -> list[JSON]:
        lreqs = parse_label_selector(label_selector)
        freqs = parse_field_selector(field_selector)
        out = []
        for obj in self.store.items(rt.key, ns):
            if labels_match(lreqs, _meta(obj).get("labels")) and fields_match(freqs, obj):
                out.append(obj)
        return out

    # ------------------------------------------------------------ body checks

    def _check_body(self, rt: ResourceType, ns: str, body: Any, ctx: Ctx | None = None) -> JSON:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if kind and kind != rt.kind:
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.group_version})"
                if api_version != rt.group_version
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})",
            )
        if api_version and api_version != rt.group_version:
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.group_version})",
            )
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = rt.group_version, rt.kind
        meta = _meta(obj)
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        unknown = _normalize_meta(meta)
        if rt.builtin:
            _drop_nulls(obj)
        if unknown and ctx is not None:
            if ctx.field_validation == "Strict":
                text = ", ".join(f'unknown field "metadata.{u}"' for u in unknown)
                raise ApiError(
                    400,
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"strict decoding error: {text}",
                )
            if ctx.field_validation == "Warn":
                ctx.warnings += [f'unknown field "metadata.{u}"' for u in unknown]
        return obj

    def _custom_checks(self, rt: ResourceType, obj: JSON, ctx: Ctx) -> list[FieldError]:
        """Prune, default and validate a custom resource against its version's openAPIV3Schema."""
        if not rt.schema:
            return []
        unknown = schema.prune(obj, rt.schema)
        if unknown:
            if ctx.field_validation == "Strict":
                text = ", ".join(f'unknown field "{u}"' for u in unknown)
                raise ApiError(
                    400,
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"strict decoding error: {text}",
                )
            if ctx.field_validation == "Warn":
                ctx.warnings += [f'unknown field "{u}"' for u in unknown]
        schema.apply_defaults(obj, rt.schema)
        return schema.validate(obj, rt.schema)

    def _validate_meta(self, rt: ResourceType, obj: JSON) -> list[FieldError]:
        meta = _meta(obj)
        errs = check_name(meta.get("name", ""), label=rt.kind in ("Namespace", "Service"))
        controllers = 0
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not isinstance(ref, dict) or not ref.get(f):
                    errs.append(
                        FieldError(
                            f"metadata.ownerReferences[{i}].{f}",
                            "Invalid value",
                            f"{f} must not be empty",
                            "",
                            True,
                        )
                    )
            if isinstance(ref, dict) and ref.get("controller"):
                controllers += 1
        if controllers > 1:
            errs.append(
                FieldError(
                    "metadata.ownerReferences",
                    "Invalid value",
                    "Only one reference can have Controller set to true",
                    "",
                    True,
                )
            )
        for value in (meta.get("labels") or {}).values():
            if not isinstance(value, str) or len(value) > 63:
                errs.append(
                    FieldError(
                        "metadata.labels", "Invalid value", "must be no more than 63 characters", value, True
                    )
                )
        return errs

    def _check_kind(self, rt: ResourceType, obj: JSON, old: JSON | None) -> list[FieldError]:
        if rt.builtin:
            if rt.kind == "CustomResourceDefinition":
                return self._validate_crd(obj, old)
            return (
                builtins.validate_update(rt.kind, old, obj)
                if old is not None
                else builtins.validate(rt.kind, obj)
            )
        return []

    # ------------------------------------------------------------ create

    def create(self, rt: ResourceType, ns: str, body: Any, ctx: Ctx) -> JSON:
        if "create" not in rt.verbs:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        obj = self._check_body(rt, ns, body, ctx)
        meta = _meta(obj)
        if meta.get("resourceVersion"):
            raise ApiError(
                500, "resourceVersion should not be set on objects to be created", reason="InternalError"
            )
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        name = meta.get("name", "")
        if rt.namespaced:
            self._check_namespace(rt, ns, name)
        if not rt.builtin and rt.crd:
            crd = self.store.get(CRD_KEY, "", rt.crd)
            if crd is not None and _deleting(crd):
                raise ApiError(405, "create not allowed while custom resource definition is terminating")
        for f in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "uid",
            "creationTimestamp",
            "generation",
        ):
            meta.pop(f, None)
        if rt.has_status:
            obj.pop("status", None)  # status is written through /status only
        if rt.builtin:
            builtins.init_create(rt.kind, obj)
        if rt.kind == "CustomResourceDefinition" and rt.builtin:
            self._default_crd(obj)
        errs = (
            self._validate_meta(rt, obj) + self._custom_checks(rt, obj, ctx) + self._check_kind(rt, obj, None)
        )
        if errs:
            raise invalid(rt.kind, rt.group, name, errs)
        if self.store.get(rt.key, meta.get("namespace", ""), name) is not None:
            raise already_exists(rt.plural, rt.group, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp()
        if rt.has_generation:
            meta["generation"] = 1
        if rt.kind == "CustomResourceDefinition" and rt.builtin:
            meta["finalizers"] = [*(meta.get("finalizers") or []), CRD_FINALIZER]
            obj["status"] = self._crd_status(obj)
        if ctx.dry_run:
            meta["resourceVersion"] = ""
            return obj
        return self.store.put(rt.key, obj)

    def _check_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        nso = self.store.get(NS_KEY, "", ns)
        if nso is None:
            raise not_found("namespaces", "", ns)
        if _deleting(nso):
            raise ApiError(
                403,
                f'{qualified(rt.plural, rt.group)} "{name}" is forbidden: unable to create new '
                f"content in namespace {ns} because it is being terminated",
                name=name,
                group=rt.group,
                kind=rt.plural,
            )

    # ------------------------------------------------------------ update (PUT)

    def update(self, rt: ResourceType, ns: str, name: str, body: Any, ctx: Ctx, sub: str = "") -> JSON:
        old = self.store.get(rt.key, ns, name)
        obj = self._check_body(rt, ns, body, ctx) if sub != "scale" else body
        if old is None:
            if rt.allow_create_on_update and not sub:
                return self.create(rt, ns, obj, ctx)
            raise not_found(rt.plural, rt.group, name)
        if sub == "scale":
            return self._update_scale(rt, old, obj, ctx)
        meta = _meta(obj)
        if meta.get("name") and meta["name"] != name:
            raise ApiError(
                400, f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        rv = meta.get("resourceVersion")
        if rv and rv != _meta(old)["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        if not rv and not rt.builtin:
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    FieldError(
                        "metadata.resourceVersion",
                        "Invalid value",
                        "must be specified for an update",
                        0,
                        True,
                    )
                ],
            )
        return self._commit(rt, old, obj, ctx, sub)

    def _commit(self, rt: ResourceType, old: JSON, new: JSON, ctx: Ctx, sub: str = "") -> JSON:
        """The common tail of PUT and PATCH: keep what the client cannot change, validate, write."""
        ometa, nmeta = _meta(old), _meta(new)
        if sub == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            nmeta = _meta(new)
        elif sub == "finalize":  # namespaces: only spec.finalizers changes
            finalizers = (new.get("spec") or {}).get("finalizers") or []
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["finalizers"] = finalizers
            nmeta = _meta(new)
        else:
            if rt.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            for f in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ):
                if f in ometa:
                    nmeta[f] = ometa[f]
                else:
                    nmeta.pop(f, None)
            if rt.builtin:
                builtins.default_update(rt.kind, old, new)
        nmeta.pop("managedFields", None)
        nmeta["resourceVersion"] = ometa["resourceVersion"]
        new["apiVersion"], new["kind"] = old.get("apiVersion", rt.group_version), old.get("kind", rt.kind)
        if _deleting(old):
            added = [f for f in nmeta.get("finalizers") or [] if f not in (ometa.get("finalizers") or [])]
            if added:
                raise invalid(
                    rt.kind,
                    rt.group,
                    ometa["name"],
                    [
                        FieldError(
                            "metadata.finalizers",
                            "Forbidden",
                            "no new finalizers can be added if the object is being deleted, "
                            + "found new finalizers []string{"
                            + ", ".join(json.dumps(f) for f in added)
                            + "}",
                        )
                    ],
                )
        rt_obj = self.present(rt, new)
        errs = self._validate_meta(rt, new)
        if not rt.builtin:
            errs += self._custom_checks(rt, rt_obj, ctx)
            new = dict(rt_obj, apiVersion=new["apiVersion"])
        errs += self._check_kind(rt, new, old)
        if errs:
            raise invalid(rt.kind, rt.group, ometa["name"], errs)
        if rt.has_generation and ometa.get("generation") is not None:
            ignored = ("metadata", "status") if rt.has_status else ("metadata",)
            if not json_equal(_without(old, *ignored, "apiVersion"), _without(new, *ignored, "apiVersion")):
                nmeta["generation"] = int(ometa["generation"]) + 1
        if rt.kind == "CustomResourceDefinition" and rt.builtin and sub != "status":
            new["status"] = self._crd_status(new, old.get("status"))
        if json_equal(old, new):
            return old  # a no-op write: no new resourceVersion, no event
        if ctx.dry_run:
            return new
        if self._finished(new):
            final = self.store.delete(rt.key, nmeta.get("namespace", ""), nmeta["name"])
            assert final is not None
            return dict(new, metadata=dict(nmeta, resourceVersion=final["metadata"]["resourceVersion"]))
        return self.store.put(rt.key, new)

    @staticmethod
    def _finished(obj: JSON) -> bool:
        """Deletion completes when the last finalizer (and for namespaces, spec.finalizer) is gone."""
        meta = _meta(obj)
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        if obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"):
            return False
        return not meta.get("deletionGracePeriodSeconds")

    # ------------------------------------------------------------ patch

    def patch(
        self, rt: ResourceType, ns: str, name: str, raw: bytes, content_type: str, ctx: Ctx, sub: str = ""
    ) -> tuple[JSON, bool]:
        """Apply a patch; returns (object, created). Only server-side apply may create."""
        ctype = content_type.split(";")[0].strip().lower()
        old = self.store.get(rt.key, ns, name)
        if ctype in (APPLY_PATCH, APPLY_PATCH_CBOR):
            applied = self._parse_apply(raw)
            if not ctx.field_manager:
                raise ApiError(
                    400,
                    'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                    "required for apply patch",
                )
            if old is None:
                if sub:
                    raise not_found(rt.plural, rt.group, name)
                applied.setdefault("metadata", {})["name"] = name
                return self.create(rt, ns, applied, ctx), True
            base = self.present(rt, old) if sub != "scale" else self.scale_of(rt, old)
            patched = apply_patch_merge(base, applied, rt.kind, strategic=rt.builtin)
        else:
            if old is None:
                raise not_found(rt.plural, rt.group, name)
            try:
                body = json.loads(raw or b"null")
            except ValueError as e:
                raise ApiError(400, f"error decoding patch: {e}") from None
            base = self.present(rt, old) if sub != "scale" else self.scale_of(rt, old)
            try:
                if ctype == JSON_PATCH:
                    patched = json_patch(base, body)
                elif ctype == MERGE_PATCH:
                    if not isinstance(body, dict):
                        raise PatchError("merge patch must be a JSON object", bad_request=True)
                    patched = merge_patch(base, body)
                elif ctype == STRATEGIC_PATCH:
                    if not rt.builtin and sub != "scale":
                        raise ApiError(
                            415,
                            f"the body of the request was in an unknown format - accepted media "
                            f"types include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}, "
                            f"{APPLY_PATCH_CBOR}",
                        )
                    patched = strategic_merge(base, body, rt.kind)
                else:
                    raise ApiError(
                        415,
                        f"the body of the request was in an unknown format - accepted media types "
                        f"include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}, {APPLY_PATCH}, "
                        f"{APPLY_PATCH_CBOR}",
                    )
            except PatchError as e:
                log.info("patch of %s %s/%s failed: %s", rt.plural, ns, name, e)
                if e.bad_request:
                    raise ApiError(400, str(e)) from None
                raise ApiError(
                    422, "the server rejected our request due to an error in our request"
                ) from None
        if not isinstance(patched, dict):
            raise ApiError(422, "the server rejected our request due to an error in our request")
        pmeta: JSON = patched["metadata"] if isinstance(patched.get("metadata"), dict) else {}
        rv = pmeta.get("resourceVersion")
        if rv and rv != _meta(old)["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        if sub == "scale":
            return self._update_scale(rt, old, patched, ctx), False
        for f in ("name", "namespace"):
            if pmeta.get(f, _meta(old).get(f)) != _meta(old).get(f):
                raise ApiError(400, f"metadata.{f}: Invalid value: {pmeta.get(f)!r}: field is immutable")
        obj = self._check_body(rt, ns, patched, ctx)
        return self._commit(rt, old, obj, ctx, sub), False

    @staticmethod
    def _parse_apply(raw: bytes) -> JSON:
        try:
            doc = json.loads(raw)
        except ValueError:
            try:
                import yaml  # the emulator needs PyYAML only for YAML apply bodies
            except ImportError:  # pragma: no cover
                raise ApiError(415, "YAML apply patches need PyYAML in the emulator") from None
            try:
                doc = yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise ApiError(400, f"error decoding YAML: {e}") from None
        if not isinstance(doc, dict):
            raise ApiError(400, "apply patch must be an object")
        return doc

    # ------------------------------------------------------------ scale

    def scale_of(self, rt: ResourceType, obj: JSON) -> JSON:
        assert rt.scale is not None
        meta = _meta(obj)
        spec_r = jsonpath(obj, rt.scale.spec_replicas)
        status_r = jsonpath(obj, rt.scale.status_replicas)
        status: JSON = {"replicas": int(status_r[0]) if status_r and status_r[0] is not None else 0}
        if rt.scale.selector_from_spec:
            status["selector"] = selector_from_label_selector((obj.get("spec") or {}).get("selector"))
        elif rt.scale.label_selector:
            sel = jsonpath(obj, rt.scale.label_selector)
            if sel and sel[0]:
                status["selector"] = sel[0]
        smeta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": smeta,
            "spec": {"replicas": int(spec_r[0]) if spec_r and spec_r[0] is not None else 0},
            "status": status,
        }

    def _update_scale(self, rt: ResourceType, old: JSON, scale: JSON, ctx: Ctx) -> JSON:
        assert rt.scale is not None
        if not isinstance(scale, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        smeta = scale.get("metadata") or {}
        rv = smeta.get("resourceVersion")
        name = _meta(old)["name"]
        if rv and rv != _meta(old)["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid(
                "Scale",
                "autoscaling",
                name,
                [
                    FieldError(
                        "spec.replicas", "Invalid value", "must be greater than or equal to 0", replicas, True
                    )
                ],
            )
        new = copy.deepcopy(old)
        set_dotted(new, rt.scale.spec_replicas, replicas)
        result = self._commit(rt, old, new, ctx)
        return self.scale_of(rt, result)

    # ------------------------------------------------------------ delete

    def delete(self, rt: ResourceType, ns: str, name: str, options: JSON, ctx: Ctx) -> tuple[JSON, bool]:
        """Returns (body, deleted_now): the final object or a Status when it is gone, else the object."""
        obj = self.get(rt, ns, name)
        meta = _meta(obj)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise invalid(
                "DeleteOptions",
                "",
                "",
                [
                    FieldError(
                        "propagationPolicy",
                        "Unsupported value",
                        'supported values: "Foreground", "Background", "Orphan", "nil"',
                        policy,
                        True,
                    )
                ],
            )
        grace = options.get("gracePeriodSeconds")
        new = copy.deepcopy(obj)
        nmeta = _meta(new)
        finalizers = list(nmeta.get("finalizers") or [])
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        graceful = 0
        if rt.kind == "Pod" and rt.builtin:
            spec = obj.get("spec") or {}
            phase = (obj.get("status") or {}).get("phase")
            if spec.get("nodeName") and phase not in ("Succeeded", "Failed"):
                graceful = int(grace if grace is not None else spec.get("terminationGracePeriodSeconds", 30))
        if _deleting(obj):
            # Already terminating: only a shorter grace period (kubelet's final delete) changes anything.
            if graceful == 0 and (meta.get("deletionGracePeriodSeconds") or 0) > 0 and rt.kind == "Pod":
                nmeta["deletionGracePeriodSeconds"] = 0
                if not finalizers and not ctx.dry_run:
                    final = self.store.delete(rt.key, ns, name)
                    assert final is not None
                    return final, True
                return self._commit_delete(rt, new, ctx), False
            return obj, False
        is_ns = rt.kind == "Namespace" and rt.builtin
        if finalizers or graceful or is_ns:
            nmeta["finalizers"] = finalizers
            if not finalizers:
                nmeta.pop("finalizers")
            nmeta["deletionTimestamp"] = timestamp()
            nmeta["deletionGracePeriodSeconds"] = graceful
            if is_ns:
                new.setdefault("status", {})["phase"] = "Terminating"
            if rt.builtin and rt.kind == "CustomResourceDefinition":
                new["status"] = self._crd_status(new, obj.get("status"))
            if ctx.dry_run:
                return new, False
            return self._commit_delete(rt, new, ctx), False
        if ctx.dry_run:
            return obj, True
        final = self.store.delete(rt.key, ns, name)
        assert final is not None
        return final, True

    def _commit_delete(self, rt: ResourceType, new: JSON, ctx: Ctx) -> JSON:
        if ctx.dry_run:
            return new
        return self.store.put(rt.key, new)

    def status_success(self, rt: ResourceType, obj: JSON) -> JSON:
        meta = _meta(obj)
        details: JSON = {"name": meta.get("name", ""), "kind": rt.plural, "uid": meta.get("uid", "")}
        if rt.group:
            details["group"] = rt.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    # ------------------------------------------------------------ CRDs

    def _default_crd(self, crd: JSON) -> None:
        spec = crd.setdefault("spec", {})
        names = spec.setdefault("names", {})
        if names.get("kind"):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        spec.setdefault("scope", "Namespaced")
        spec.setdefault("conversion", {"strategy": "None"})
        for v in spec.get("versions") or []:
            if isinstance(v, dict):
                v.setdefault("served", True)
                v.setdefault("storage", False)

    def _validate_crd(self, crd: JSON, old: JSON | None) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group", "")
        if not group:
            errs.append(FieldError("spec.group", "Required value"))
        elif "." not in group:
            errs.append(
                FieldError(
                    "spec.group", "Invalid value", "should be a domain with at least one dot", group, True
                )
            )
        for f in ("plural", "kind"):
            if not names.get(f):
                errs.append(FieldError(f"spec.names.{f}", "Required value"))
        name = _meta(crd).get("name", "")
        if names.get("plural") and group and name != f"{names['plural']}.{group}":
            errs.append(
                FieldError(
                    "metadata.name", "Invalid value", 'must be spec.names.plural+"."+spec.group', name, True
                )
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            errs.append(
                FieldError(
                    "spec.scope",
                    "Unsupported value",
                    'supported values: "Cluster", "Namespaced"',
                    spec.get("scope"),
                    True,
                )
            )
        versions = spec.get("versions") or []
        if not versions:
            errs.append(
                FieldError(
                    "spec.versions",
                    "Invalid value",
                    "must have exactly one version marked as storage version",
                    [],
                    True,
                )
            )
        elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
            errs.append(
                FieldError(
                    "spec.versions",
                    "Invalid value",
                    "must have exactly one version marked as storage version",
                    versions,
                    True,
                )
            )
        for i, v in enumerate(versions):
            if not isinstance(v, dict):
                continue
            s = (v.get("schema") or {}).get("openAPIV3Schema")
            if s is None:
                errs.append(
                    FieldError(
                        f"spec.versions[{i}].schema.openAPIV3Schema", "Required value", "schemas are required"
                    )
                )
            else:
                errs += schema.check_structural(s, f"spec.versions[{i}].schema.openAPIV3Schema")
        if old is not None and (old.get("spec") or {}).get("scope") != spec.get("scope"):
            errs.append(
                FieldError("spec.scope", "Invalid value", "field is immutable", spec.get("scope"), True)
            )
        return errs

    def _crd_status(self, crd: JSON, old_status: JSON | None = None) -> JSON:
        spec = crd.get("spec") or {}
        now = timestamp()
        stored = list((old_status or {}).get("storedVersions") or [])
        storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), None)
        if storage and storage not in stored:
            stored.append(storage)
        conds = {c.get("type"): c for c in (old_status or {}).get("conditions") or []}

        def cond(t: str, reason: str, message: str) -> JSON:
            prev = conds.get(t)
            when = prev["lastTransitionTime"] if prev and prev.get("status") == "True" else now
            return {
                "type": t,
                "status": "True",
                "lastTransitionTime": when,
                "reason": reason,
                "message": message,
            }

        conditions = [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ]
        if _deleting(crd):
            conditions.append(
                {
                    "type": "Terminating",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "InstanceDeletionInProgress",
                    "message": "CustomResource deletion is in progress",
                }
            )
        return {
            "acceptedNames": copy.deepcopy(spec.get("names") or {}),
            "conditions": conditions,
            "storedVersions": stored,
        }

    # ------------------------------------------------------------ controllers

    def reconcile(self) -> bool:
        """One pass of the controllers that complete deletions; returns whether anything changed."""
        changed = False
        changed |= self._namespace_controller()
        changed |= self._crd_cleanup_controller()
        changed |= self._garbage_collector()
        return changed

    def _raw_delete(self, key: tuple[str, str], obj: JSON, policy: str = "Background") -> bool:
        rts = self.catalog.by_key(key)
        if not rts or _deleting(obj):
            return False
        meta = _meta(obj)
        try:
            self.delete(rts[0], meta.get("namespace", ""), meta["name"], {"propagationPolicy": policy}, Ctx())
        except ApiError:
            return False
        return True

    def _namespace_controller(self) -> bool:
        changed = False
        for ns in list(self.store.items(NS_KEY)):
            if not _deleting(ns) or not (ns.get("spec") or {}).get("finalizers"):
                continue
            name = _meta(ns)["name"]
            remaining = 0
            for key, obj in list(self.store.all_objects()):
                if _meta(obj).get("namespace") == name:
                    remaining += 1
                    changed |= self._raw_delete(key, obj)
            if remaining == 0:
                new = copy.deepcopy(ns)
                new["spec"]["finalizers"] = []
                rt = self.catalog.get("", "v1", "namespaces")
                assert rt is not None
                self._finish(rt, new)
                changed = True
        return changed

    def _finish(self, rt: ResourceType, new: JSON) -> None:
        meta = _meta(new)
        if self._finished(new):
            self.store.delete(rt.key, meta.get("namespace", ""), meta["name"])
        else:
            self.store.put(rt.key, new)

    def _crd_cleanup_controller(self) -> bool:
        changed = False
        for crd in list(self.store.items(CRD_KEY)):
            meta = _meta(crd)
            if not _deleting(crd) or CRD_FINALIZER not in (meta.get("finalizers") or []):
                continue
            spec = crd.get("spec") or {}
            key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            instances = list(self.store.items(key))
            for obj in instances:
                changed |= self._raw_delete(key, obj)
            if not instances:
                new = copy.deepcopy(crd)
                _meta(new)["finalizers"] = [f for f in meta["finalizers"] if f != CRD_FINALIZER]
                rt = self.catalog.get(*CRD_KEY[:1], "v1", CRD_KEY[1])
                assert rt is not None
                self._finish(rt, new)
                changed = True
        return changed

    def _garbage_collector(self) -> bool:
        changed = False
        dependents: dict[str, list[tuple[tuple[str, str], JSON]]] = {}
        for key, obj in list(self.store.all_objects()):
            for ref in _meta(obj).get("ownerReferences") or []:
                dependents.setdefault(ref.get("uid", ""), []).append((key, obj))
        # Owners being deleted in the foreground or orphaning wait for their dependents.
        for key, owner in list(self.store.all_objects()):
            meta = _meta(owner)
            fins = meta.get("finalizers") or []
            if not _deleting(owner) or not ({"foregroundDeletion", "orphan"} & set(fins)):
                continue
            deps = [
                (k, d)
                for k, d in dependents.get(meta["uid"], [])
                if self.store.get(k, _meta(d).get("namespace", ""), _meta(d)["name"]) is not None
            ]
            rts = self.catalog.by_key(key)
            if not rts:
                continue
            if "orphan" in fins:
                for dk, dep in deps:
                    new = copy.deepcopy(dep)
                    refs = [r for r in _meta(new).get("ownerReferences") or [] if r.get("uid") != meta["uid"]]
                    _meta(new)["ownerReferences"] = refs
                    if not refs:
                        _meta(new).pop("ownerReferences")
                    self.store.put(dk, new)
                new = copy.deepcopy(owner)
                _meta(new)["finalizers"] = [f for f in fins if f != "orphan"]
                self._finish(rts[0], new)
                changed = True
                continue
            blocking = [d for _, d in deps]
            for dk, dep in deps:
                changed |= self._raw_delete(dk, dep, "Foreground")
            if not blocking:
                new = copy.deepcopy(owner)
                _meta(new)["finalizers"] = [f for f in fins if f != "foregroundDeletion"]
                self._finish(rts[0], new)
                changed = True
        # Dependents whose owners are all gone are deleted (background propagation).
        for key, obj in list(self.store.all_objects()):
            refs = _meta(obj).get("ownerReferences") or []
            if not refs or _deleting(obj):
                continue
            if all(self.store.by_uid(r.get("uid", "")) is None for r in refs):
                changed |= self._raw_delete(key, obj)
        return changed
