"""The `brook` command for people: topics, groups, the cluster, ACLs, SCRAM users, produce and consume,
over the Kafka protocol with confluent-kafka (so it works against any Kafka-compatible cluster), and
schemas in a schema registry over its REST API.
brook.cli_server adds `brook broker` and `brook dev up` (the server side) to this application."""

from __future__ import annotations

import typer

from . import acls, cluster, groups, records, schemas, topics, users

app = typer.Typer(
    name="brook",
    help="Brook: a Kafka-compatible broker, and a client for any Kafka cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(topics.app, name="topic")
app.add_typer(groups.app, name="group")
app.add_typer(cluster.app, name="cluster")
app.add_typer(acls.app, name="acl")
app.add_typer(users.app, name="user")
app.add_typer(schemas.app, name="schema")
app.command("produce")(records.produce)
app.command("consume")(records.consume)
