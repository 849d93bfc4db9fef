# Image of the coolant worker (and of every other `coolant` command: probe, alerts, status, ...).
#   docker build -t coolant .
#   docker run --rm --network host -e KAFKA_BOOTSTRAP=127.0.0.1:9092 -e REDIS_URL=redis://127.0.0.1:6379/0 \
#       -v "$PWD/examples:/config:ro" coolant
# BASE_IMAGE is any Debian-like image with Python 3.11+ and its venv module. Without a registry,
# scripts/docker-local builds a local one from Debian packages (coolant-local/python:3.11) and passes it here.
ARG BASE_IMAGE=python:3.11-slim

# coolant_native, the native replay backend (`coolant replay --backend`, `coolant tune --backend`): built in its
# own stage with a minimal Rust toolchain, so the image ships the wheel and no compiler.
FROM ${BASE_IMAGE} AS native
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CARGO_HOME=/opt/cargo RUSTUP_HOME=/opt/rustup \
    PATH=/opt/cargo/bin:$PATH
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends ca-certificates curl gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/* \
 && curl -sSf -o /tmp/rustup-init "https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init" \
 && chmod +x /tmp/rustup-init \
 && /tmp/rustup-init -y -q --profile minimal --default-toolchain stable \
 && rm /tmp/rustup-init
COPY native /src/native
RUN python3 -m venv /opt/build && /opt/build/bin/pip wheel -q --no-deps -w /wheels /src/native

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

COPY README.md MANIFEST.in /src/
COPY native /src/native
COPY coolant /src/coolant
COPY --from=native /wheels /wheels
# coolant itself (its optional Rust extension is skipped here: no cargo in this stage), then the native backend
# built above
RUN pip install -q --no-deps /src /wheels/*.whl \
 && python3 -c "import coolant_native" \
 && rm -rf /src /wheels \
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
