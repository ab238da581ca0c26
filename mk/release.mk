# A release a team can pin: every binary carries its version (linked into
# internal/version), each part is an archive named by version and
# architecture, and SHA256SUMS lists them all.
#
#   make release [VERSION=v0.1.0] [RELEASE_ARCHES='arm64 amd64'] [RELEASE_PARTS='...']
#
# writes into dist/<version>/ (not committed):
#   controller_<v>_linux_<arch>.zip       the controller's bootstrap (Lambda, provided.al2023)
#   sqs-consumer_<v>_linux_<arch>.zip     the SQS consumer's bootstrap
#   kafka-consumer_<v>_linux_<arch>.zip   the Kafka consumer's bootstrap
#   worker-context_<v>_linux_<arch>.tar.gz  the worker image's build context
#                                         (infra/worker/Dockerfile.release, the binary, LICENSE)
#   sluice_<v>_linux_<arch>.tar.gz        the CLI with LICENSE, CHANGELOG.md, README.md
#   SHA256SUMS                            sha256sum -c SHA256SUMS checks them

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
RELEASE_ARCHES ?= arm64 amd64
RELEASE_PARTS ?= controller sqs-consumer kafka-consumer worker-context sluice
RELEASE_DIR ?= dist/$(VERSION)
RELEASE_LDFLAGS := -s -w -X github.com/sluice-dev/sluice/internal/version.tag=$(VERSION)
RELEASE_TAR := tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -czf

RELEASE_FILES = $(foreach a,$(RELEASE_ARCHES),$(foreach p,$(RELEASE_PARTS),$(RELEASE_DIR)/$(p)_$(VERSION)_linux_$(a).$(if $(filter worker-context sluice,$(p)),tar.gz,zip)))
RELEASE_WORK = $(RELEASE_DIR)/.work/$(notdir $@)

.PHONY: release release-files

## release: versioned archives of the bootstraps, the worker image's context and the CLI for linux/arm64 and amd64, with SHA256SUMS, in dist/<version>/.
release:
	@case "$(VERSION)" in ""|*/*|*" "*) echo "make release: VERSION=$(VERSION) is not a usable version" >&2; exit 2;; esac
	rm -rf $(RELEASE_DIR)
	$(MAKE) --no-print-directory release-files VERSION=$(VERSION)
	rm -rf $(RELEASE_DIR)/.work
	cd $(RELEASE_DIR) && sha256sum $(notdir $(RELEASE_FILES)) > SHA256SUMS
	@echo "release $(VERSION): $(RELEASE_DIR)"; cat $(RELEASE_DIR)/SHA256SUMS

release-files: $(RELEASE_FILES)

# release-build OUT PKG ARCH [TAGS]: a static linux binary with the version linked in.
define release-build
	CGO_ENABLED=0 GOOS=linux GOARCH=$(3) $(GO) build -trimpath $(4) -ldflags='$(RELEASE_LDFLAGS)' -o $(1) $(2)
endef

# release-lambda PKG: the target's bootstrap zipped as Lambda takes it.
define release-lambda
	mkdir -p $(RELEASE_WORK)
	$(call release-build,$(RELEASE_WORK)/bootstrap,$(1),$*,-tags lambda.norpc)
	touch -d @0 $(RELEASE_WORK)/bootstrap
	cd $(RELEASE_WORK) && zip -q -X $(abspath $@) bootstrap
endef

$(RELEASE_DIR)/controller_$(VERSION)_linux_%.zip:
	$(call release-lambda,./functions/controller)

$(RELEASE_DIR)/sqs-consumer_$(VERSION)_linux_%.zip:
	$(call release-lambda,./functions/sqs-consumer)

$(RELEASE_DIR)/kafka-consumer_$(VERSION)_linux_%.zip:
	$(call release-lambda,./functions/kafka-consumer)

$(RELEASE_DIR)/worker-context_$(VERSION)_linux_%.tar.gz:
	mkdir -p $(RELEASE_WORK)
	$(call release-build,$(RELEASE_WORK)/worker,./functions/worker,$*)
	cp infra/worker/Dockerfile.release $(RELEASE_WORK)/Dockerfile
	cp LICENSE $(RELEASE_WORK)/
	$(RELEASE_TAR) $@ -C $(RELEASE_WORK) Dockerfile LICENSE worker

$(RELEASE_DIR)/sluice_$(VERSION)_linux_%.tar.gz:
	mkdir -p $(RELEASE_WORK)
	$(call release-build,$(RELEASE_WORK)/sluice,./cmd/sluice,$*)
	cp LICENSE CHANGELOG.md README.md $(RELEASE_WORK)/
	$(RELEASE_TAR) $@ -C $(RELEASE_WORK) sluice LICENSE CHANGELOG.md README.md
