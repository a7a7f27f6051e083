"""Just enough CloudFormation and IAM to ask a template's policies a question: "is this call allowed?".

``resolve`` evaluates the intrinsic functions the templates use (Ref, Fn::Sub, Fn::Join, Fn::Split,
Fn::If with the template's conditions, Fn::GetAtt as a stand-in ARN) for given parameter values;
``allowed`` evaluates the resolved Allow statements for one action on one resource with a request
context, covering the condition operators the templates use. It is deliberately small and strict: an
operator or function it does not know fails the test rather than passing it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping
from typing import Any

PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "999999999999", "AWS::Region": "eu-west-1",
          "AWS::StackName": "hps-hub", "AWS::NoValue": None}  # fmt: skip
NO_VALUE = object()


class Template:
    def __init__(self, template: Mapping[str, Any], params: Mapping[str, str]) -> None:
        self.template = template
        declared: Mapping[str, Any] = template.get("Parameters", {})
        unknown = set(params) - set(declared)
        assert not unknown, f"parameters the template does not declare: {unknown}"
        self.params: dict[str, Any] = {}
        for name, spec in declared.items():
            value = params.get(name, spec.get("Default"))
            assert value is not None, f"parameter {name} has no default and was not given"
            if spec["Type"] == "CommaDelimitedList":
                value = [v.strip() for v in str(value).split(",")] if isinstance(value, str) else list(value)
            if "AllowedPattern" in spec and spec["Type"] == "String":
                assert re.fullmatch(spec["AllowedPattern"], str(value)), f"{name}={value!r} breaks its pattern"
            self.params[name] = value
        self.conditions = {k: self.resolve(v) for k, v in template.get("Conditions", {}).items()}

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [r for r in (self.resolve(n) for n in node) if r is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                if arg in PSEUDO:
                    return NO_VALUE if arg == "AWS::NoValue" else PSEUDO[arg]
                if arg in self.params:
                    return self.params[arg]
                return f"ref:{arg}"
            if key == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
                return re.sub(r"\$\{([^}]+)\}", lambda m: str(self._var(m.group(1), names)), text)
            if key == "Fn::Join":
                delimiter, items = arg
                assert isinstance(delimiter, str), "Fn::Join takes a literal delimiter"
                return delimiter.join(str(i) for i in self.resolve(items))
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(index)]
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.conditions[name] else no)
            if key == "Fn::Equals":
                a, b = self.resolve(arg)
                return a == b
            if key == "Fn::Not":
                return not self.resolve(arg)[0]
            if key == "Fn::GetAtt":
                return f"arn:aws:stand-in:::{arg[0]}/{arg[1]}"
            assert not key.startswith("Fn::"), f"{key}: not understood by tests/deploy/iam.py"
        return {k: r for k, v in node.items() if (r := self.resolve(v)) is not NO_VALUE}

    def _var(self, name: str, names: Mapping[str, Any]) -> Any:
        if name in names:
            return names[name]
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.params:
            return self.params[name]
        return f"ref:{name}"

    def role_statements(self, resource: str) -> list[dict[str, Any]]:
        props = self.resolve(self.template["Resources"][resource]["Properties"])
        return [s for p in props.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]

    def trust_statements(self, resource: str) -> list[dict[str, Any]]:
        props = self.resolve(self.template["Resources"][resource]["Properties"])
        return list(props["AssumeRolePolicyDocument"]["Statement"])


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _conditions_hold(conditions: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    for operator, tests in conditions.items():
        for key, expected in tests.items():
            wanted = [str(e) for e in _listed(expected)]
            present = key in context
            if operator == "Null":
                if (not present) != (str(expected).lower() == "true"):
                    return False
            elif operator in ("StringEquals", "ForAllValues:StringEquals"):
                if not present or context[key] not in wanted:
                    return False
            elif operator in ("StringLike", "ForAllValues:StringLike", "ArnLike", "ArnEquals"):
                if not present or not any(fnmatch.fnmatchcase(context[key], w) for w in wanted):
                    return False
            else:
                raise AssertionError(f"condition operator {operator}: not understood by tests/deploy/iam.py")
    return True


def allowed(
    statements: list[dict[str, Any]], action: str, resource: str, context: Mapping[str, str] | None = None
) -> bool:
    """True if some Allow statement grants ``action`` on ``resource`` in ``context`` (no Deny is used)."""
    context = context or {}
    for s in statements:
        assert s["Effect"] == "Allow"
        actions = [a.lower() for a in _listed(s["Action"])]
        if not any(fnmatch.fnmatchcase(action.lower(), a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in _listed(s["Resource"])):
            continue
        if _conditions_hold(s.get("Condition", {}), context):
            return True
    return False


def trusts(statements: list[dict[str, Any]], principal: str, context: Mapping[str, str] | None = None) -> bool:
    """Whether a role ARN may assume: named as the principal, or in an account whose root is named (then
    the conditions decide, with ``aws:PrincipalArn`` the role's ARN as IAM sets it)."""
    context = {"aws:PrincipalArn": principal, **(context or {})}
    partition, account = principal.split(":")[1], principal.split(":")[4]
    root = f"arn:{partition}:iam::{account}:root"
    for s in statements:
        aws = s.get("Principal", {}).get("AWS")
        named = aws is not None and (principal in _listed(aws) or root in _listed(aws))
        if named and _conditions_hold(s.get("Condition", {}), context):
            return True
    return False


def code_blocks(markdown: str, language: str) -> Iterator[str]:
    for m in re.finditer(rf"```{language}\n(.*?)```", markdown, re.S):
        yield m.group(1)
