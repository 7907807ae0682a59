# apns-mock as a container image: a slim Debian runtime holding the binary (Swift's runtime linked
# in statically) and the two C libraries it links, running as an unprivileged user, configured by
# APNS_MOCK_* environment variables (docs/configuration.md), listening on Apple's ports.
#
#   docker build -t apns-mock:local .                      # builds apns-mock inside the Swift image
#   docker run --rm -p 2197:2197 -p 2198:2198 apns-mock:local
#
# Without the Swift image (no registry, or a binary already built): build the binary on a Debian 12
# (bookworm) machine, put it in prebuilt/, and build the `prebuilt` target; scripts/image does this
# with podman.
#
#   swift build -c release --static-swift-stdlib --product apns-mock
#   mkdir -p prebuilt && cp "$(swift build -c release --show-bin-path)/apns-mock" prebuilt/
#   docker build --target prebuilt -t apns-mock:local .
#
# The base images are build arguments, so that a machine without a registry can use local ones.
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        pkg-config libnghttp2-dev libssl-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The whole package (.dockerignore leaves out builds, virtualenvs and generated certificates):
# SwiftPM refuses a manifest whose targets, test targets included, have no folders.
COPY . .
RUN swift build -c release --product apns-mock --static-swift-stdlib \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/apns-mock" /out/apns-mock \
    && strip /out/apns-mock

# What the binary needs at run time and nothing else: libnghttp2, libssl (and libc, libstdc++,
# zlib, which the base has), the CA bundle for `apns-mock send` to Apple, and a user to run as.
FROM ${RUNTIME_IMAGE} AS runtime-base
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libnghttp2-14 libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
        /usr/share/doc/* /usr/share/man/* \
    && groupadd --system --gid 10001 apns-mock \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/apns-mock --shell /usr/sbin/nologin apns-mock \
    && install -d -o 10001 -g 10001 -m 0755 /var/lib/apns-mock /var/lib/apns-mock/certs
# Listen on every interface, on Apple's port 443 as well as 2197, so that in a compose network a
# client dialling https://api.push.apple.com/… reaches the mock unmodified. Binding 443 without
# privilege needs net.ipv4.ip_unprivileged_port_start <= 443, which Docker sets (0) in every
# container; podman needs --sysctl net.ipv4.ip_unprivileged_port_start=0 (the compose file sets it),
# or APNS_MOCK_ADDITIONAL_PORTS=none.
ENV APNS_MOCK_HOST=0.0.0.0 \
    APNS_MOCK_ADMIN_HOST=0.0.0.0 \
    APNS_MOCK_BROADCAST_HOST=0.0.0.0 \
    APNS_MOCK_PROXY_HOST=0.0.0.0 \
    APNS_MOCK_ADDITIONAL_PORTS=443 \
    APNS_MOCK_CERTS=/var/lib/apns-mock/certs
WORKDIR /var/lib/apns-mock
USER 10001:10001
EXPOSE 443 2197 2198 2195 2196
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 CMD ["apns-mock", "healthcheck", "--timeout", "2"]
ENTRYPOINT ["apns-mock"]
CMD ["serve"]

# The runtime with a binary built outside the image (prebuilt/apns-mock, mode 0755).
FROM runtime-base AS prebuilt
COPY prebuilt/apns-mock /usr/local/bin/apns-mock

# The default target: the runtime with the binary the build stage made.
FROM runtime-base AS runtime
COPY --from=build /out/apns-mock /usr/local/bin/apns-mock
