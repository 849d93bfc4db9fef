# Local stand-in for python:3.11-slim, built by scripts/docker-local from the debootstrapped Debian base:
# Debian bookworm's Python 3.11 with venv (the coolant Dockerfile installs into a venv on either base).
ARG DEBIAN_IMAGE=coolant-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
