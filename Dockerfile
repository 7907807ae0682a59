# apns-mock in a container. Build: docker build -t apns-mock .
FROM swift:6.3-bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        pkg-config libnghttp2-dev libssl-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
RUN swift build -c release --product apns-mock --static-swift-stdlib \
    && cp "$(swift build -c release --show-bin-path)/apns-mock" /usr/local/bin/apns-mock

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libnghttp2-14 libssl3 ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/apns-mock /usr/local/bin/apns-mock
WORKDIR /app
EXPOSE 2197 2198 2195 2196
ENTRYPOINT ["apns-mock"]
CMD ["serve", "--host", "0.0.0.0", "--admin-host", "0.0.0.0", "--broadcast-host", "0.0.0.0", "--certs", "/app/certs"]
