"""Expand a packaged SAM template for an endpoint without the transform.

moto_server's CloudFormation does not run the AWS::Serverless-2016-10-31
transform and lacks some resource types. This script, run with the SAM CLI's
own Python (it brings aws-sam-translator), expands the transform locally as
CloudFormation would, then leaves out the resources of the types the endpoint
cannot create and every resource, output and condition-free reference that
depends on them, so that the rest deploys as it would in an account.

    python expand.py packaged.yaml expanded.json Key=Value ...

It writes the expanded template and prints one JSON object: the resource
types left out, with the reason, and the logical ids removed.
"""

import json
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

# Types moto's CloudFormation cannot create, and why they are left out.
UNSUPPORTED = {
    "AWS::CloudWatch::Alarm": "moto's CloudFormation has no model for alarms",
    "AWS::Lambda::EventInvokeConfig": "moto's CloudFormation has no model for it",
    "AWS::ApplicationAutoScaling::ScalableTarget": "moto's CloudFormation has no model for it",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "moto's CloudFormation has no model for it",
}


def refs(node):
    """Yield every logical id that node refers to (Ref, GetAtt, Sub)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "Ref" and isinstance(v, str):
                yield v
            elif k == "Fn::GetAtt":
                yield v[0] if isinstance(v, list) else v.split(".")[0]
            elif k == "Fn::Sub":
                text = v[0] if isinstance(v, list) else v
                for part in text.split("${")[1:]:
                    yield part.split("}")[0].split(".")[0]
                if isinstance(v, list):
                    yield from refs(v[1])
            else:
                yield from refs(v)
            if k == "DependsOn":
                yield from ([v] if isinstance(v, str) else v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def leave_out(template):
    """Remove unsupported resources and what depends on them."""
    resources = template["Resources"]
    removed = {k for k, r in resources.items() if r["Type"] in UNSUPPORTED}
    types = {}
    changed = True
    while changed:
        changed = False
        for k, r in resources.items():
            if k not in removed and set(refs(r)) & removed:
                removed.add(k)
                changed = True
    for k in sorted(removed):
        t = resources[k]["Type"]
        types.setdefault(t, UNSUPPORTED.get(t, "refers to a resource left out"))
        del resources[k]
    outputs = template.get("Outputs", {})
    for k in [k for k, o in outputs.items() if set(refs(o)) & removed]:
        del outputs[k]
    return types, sorted(removed)


def main(argv):
    src, dst = argv[1], argv[2]
    params = dict(a.split("=", 1) for a in argv[3:])
    with open(src, encoding="utf-8") as f:
        template = yaml_parse(f.read())
    for name, p in template.get("Parameters", {}).items():
        if name not in params and "Default" in p:
            params[name] = p["Default"]
    params.setdefault("AWS::Region", "us-east-1")
    params.setdefault("AWS::Partition", "aws")
    params.setdefault("AWS::AccountId", "000000000000")
    expanded = Translator({}, Parser()).translate(template, parameter_values=params)
    types, ids = leave_out(expanded)
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(expanded, f, indent=1)
    print(json.dumps({"types_left_out": types, "resources_left_out": ids}))


if __name__ == "__main__":
    main(sys.argv)
