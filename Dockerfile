# One image for the broker (`brook`) and the operator (`brook-operator`); pods choose by command.
#   docker build -t ghcr.io/brook-dev/brook:0.1.0 .
FROM python:3.12-slim AS build
WORKDIR /src
RUN python -m venv /opt/brook
ENV PATH=/opt/brook/bin:$PATH
COPY pyproject.toml README.md ./
COPY services ./services
COPY operator ./operator
RUN pip install --no-cache-dir --upgrade pip \
 && pip install --no-cache-dir '.[operator,fast]'

FROM python:3.12-slim
LABEL org.opencontainers.image.title="brook" \
      org.opencontainers.image.description="Brook: a Kafka-compatible broker for Kubernetes, and its operator" \
      org.opencontainers.image.source="https://github.com/brook-dev/brook"
# A fixed non-root user; the pods' securityContext (runAsUser/fsGroup 10001) matches it.
RUN groupadd --system --gid 10001 brook \
 && useradd --system --uid 10001 --gid brook --home-dir /var/lib/brook --shell /usr/sbin/nologin brook \
 && mkdir -p /var/lib/brook /var/run/brook \
 && chown brook:brook /var/lib/brook /var/run/brook
COPY --from=build /opt/brook /opt/brook
ENV PATH=/opt/brook/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    BROOK_DATA_DIR=/var/lib/brook/data
USER 10001:10001
WORKDIR /var/lib/brook
# Kafka listener, metrics/health (broker); the operator's health endpoint.
EXPOSE 9092 9308 8080
# No ENTRYPOINT: the manifests set `command` (brook broker ... / brook-operator run / rack-init).
CMD ["brook", "--help"]
