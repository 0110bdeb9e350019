# emaildata: Kubernetes-native email data service.
#
#   make run    local control plane + CRDs + manager (+ REST API), file-backed store;
#               ARGS=--executor=job runs lists as Jobs (real Job controller, pods as processes);
#               ARGS=--store=s3 keeps the store on a local S3-compatible server (SeaweedFS);
#               CONFIG=path reads a Configuration (docs/configuration.md), e.g. CONFIG=hack/localstack/configuration.yaml
#   make test   generated files check, go vet, unit, envtest integration and e2e tests

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
CONTROLLER_GEN ?= $(GO) tool controller-gen
IMG ?= emaildata:dev
# Go test flags; CI may add -v.
TESTFLAGS ?=
LOCAL_DIR ?= $(CURDIR)/.local
# Where make run builds the worker and the local stack.
RUN_BIN ?= $(CURDIR)/bin

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# The Helm chart renders the same CRDs and manager rules from its own copy.
	rm -f charts/emaildata/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/emaildata/files/crds/
	cp config/rbac/role.yaml charts/emaildata/files/rbac/manager-role.yaml

.PHONY: generate
generate: ## Generate deepcopy code from markers.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: samples
samples: ## Render the sample ConfigMap that kustomize's configMapGenerator makes, for kubectl apply -f.
	./hack/render-samples.sh

.PHONY: docs
docs: ## Generate docs/configuration.md from the Configuration type (api/config/v1alpha1).
	$(GO) run ./hack/configdocs > docs/configuration.md

.PHONY: schema
schema: ## Generate the chart's values.schema.json (its config block from api/config/v1alpha1).
	$(GO) run ./hack/configschema > charts/emaildata/values.schema.json

.PHONY: verify-generated
verify-generated: generate manifests samples docs schema ## Fail when committed generated files are stale.
	@if ! git diff --quiet -- api config charts/emaildata/files charts/emaildata/values.schema.json docs/configuration.md; then \
		echo "generated files are stale; run 'make generate manifests samples docs schema' and commit:"; \
		git --no-pager diff --stat -- api config charts/emaildata/files charts/emaildata/values.schema.json docs/configuration.md; exit 1; fi
	@if [ -n "$$(git status --porcelain --untracked-files=all -- api config charts/emaildata/files charts/emaildata/values.schema.json docs/configuration.md)" ]; then \
		echo "untracked generated files; commit them:"; git status --porcelain -- api config charts/emaildata/files charts/emaildata/values.schema.json docs/configuration.md; exit 1; fi
	@# go.mod lists every direct dependency as direct (hack/compare is its own module).
	@for m in . hack/compare; do \
		if ! d=$$(cd $$m && $(GO) mod tidy -diff 2>&1); then \
			echo "$$m/go.mod is not tidy; run 'go mod tidy' there and commit:"; echo "$$d"; exit 1; fi; done

.PHONY: fmt
fmt:
	$(GO) fmt ./...

.PHONY: vet
vet:
	$(GO) vet ./...

.PHONY: build
build: ## Build the manager, api and worker binaries into bin/.
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

.PHONY: envtest-assets
envtest-assets: ## Fetch (released, checksummed) or else build kube-apiserver, etcd, kube-controller-manager and kube-scheduler (cached in bin/k8s).
	./hack/envtest-assets.sh

.PHONY: s3-server
s3-server: ## Build the S3-compatible server (SeaweedFS) the tests and make run ARGS=--store=s3 use (cached in bin/s3).
	./hack/s3-server.sh >/dev/null

##@ Run and test

.PHONY: hooks
hooks: ## Point git at the repository's hooks (hack/git-hooks: the commit-msg subject check).
	@# Outside a git checkout (a tarball) there is nothing to install.
	@if command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1; then \
		git config core.hooksPath hack/git-hooks; fi

.PHONY: guide-docs
guide-docs: ## Regenerate the guide's generated parts (the field reference in docs/resources.md; docs/configuration.md while internal/kits/docs writes it).
	$(GO) test ./internal/kits/docs -run TestGeneratedDocs -update

# make run and make test install the repository's git hooks first.
run test: hooks

.PHONY: run
run: envtest-assets ## Run a local control plane, the CRDs, the manager and the API (CONFIG=file: a Configuration; ARGS=--executor=job: lists as Jobs and pods; --store=s3: an S3 store).
	CGO_ENABLED=0 $(GO) build -o "$(RUN_BIN)/" ./cmd/worker
	$(GO) build -o "$(RUN_BIN)/localstack" ./hack/localstack
	@if [[ " $(ARGS) " == *" --store=s3 "* || " $(ARGS) " == *" --store s3 "* ]]; then ./hack/s3-server.sh >/dev/null; fi
	@# Run the binary itself, not through go run, which exits 1 after Ctrl-C
	@# whatever the program's status; make would report that as an error.
	KUBEBUILDER_ASSETS="$$(./hack/envtest-assets.sh)" exec "$(RUN_BIN)/localstack" --dir "$(LOCAL_DIR)" --worker-dir "$(RUN_BIN)" $(if $(CONFIG),--config "$(CONFIG)") $(ARGS)

.PHONY: mail-servers
mail-servers: ## Install Postfix, postgrey, NSD, redis (apt), Exim and sendmail (unpacked into bin/mail) and Haraka (npm ci into bin/mail/haraka) for the real-MTA tests; needs root.
	@# Outside CI a machine without them (or without root) skips those tests, saying so.
	./hack/install-mail-servers.sh >/dev/null || [ "$$CI" != true ]

.PHONY: browser
browser: ## Install Chromium (apt) and axe-core (npm ci, pinned, into bin/browser) for the web console's browser test; needs root.
	@# Outside CI a machine without them (or without root) skips that test, saying so.
	./hack/install-browser.sh >/dev/null || [ "$$CI" != true ]

.PHONY: test
test: verify-generated vet envtest-assets mail-servers browser s3-server run-binaries ## Run all tests.
	KUBEBUILDER_ASSETS="$$(./hack/envtest-assets.sh)" EMAILDATA_S3_SERVER="$$(./hack/s3-server.sh)" $(GO) test $(TESTFLAGS) -timeout 30m ./...

.PHONY: run-binaries
run-binaries: ## Compile what make run builds, so that the tests that start make run find it in the build cache.
	@# On a fresh machine this compile is minutes of CPU; inside a test it raced
	@# the test's own deadline for the stack to come up while other packages ran.
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/worker
	$(GO) build -o /dev/null ./hack/localstack

.PHONY: bench
bench: ## Run the Go benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
