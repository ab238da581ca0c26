# The SAM CLI: the real `sam` on template.yaml, in CI, and a
# deployment to the local endpoint that runs what it deployed.
#
#   make sam-cli        installs the pinned aws-sam-cli in $(SAM_VENV) (from PyPI)
#   make sam            sam validate --lint, sam build, static aarch64 bootstraps; JSON last line
#   make deploy-local   make sam, then deploy to the local endpoint (moto's CloudFormation), tick the
#                       controller through the deployed schedule, send a batch through the deployed
#                       queue into MariaDB, sam delete; the same for the controller stack and two
#                       consumer stacks (stacks/), redeployed after a delete; JSON last line
#                       (see docs/controller.md)

SAM_VERSION := 1.170.0
SAM_VENV := .cache/sam-$(SAM_VERSION)
SAM := $(SAM_VENV)/bin/sam
SAMDEPLOY_FLAGS ?=

.PHONY: sam-cli sam deploy-local

## sam-cli: the pinned SAM CLI in its own virtual environment (it brings its own boto3 and cfn-lint).
sam-cli: $(SAM)

$(SAM):
	python3 -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==$(SAM_VERSION)

## sam: sam validate --lint, sam build (makefile build method, no Docker), each bootstrap a static aarch64 ELF; JSON last line.
sam: $(SAM)
	$(GO) run ./internal/e2e/samdeploy -sam $(SAM) $(SAMDEPLOY_FLAGS)

TEST_E2E += deploy-local

## deploy-local: sam, then deploy to the local endpoint, run the deployed functions under the RIE, sam delete; JSON last line.
deploy-local: $(SAM) deploy-local-emulator
	$(GO) run ./internal/e2e/samdeploy -sam $(SAM) -deploy -stacks $(SAMDEPLOY_FLAGS)

# The bootstraps are built for arm64; on another machine they run under
# QEMU's user-mode emulator (Debian's qemu-user-static).
.PHONY: deploy-local-emulator
deploy-local-emulator:
	@if [ "$$(uname -m)" != aarch64 ] && ! command -v qemu-aarch64-static >/dev/null; then \
		apt-get install -y qemu-user-static >/dev/null || { apt-get update >/dev/null && apt-get install -y qemu-user-static >/dev/null; }; \
	fi
