"""How the `brook` command ends on a user's mistake (a bad flag, an unusable directory, a broker id
taken): one line on stderr naming what to change, exit status 2, never a traceback. Its own module so
that the light client commands (cli.py), the server's (cli_server.py, cli_security.py) and `brook dev`
share it without importing one another."""

from __future__ import annotations

import sys
from typing import NoReturn


def fail(message: str) -> NoReturn:
    print(f"brook: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)
