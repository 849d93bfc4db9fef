# Local stand-in for the official apache/kafka image, built by scripts/docker-local from the Maven jars that
# scripts/kafka-local fetches. Single node, KRaft (combined broker+controller). Configured like apache/kafka:
# every KAFKA_FOO_BAR variable becomes `foo.bar` in server.properties (`__` -> `_`, `___` -> `-`), on top of
# defaults for 127.0.0.1:9092 (controller 9093); CLUSTER_ID names the cluster. Run with `--network host`.
ARG DEBIAN_IMAGE=coolant-local/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update -q \
 && mkdir -p /usr/share/man/man1 \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10002 --home-dir /var/lib/kafka --create-home kafka
COPY libs/ /opt/kafka/libs/
COPY log4j2.properties kafka-entrypoint /opt/kafka/
USER kafka
WORKDIR /var/lib/kafka
ENTRYPOINT ["/opt/kafka/kafka-entrypoint"]
