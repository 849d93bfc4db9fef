# Local stand-in for the official redis:7 image, built by scripts/docker-local: Debian bookworm's redis-server.
# Like the official image, the command is `redis-server [options]`; run it with `--network host` and bind 127.0.0.1.
ARG DEBIAN_IMAGE=coolant-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
USER redis
WORKDIR /var/lib/redis
CMD ["redis-server", "--bind", "127.0.0.1", "--port", "6379", "--save", "", "--appendonly", "no"]
