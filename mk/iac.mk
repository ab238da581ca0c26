# The template's static checks, in `make test`: cfn-lint (the SAM CLI's
# own, pinned with it) and an IaC security scan (checkov, pinned, in its
# own virtual environment). `sam validate --lint` runs in `make sam`.
#
#   make iac-scan    stacks/*.yaml built from template.yaml; cfn-lint on the
#                    three templates; checkov on them and on template.yaml's
#                    variant with ConsumerSink mysql (checkov leaves out the
#                    resources whose condition the defaults make false)
#   make stacks      builds stacks/controller.yaml and stacks/consumer.yaml

CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := .cache/checkov-$(CHECKOV_VERSION)
CHECKOV := $(CHECKOV_VENV)/bin/checkov
CHECKOV_FLAGS := --skip-download --compact --quiet

STACK_TEMPLATES := stacks/controller.yaml stacks/consumer.yaml

.PHONY: iac-scan stacks

## stacks: stacks/controller.yaml and stacks/consumer.yaml, built from template.yaml's pieces.
stacks:
	python3 stacks/build.py

$(CHECKOV):
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)

TEST_E2E += iac-scan

## iac-scan: stacks/ built from template.yaml, cfn-lint, checkov (0 failed; each skip has its reason beside its resource).
iac-scan: sam-cli $(CHECKOV)
	python3 stacks/build.py --check
	$(SAM_VENV)/bin/cfn-lint template.yaml $(STACK_TEMPLATES)
	mkdir -p .cache/iac-scan
	sed '/^  ConsumerSink:/,/Default:/s/Default: none/Default: mysql/' template.yaml > .cache/iac-scan/template.yaml
	grep -q 'Default: mysql' .cache/iac-scan/template.yaml
	$(CHECKOV) $(addprefix -f ,template.yaml $(STACK_TEMPLATES) .cache/iac-scan/template.yaml) $(CHECKOV_FLAGS)
