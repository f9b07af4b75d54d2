"""User handlers: every change, resume and timer tick runs one reconcile pass (users.py); deletion
removes the user's credential, ACLs and quotas from its cluster first (kopf's finalizer)."""

from __future__ import annotations

import os
from typing import Any

import kopf

from .. import GROUP, VERSION, users
from .runtime import Runtime, now

RESYNC_SECONDS = float(os.environ.get("BROOK_OPERATOR_USER_RESYNC_SECONDS", "60"))


async def _reconcile(body: kopf.Body, patch: kopf.Patch, memo: Runtime) -> None:
    async with memo.lock("user", body.metadata.namespace or "", body.metadata.name or ""):
        new = await users.reconcile_user(
            body,
            kube=memo.kube,
            admin_for=memo.admins.get,
            template=memo.settings.bootstrap_template,
            now=now(),
            verify=memo.settings.verify_hostname,
        )
    patch.status.update(new)


@kopf.on.create(GROUP, VERSION, "users")
@kopf.on.update(GROUP, VERSION, "users")
@kopf.on.resume(GROUP, VERSION, "users")
async def user_changed(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **_: Any) -> None:
    await _reconcile(body, patch, memo)


@kopf.timer(GROUP, VERSION, "users", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def user_resync(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **_: Any) -> None:
    """Drift (a credential or ACL removed behind the operator's back) and certificate renewal."""
    await _reconcile(body, patch, memo)


@kopf.on.delete(GROUP, VERSION, "users")
async def user_deleted(body: kopf.Body, memo: Runtime, logger: kopf.Logger, **_: Any) -> None:
    async with memo.lock("user", body.metadata.namespace or "", body.metadata.name or ""):
        try:
            message = await users.delete_user(
                body,
                kube=memo.kube,
                admin_for=memo.admins.get,
                template=memo.settings.bootstrap_template,
                verify=memo.settings.verify_hostname,
            )
        except Exception as e:  # the cluster is unreachable: retry, the user must not stay behind
            raise kopf.TemporaryError(f"cannot remove the user from its cluster yet: {e}", delay=10) from e
    logger.info(message)
