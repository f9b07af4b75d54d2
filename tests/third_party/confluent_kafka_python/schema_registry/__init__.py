# Not upstream's (its tests/integration/schema_registry has no __init__.py): makes the vendored tree a
# package, so its modules have names of their own; conftest.py also imports it as
# tests.integration.schema_registry, the name upstream's tests and _pb2 modules import it by.
