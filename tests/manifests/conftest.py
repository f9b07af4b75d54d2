from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .support import CHART, ensure_helm, helm_env

# brook_operator lives in <repo>/operator (an installed package once pyproject lists it; until then,
# and for a checkout without `pip install -e`, make it importable here).
_OPERATOR = Path(__file__).resolve().parents[2] / "operator"
if str(_OPERATOR) not in sys.path:
    sys.path.insert(0, str(_OPERATOR))

Helm = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Run `helm ARGS...` (offline, project-local helm homes); returns the completed process."""
    binary = ensure_helm()
    env = helm_env(tmp_path_factory.mktemp("helm"))

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p

    return run


@pytest.fixture(scope="session")
def render(helm: Helm) -> Callable[..., str]:
    """`helm template brook charts/brook -n brook-system` with extra arguments; returns the YAML."""

    def run(*args: str) -> str:
        return helm("template", "brook", str(CHART), "--namespace", "brook-system", *args).stdout

    return run
