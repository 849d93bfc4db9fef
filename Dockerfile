# Image for the coolant worker (used by docker-compose.yml).
#   docker build -t coolant .
#   docker run --rm -e KAFKA_BOOTSTRAP=... -e REDIS_URL=... -v "$PWD/config:/config:ro" coolant
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY . /src
RUN pip install /src \
 && rm -rf /src \
 && useradd --uid 10001 --create-home coolant \
 && mkdir -p /var/lib/coolant \
 && chown coolant:coolant /var/lib/coolant

# Working directory = where the worker keeps local state (faust datadir / table stores).
WORKDIR /var/lib/coolant
USER coolant

CMD ["coolant", "worker", "--config", "/config/litellm.yaml"]
