# Image of the coolant worker (and of every other `coolant` command: probe, alerts, status, ...).
#   docker build -t coolant .
#   docker run --rm --network host -e KAFKA_BOOTSTRAP=127.0.0.1:9092 -e REDIS_URL=redis://127.0.0.1:6379/0 \
#       -v "$PWD/examples:/config:ro" coolant
# BASE_IMAGE is any Debian-like image with Python 3.11+ and its venv module. Without a registry,
# scripts/docker-local builds a local one from Debian packages (coolant-local/python:3.11) and passes it here.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/coolant/bin:$PATH

# Dependencies first, in their own layer: rebuilt only when pyproject.toml changes.
COPY pyproject.toml /src/pyproject.toml
RUN python3 -m venv /opt/coolant \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/src/pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
 && pip install -q -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY README.md /src/README.md
COPY coolant /src/coolant
RUN pip install -q --no-deps /src \
 && rm -rf /src \
 && useradd --uid 10001 --create-home coolant \
 && mkdir -p /var/lib/coolant \
 && chown coolant:coolant /var/lib/coolant

# Working directory = where the worker keeps local state (its --data-dir, .local/worker, lives under it).
WORKDIR /var/lib/coolant
USER coolant
# The worker serves /healthz on --web-port (6066 unless the config or the command says otherwise);
# set COOLANT_HEALTH_URL when it listens elsewhere. Other commands (probe, alerts) have no /healthz:
# run them with --no-healthcheck.
ENV COOLANT_HEALTH_URL=http://127.0.0.1:6066/healthz
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['COOLANT_HEALTH_URL'], timeout=4)"]
# exec form: coolant is PID 1 and receives SIGTERM itself (the worker and the prober shut down cleanly on it)
ENTRYPOINT ["coolant"]
CMD ["worker", "--config", "/config/litellm.yaml"]
