"""Pure translation of a pod's container into a local process: argv, environment, working directory.

What a kubelet and a container runtime would do, reduced to one host where every pod lives on
127.0.0.1:

- Environment: `envFrom` (ConfigMaps, Secrets, with `prefix`), then `env` in order with Kubernetes'
  `$(VAR)` expansion (`$$` escapes) and `valueFrom` (fieldRef: metadata.name/namespace/uid,
  metadata.labels['k'], metadata.annotations['k'], spec.nodeName, spec.serviceAccountName,
  status.podIP/hostIP; configMapKeyRef, secretKeyRef; resourceFieldRef gives "0"). `command` and
  `args` are expanded with that environment.
- Images are not pulled: the container's command (or, without one, its image's entrypoint from
  `images`) is mapped to a local executable through `commands`, e.g. `brook` → `.venv/bin/brook`.
  An `Image` also stands in for the image's ENV (under the container's own env) and for directories
  of its file system (`paths`, e.g. `/opt/brook` → this checkout), rewritten as mountPaths are.
- Files: every mountPath in an env value, the command or the args is replaced by the volume's local
  directory (a PVC's directory survives the pod; emptyDirs do not), also after a URL's `://`
  (Spark's `local:///opt/...`).
- Network (one host, so ports collide): each (pod, containerPort) has its own host port
  (`Addresses.pod_port`). In the container's own env and argv, `0.0.0.0:<p>`, `127.0.0.1:<p>`,
  `localhost:<p>` with p one of its containerPorts, and a variable named `*PORT` whose value is one
  of them, become the host port. Cluster DNS names resolve to 127.0.0.1: a pod's name through a
  headless Service (`<pod>.<svc>.<ns>.svc[.cluster.local]`) with a port becomes
  `127.0.0.1:<that pod's host port>`; a Service's name (`<svc>.<ns>.svc`) becomes 127.0.0.1 with the
  port kept (the runner's Service proxy listens there), and so does a short one the pod's DNS search
  path would complete (`<svc>:<port>`, `<svc>.<ns>:<port>`, for the Services of the pod's namespace).
- A container that mounts a service-account token (a projected `serviceAccountToken` source) gets
  `KUBECONFIG` pointing at a kubeconfig with the pod's own bound token (runner.pod_credentials): the
  kubernetes client falls back to it because no KUBERNETES_SERVICE_HOST is set, so in-pod API clients
  (e.g. `brook-operator rack-init`) reach the API as the pod's ServiceAccount.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

JSON = dict[str, Any]
POD_IP = "127.0.0.1"


class Addresses(Protocol):
    def pod_port(self, namespace: str, pod: str, port: int) -> int:
        """The host port serving `pod`'s containerPort `port` (stable for the pod's name)."""
        ...


class LaunchError(ValueError):
    """The container cannot run here (unknown command, missing ConfigMap key, ...): a waiting reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Image:
    """What an image brings that this host supplies: its ENTRYPOINT, its ENV, and directories (or
    files) of its file system mapped to local paths."""

    entrypoint: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    paths: Mapping[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    container: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    ports: dict[int, int] = field(default_factory=dict)  # containerPort -> host port


# ---------------------------------------------------------------- $(VAR) expansion


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' expansion: `$(NAME)` → its value when defined (else kept), `$$` → `$`."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "$" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    if name in env:
                        out.append(env[name])
                    else:
                        out.append(text[i : end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- downward API and env sources

_FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field_ref(pod: Mapping[str, Any], path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    m = _FIELD_KEY.match(path)
    if m:
        return str((meta.get(m[1]) or {}).get(m[2], ""))
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": status.get("podIP") or POD_IP,
        "status.podIPs": status.get("podIP") or POD_IP,
        "status.hostIP": status.get("hostIP") or POD_IP,
        "status.hostIPs": status.get("hostIP") or POD_IP,
    }
    if path in simple:
        return "" if simple[path] is None else str(simple[path])
    if path in ("metadata.labels", "metadata.annotations"):
        items = (meta.get(path.split(".")[1]) or {}).items()
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items))
    raise LaunchError("CreateContainerConfigError", f"unsupported fieldRef {path}")


def _data_of(kind: str, obj: Mapping[str, Any] | None) -> dict[str, str] | None:
    if obj is None:
        return None
    data: dict[str, str] = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    if kind == "Secret":
        data = {k: base64.b64decode(v).decode() for k, v in data.items()}
        data.update({str(k): str(v) for k, v in (obj.get("stringData") or {}).items()})
    return data


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """The container's environment as Kubernetes builds it (envFrom first, then env in order)."""
    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        prefix = str(src.get("prefix") or "")
        for kind, key, store in (
            ("ConfigMap", "configMapRef", config_maps),
            ("Secret", "secretRef", secrets),
        ):
            ref = src.get(key)
            if ref is None:
                continue
            data = _data_of(kind, store.get(str(ref.get("name"))))
            if data is None:
                if ref.get("optional"):
                    continue
                raise LaunchError(
                    "CreateContainerConfigError", f'{kind.lower()} "{ref.get("name")}" not found'
                )
            env.update({prefix + k: v for k, v in data.items()})
    for var in container.get("env") or []:
        name = str(var["name"])
        if "value" in var or "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        vf = var["valueFrom"]
        if "fieldRef" in vf:
            env[name] = field_ref(pod, str(vf["fieldRef"]["fieldPath"]))
        elif "resourceFieldRef" in vf:
            env[name] = "0"
        else:
            for kind, key, store in (
                ("ConfigMap", "configMapKeyRef", config_maps),
                ("Secret", "secretKeyRef", secrets),
            ):
                ref = vf.get(key)
                if ref is None:
                    continue
                data = _data_of(kind, store.get(str(ref.get("name"))))
                if data is None or str(ref.get("key")) not in data:
                    if ref.get("optional"):
                        break
                    raise LaunchError(
                        "CreateContainerConfigError",
                        f'{kind.lower()} "{ref.get("name")}" has no key "{ref.get("key")}"',
                    )
                env[name] = data[str(ref["key"])]
    return env


# ---------------------------------------------------------------- local rewrites

_LOCAL_HOSTPORT = re.compile(r"(?<![\w.-])(0\.0\.0\.0|127\.0\.0\.1|localhost|\[::\]):(\d{1,5})(?!\d)")
# <label>(.<label>)* .svc [.cluster.local] [:port]
_SVC_NAME = re.compile(
    r"(?<![\w.-])((?:[a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+)svc(?:\.cluster\.local)?\.?(?::(\d{1,5}))?(?![\w-])"
)


# <service>[.<namespace>]:port, a name the pod's resolver completes with its search domains
_SHORT_NAME = re.compile(
    r"(?<![\w.-])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)(?:\.([a-z0-9](?:[-a-z0-9]*[a-z0-9])?))?:(\d{1,5})(?![\w-])"
)


def rewrite_network(
    text: str,
    namespace: str,
    pod: str,
    own_ports: Mapping[int, int],
    addresses: Addresses,
    services: Collection[str] = (),
) -> str:
    """Cluster DNS names → 127.0.0.1 (pod names carry their host ports); own listen ports → host ports.
    `services`: the Services of the pod's namespace, whose short names (`<svc>:port`,
    `<svc>.<namespace>:port`) resolve as through the pod's DNS search path."""

    def svc(m: re.Match[str]) -> str:
        labels = m[1].rstrip(".").split(".")
        port = m[3]
        if len(labels) == 3 and port is not None:  # <pod>.<headless service>.<namespace>
            return f"{POD_IP}:{addresses.pod_port(labels[2], labels[0], int(port))}"
        return POD_IP if port is None else f"{POD_IP}:{port}"

    def short(m: re.Match[str]) -> str:
        if m[1] in services and m[2] in (None, namespace):
            return f"{POD_IP}:{m[3]}"
        return m[0]

    def local(m: re.Match[str]) -> str:
        port = int(m[2])
        if port in own_ports:
            return f"{m[1]}:{own_ports[port]}"
        return m[0]

    return _LOCAL_HOSTPORT.sub(local, _SHORT_NAME.sub(short, _SVC_NAME.sub(svc, text)))


def rewrite_paths(text: str, mounts: Sequence[tuple[str, Path]]) -> str:
    """Every mountPath at a path boundary → its local directory, in one pass (longest path first, and
    a replaced path is never rewritten again, e.g. by a `/tmp` mount when the local dir is in /tmp)."""
    if not mounts:
        return text
    local = {(mp.rstrip("/") or "/"): str(d) for mp, d in mounts}
    alternatives = "|".join(re.escape(mp) for mp in sorted(local, key=len, reverse=True))
    pattern = re.compile(r"(?:(?<![\w./-])|(?<=://))(" + alternatives + r")(?=/|$|[^\w.-])")
    return pattern.sub(lambda m: local[m[1]], text)


# ---------------------------------------------------------------- the whole container


def _declares_token(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    mounted = {str(m.get("name")) for m in container.get("volumeMounts") or []}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if vol.get("name") not in mounted:
            continue
        for src in (vol.get("projected") or {}).get("sources") or []:
            if "serviceAccountToken" in src:
                return True
    return False


def container_ports(container: Mapping[str, Any]) -> dict[str, int]:
    """containerPort by name (unnamed ports by their number as text)."""
    out: dict[str, int] = {}
    for p in container.get("ports") or []:
        number = int(p["containerPort"])
        out[str(p.get("name") or number)] = number
    return out


def pod_ports(pod: Mapping[str, Any]) -> dict[str, int]:
    """Every containerPort of the pod's containers by name (what a named targetPort refers to)."""
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        out.update(container_ports(c))
    return out


def resolve_port(pod: Mapping[str, Any], port: int | str) -> int | None:
    """A probe's or Service's port (number or name) → the containerPort number."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    return pod_ports(pod).get(str(port))


def build_launch(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    mounts: Mapping[str, Path],
    addresses: Addresses,
    commands: Mapping[str, str],
    images: Mapping[str, Image],
    base_env: Mapping[str, str],
    kubeconfig: Path | None,
    cwd: Path,
    services: Collection[str] = (),
) -> Launch:
    """What to exec for `container` of `pod`; `mounts` maps each of its mountPaths to a local path."""
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    env = container_env(pod, container, config_maps, secrets)
    command = [expand(str(x), env) for x in container.get("command") or []]
    args = [expand(str(x), env) for x in container.get("args") or []]
    ref = str(container.get("image", "")).split("@")[0]
    repo = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    image = images.get(repo) or images.get(repo.rsplit("/", 1)[-1]) or Image()
    if not command:
        if not image.entrypoint:
            raise LaunchError("ErrImageNeverPull", f"no command and no local entrypoint for image {ref}")
        command = list(image.entrypoint)
    exe = commands.get(command[0]) or commands.get(command[0].rsplit("/", 1)[-1])
    if exe is None:
        raise LaunchError("RunContainerError", f"no local executable for command {command[0]!r}")
    own_ports = {
        number: addresses.pod_port(namespace, name, number) for number in container_ports(container).values()
    }
    # A volume mounted over an image directory hides it, as in a container.
    paths = {**image.paths, **mounts}
    ordered_mounts = sorted(paths.items(), key=lambda kv: len(kv[0]), reverse=True)

    def local(text: str) -> str:
        return rewrite_paths(
            rewrite_network(text, namespace, name, own_ports, addresses, services), ordered_mounts
        )

    final_env = {**base_env, **image.env}
    final_env["HOSTNAME"] = name
    for k, v in env.items():
        v = local(v)
        if k.upper().endswith("PORT") and v.isdigit() and int(v) in own_ports:
            v = str(own_ports[int(v)])
        final_env[k] = v
    if kubeconfig is not None and _declares_token(pod, container):
        final_env["KUBECONFIG"] = str(kubeconfig)
    working_dir = container.get("workingDir")
    return Launch(
        container=str(container["name"]),
        argv=[exe, *(local(a) for a in command[1:]), *(local(a) for a in args)],
        env=final_env,
        cwd=Path(local(str(working_dir))) if working_dir else cwd,
        ports=own_ports,
    )
