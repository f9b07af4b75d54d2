"""Probes as the kubelet runs them, against a pod whose containers are local processes: httpGet and
tcpSocket (gRPC probes as a TCP connect) to the container port's host port on 127.0.0.1, exec as a
local command in the container's environment. `timing` scales a probe to a shorter period."""

from __future__ import annotations

import asyncio
import contextlib
import math
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from .podspec import POD_IP, resolve_port

JSON = dict[str, Any]


def timing(probe: JSON, max_period: float | None) -> tuple[float, int, int, float, float]:
    """(period, failureThreshold, successThreshold, initialDelay, timeout) with the period capped at
    `max_period` and failureThreshold scaled so the same wall time (threshold x period) is tolerated."""
    period = float(probe.get("periodSeconds", 10))
    eff = min(period, max_period) if max_period else period
    failures = math.ceil(int(probe.get("failureThreshold", 3)) * period / eff)
    return (
        eff,
        failures,
        int(probe.get("successThreshold", 1)),
        float(probe.get("initialDelaySeconds", 0)),
        float(probe.get("timeoutSeconds", 1)),
    )


async def check(
    probe: JSON,
    pod: JSON,
    host_port: Callable[[int], int],
    session: aiohttp.ClientSession,
    commands: Mapping[str, str],
    env: Mapping[str, str] | None,
) -> bool:
    """One probe attempt; `host_port` maps a container port number to its host port."""

    def port_of(port: Any) -> int | None:
        number = resolve_port(pod, port) if port is not None else None
        return None if number is None else host_port(number)

    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "httpGet" in probe:
            h = probe["httpGet"]
            port = port_of(h.get("port"))
            if port is None:
                return False
            url = f"http://{POD_IP}:{port}{h.get('path') or '/'}"
            headers = {x["name"]: x["value"] for x in h.get("httpHeaders") or []}
            async with session.get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False
            ) as resp:
                await resp.read()
                return 200 <= resp.status < 400
        if "tcpSocket" in probe or "grpc" in probe:
            port = port_of((probe.get("tcpSocket") or probe.get("grpc") or {}).get("port"))
            if port is None:
                return False
            _r, writer = await asyncio.wait_for(asyncio.open_connection(POD_IP, port), timeout)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True
        if "exec" in probe:
            cmd = [str(x) for x in probe["exec"].get("command") or []]
            if not cmd or env is None:
                return False
            exe = commands.get(cmd[0]) or commands.get(cmd[0].rsplit("/", 1)[-1])
            if exe is None:
                return False
            proc = await asyncio.create_subprocess_exec(
                exe, *cmd[1:], env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                return await asyncio.wait_for(proc.wait(), timeout) == 0
            except TimeoutError:
                proc.kill()
                await proc.wait()
                return False
    except (OSError, TimeoutError, aiohttp.ClientError):
        return False
    return False
