# syntax=docker/dockerfile:1
# One image, three binaries: /manager (the default entrypoint), /api, and
# /worker (the command of the worker Jobs the manager creates).
#
#   docker build -t emaildata:dev .          (make docker-build)
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .

# The builder runs on the build host's platform and cross-compiles.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS builder
# Set by BuildKit to the platform being built (--platform).
ARG TARGETARCH
WORKDIR /src

# Modules first, so that source edits do not invalidate this layer. The
# golang image has GOPATH=/go, so the module cache is /go/pkg/mod, and
# GOCACHE is /root/.cache/go-build.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/

RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/manager ./cmd/api ./cmd/worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/manager /manager
COPY --from=builder /out/api /api
COPY --from=builder /out/worker /worker
USER 65532:65532
ENTRYPOINT ["/manager"]
