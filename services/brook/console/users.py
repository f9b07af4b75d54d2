"""`brook user ...`: SCRAM credentials (AlterUserScramCredentials, DescribeUserScramCredentials), as
Kafka's `kafka-configs.sh --entity-type users --alter --add-config SCRAM-SHA-256=...` keeps them. The
brokers store a salted key, never the password."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from .common import DEFAULT_BOOTSTRAP as B
from .common import Bootstrap, ClientSettings, CommandError, Output, OutputOpt, admin, command, emit, result

app = typer.Typer(help="SCRAM users: set a password, list, delete.", no_args_is_help=True)

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
Mechanism = Annotated[str, typer.Option("--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512")]


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    if name.upper() not in MECHANISMS:
        raise CommandError(f"--mechanism must be {' or '.join(MECHANISMS)}, not '{name}'", 2)
    return ScramMechanism[name.upper().replace("-", "_")]


@app.command("set")
@command
def set_(
    name: str,
    mechanism: Mechanism = "SCRAM-SHA-512",
    iterations: Annotated[int, typer.Option("--iterations", min=4096, max=16384)] = 8192,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="read the password from stdin's first line")
    ] = False,
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Create a user's SCRAM credential or change its password (asked for unless --password-stdin)."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    mech = _mechanism(mechanism)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise CommandError("the password is empty", 2)
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(mech, iterations), password.encode())
    a = admin(bootstrap, x)  # referenced until its futures resolve
    result(a.alter_user_scram_credentials([upsert])[name], f"set {name}")
    print(f"set {mechanism.upper()} credential of {name} ({iterations} iterations)")


@app.command("list")
@command
def list_(
    names: Annotated[list[str] | None, typer.Argument(help="only these users")] = None,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Users with SCRAM credentials: mechanism and iterations (never a key)."""
    a = admin(bootstrap, x)
    if names:
        futs = a.describe_user_scram_credentials(list(names))
        described = {n: result(futs[n], f"describe {n}") for n in names}
    else:
        described = result(a.describe_user_scram_credentials(), "list users")
    rows = sorted(
        (user, info.mechanism.name.replace("_", "-"), info.iterations)
        for user, desc in described.items()
        for info in desc.scram_credential_infos
    )
    emit(
        output,
        [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows],
        ["USER", "MECHANISM", "ITERATIONS"],
        rows,
    )


@app.command("delete")
@command
def delete(
    name: str,
    mechanism: Annotated[
        str | None, typer.Option("--mechanism", "-m", help="only this mechanism's credential (default: all)")
    ] = None,
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Delete a user's SCRAM credentials (one mechanism's, or every one it has)."""
    from confluent_kafka.admin import UserScramCredentialDeletion

    a = admin(bootstrap, x)
    if mechanism is not None:
        mechs = [_mechanism(mechanism)]
    else:
        desc = result(a.describe_user_scram_credentials([name])[name], f"describe {name}")
        mechs = [info.mechanism for info in desc.scram_credential_infos]
    futs = a.alter_user_scram_credentials([UserScramCredentialDeletion(name, m) for m in mechs])
    result(futs[name], f"delete {name}")
    print(f"deleted {', '.join(m.name.replace('_', '-') for m in mechs)} credential of {name}")
