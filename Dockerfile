# syntax=docker/dockerfile:1
#
# comm in a container: docker build -t comm . (see README: Container).
#
# Build stage: cgo, because the SQLite driver (mattn/go-sqlite3) is C.
# The golang image has gcc and glibc's headers; bookworm, so that the
# binary needs no newer glibc than the runtime stage has.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# .ci/dockerfile-build runs this same line outside a container.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build CGO_ENABLED=1 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/comm ./cmd/comm

# Runtime stage: glibc (the binary links it dynamically) and CA
# certificates (providers, SMTP relays, webhooks over https), nothing else.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 comm \
 && useradd --system --uid 10001 --gid comm --home-dir /var/lib/comm --no-create-home --shell /usr/sbin/nologin comm \
 && install -d -o comm -g comm -m 0700 /var/lib/comm
COPY --from=build /out/comm /usr/local/bin/comm
USER comm:comm
WORKDIR /var/lib/comm
# The settings are environment variables, not flags, so that docker run -e
# and compose can change any of them (a flag would win over them).
# SQLite and the generated key file live in the data dir: keep it on a
# volume. Listening on all interfaces turns off the local operator sign-in
# unless COMM_LOCAL_SIGNIN_ALLOW_REMOTE=true (or use COMM_OIDC_ISSUER).
ENV COMM_LISTEN=0.0.0.0:8080 \
    COMM_SMTP_LISTEN=0.0.0.0:2525 \
    COMM_DATA_DIR=/var/lib/comm
VOLUME ["/var/lib/comm"]
EXPOSE 8080 2525
STOPSIGNAL SIGTERM
ENTRYPOINT ["comm", "serve"]
