"""A directory shaped like Apache Kafka's distribution (bin/, libs/) over the jars scripts/setup-jvm
fetched, for programs that expect KAFKA_PATH: librdkafka's tests run $KAFKA_PATH/bin/kafka-topics.sh,
kafka-acls.sh and kafka-run-class.sh (0098 compiles its Java helper against libs/kafka-clients-*.jar).

    python -m tests.support.kafka_dist DIR     # writes DIR/bin/*.sh and DIR/libs/*.jar; KAFKA_PATH=DIR
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .jvm import JVM_OPTS, TOOLS, classpath, java_bin


def install(root: Path) -> Path:
    """Writes ROOT/bin/kafka-run-class.sh, a ROOT/bin/<tool>.sh for each of Kafka's tools Brook's tests
    use, and links Kafka's jars into ROOT/libs; returns ROOT."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "libs").mkdir(exist_ok=True)
    jars = classpath().split(":")
    for jar in map(Path, jars):
        link = root / "libs" / jar.name
        if not link.exists():
            link.symlink_to(jar)
    opts = " ".join(map(shlex.quote, [*JVM_OPTS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]))
    run_class = root / "bin" / "kafka-run-class.sh"
    # As Kafka's own: the caller's CLASSPATH first (librdkafka's java/run-class.sh sets it), then the jars.
    run_class.write_text(
        "#!/bin/sh\n"
        f'exec {shlex.quote(java_bin())} {opts} -cp "${{CLASSPATH:+$CLASSPATH:}}{":".join(jars)}" "$@"\n'
    )
    run_class.chmod(0o755)
    for tool, cls in TOOLS.items():
        script = root / "bin" / f"{tool}.sh"
        script.write_text(f'#!/bin/sh\nexec "$(dirname "$0")/kafka-run-class.sh" {cls} "$@"\n')
        script.chmod(0o755)
    return root


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(install(Path(sys.argv[1])))
