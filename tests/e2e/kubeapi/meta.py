"""Object metadata helpers: timestamps, name rules, label/field selectors, simple JSONPath."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from .errors import ApiError, FieldError

JSON = dict[str, Any]

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def timestamp(when: dt.datetime | None = None) -> str:
    """RFC 3339 with second precision and a Z, as metav1.Time serialises."""
    return (when or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def human_age(created: str | None) -> str:
    """`5s`, `3m`, `2h`, `4d`: kubectl's short duration style."""
    if not created:
        return "<unknown>"
    secs = int((now() - parse_timestamp(created)).total_seconds())
    secs = max(secs, 0)
    if secs < 120:
        return f"{secs}s"
    mins = secs // 60
    if mins < 10:
        s = secs % 60
        return f"{mins}m{s}s" if s else f"{mins}m"
    if mins < 180:
        return f"{mins}m"
    hours = mins // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def check_name(name: str, *, label: bool = False) -> list[FieldError]:
    """metadata.name rules: DNS-1123 subdomain (or label, for namespaces and services)."""
    if not name:
        return [FieldError("metadata.name", "Required value", "name or generateName is required")]
    errs: list[FieldError] = []
    limit = 63 if label else 253
    pattern, msg = (DNS1123_LABEL, LABEL_MSG) if label else (DNS1123_SUBDOMAIN, SUBDOMAIN_MSG)
    if len(name) > limit:
        errs.append(
            FieldError(
                "metadata.name", "Invalid value", f"must be no more than {limit} characters", name, True
            )
        )
    if not pattern.match(name):
        errs.append(FieldError("metadata.name", "Invalid value", msg, name, True))
    return errs


# ---------------------------------------------------------------- label selectors

Requirement = tuple[str, str, tuple[str, ...]]  # key, operator, values

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h` into requirements; 400 on syntax errors."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text or "")]
    reqs: list[Requirement] = []
    i = 0

    def fail() -> ApiError:
        return ApiError(400, f"unable to parse requirement: invalid label selector: {text!r}")

    while i < len(tokens):
        tok = tokens[i]
        if tok == ",":
            i += 1
            continue
        if tok == "!":
            if i + 1 >= len(tokens):
                raise fail()
            reqs.append((tokens[i + 1], "!", ()))
            i += 2
            continue
        key = tok
        op = tokens[i + 1] if i + 1 < len(tokens) else ","
        if op in ("=", "==", "!="):
            if i + 2 >= len(tokens) or tokens[i + 2] in (",", "(", ")"):
                value = ""
                i += 2
            else:
                value = tokens[i + 2]
                i += 3
            reqs.append((key, "!=" if op == "!=" else "=", (value,)))
        elif op in ("in", "notin"):
            if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                raise fail()
            j = i + 3
            values: list[str] = []
            while j < len(tokens) and tokens[j] != ")":
                if tokens[j] != ",":
                    values.append(tokens[j])
                j += 1
            if j >= len(tokens):
                raise fail()
            reqs.append((key, op, tuple(values)))
            i = j + 1
        elif op == ",":
            reqs.append((key, "exists", ()))
            i += 1
        else:
            raise fail()
    return reqs


def labels_match(reqs: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        value = labels.get(key)
        if op == "=" and value != values[0]:
            return False
        if op == "!=" and value == values[0]:
            return False
        if op == "in" and value not in values:
            return False
        if op == "notin" and present and value in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
    return True


def selector_from_label_selector(sel: JSON | None) -> str:
    """A metav1.LabelSelector (matchLabels/matchExpressions) as selector text, for Scale.status.selector."""
    if not sel:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op = str(expr.get("operator", "")).lower()
        key = expr.get("key", "")
        vals = ",".join(sorted(expr.get("values") or []))
        if op == "in":
            parts.append(f"{key} in ({vals})")
        elif op == "notin":
            parts.append(f"{key} notin ({vals})")
        elif op == "exists":
            parts.append(key)
        elif op == "doesnotexist":
            parts.append(f"!{key}")
    return ",".join(parts)


# ---------------------------------------------------------------- field selectors

FieldReq = tuple[str, bool, str]  # path, equal?, value


def parse_field_selector(text: str) -> list[FieldReq]:
    out: list[FieldReq] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), False, v.strip()))
        elif "==" in part:
            k, v = part.split("==", 1)
            out.append((k.strip(), True, v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), True, v.strip()))
        else:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{part}'")
    return out


def fields_match(reqs: list[FieldReq], obj: JSON) -> bool:
    for path, equal, value in reqs:
        found = dotted(obj, path)
        text = "" if found is None else (str(found).lower() if isinstance(found, bool) else str(found))
        if (text == value) != equal:
            return False
    return True


def dotted(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


# ---------------------------------------------------------------- JSONPath (the subset CRDs use)

_JP_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+|\*)\]|\['([^']+)'\]|\[\?\(@\.([\w.]+)==['\"]([^'\"]*)['\"]\)\]")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Evaluate `.status.replicas`, `.spec.containers[0].image`,
    `.status.conditions[?(@.type=="Ready")].status` (the JSONPath subset printer columns use)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _JP_TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        key = m.group(1) or m.group(3)
        for item in current:
            if key is not None:
                if isinstance(item, dict) and key in item:
                    nxt.append(item[key])
            elif m.group(2) is not None:
                if isinstance(item, list):
                    if m.group(2) == "*":
                        nxt.extend(item)
                    elif int(m.group(2)) < len(item):
                        nxt.append(item[int(m.group(2))])
            elif isinstance(item, list):
                fpath, fval = m.group(4), m.group(5)
                nxt.extend(e for e in item if str(dotted(e, fpath)) == fval)
        current = nxt
    return current


def set_dotted(obj: JSON, path: str, value: Any) -> None:
    """Set `.spec.replicas` style paths, creating maps on the way."""
    parts = [p for p in path.strip().lstrip(".").split(".") if p]
    cur = obj
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[p] = nxt
        cur = nxt
    cur[parts[-1]] = value
