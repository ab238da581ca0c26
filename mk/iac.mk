# The template's static checks, in `make test`: cfn-lint (the SAM CLI's
# own, pinned with it) and an IaC security scan (checkov, pinned, in its
# own virtual environment). `sam validate --lint` runs in `make sam`.
#
#   make iac-scan    cfn-lint template.yaml; checkov on template.yaml and on
#                    its variant with ConsumerSink mysql (checkov leaves out
#                    the resources whose condition the defaults make false)

CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := .cache/checkov-$(CHECKOV_VERSION)
CHECKOV := $(CHECKOV_VENV)/bin/checkov
CHECKOV_FLAGS := --skip-download --compact --quiet

.PHONY: iac-scan

$(CHECKOV):
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)

TEST_E2E += iac-scan

## iac-scan: cfn-lint and checkov (0 failed; each skip has its reason beside the resource in template.yaml).
iac-scan: $(SAM) $(CHECKOV)
	$(SAM_VENV)/bin/cfn-lint template.yaml
	$(CHECKOV) -f template.yaml $(CHECKOV_FLAGS)
	mkdir -p .cache/iac-scan
	sed '/^  ConsumerSink:/,/Default:/s/Default: none/Default: mysql/' template.yaml > .cache/iac-scan/template.yaml
	grep -q 'Default: mysql' .cache/iac-scan/template.yaml
	$(CHECKOV) -f .cache/iac-scan/template.yaml $(CHECKOV_FLAGS)
