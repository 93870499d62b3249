"""The synthesized CloudFormation template: resources by type and intrinsic functions resolved
against the names and ARNs the emulated resources got."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class SimError(Exception):
    """The harness itself cannot go on (unusable template, config or input file)."""


@dataclass
class Physical:
    """What a resource resolves to: ``Ref`` and its ``Fn::GetAtt`` attributes."""

    ref: str
    attrs: dict[str, str] = field(default_factory=dict)


_SUB = re.compile(r"\$\{([^}]+)\}")


class Template:
    def __init__(self, template: dict, region: str, account: str, stack_name: str = "Medic") -> None:
        self.raw = template
        self.region = region
        self.account = account
        self.stack_name = stack_name
        self.resources: dict[str, dict] = template.get("Resources", {})
        self.parameters: dict[str, dict] = template.get("Parameters", {})
        self.physical: dict[str, Physical] = {}

    def of_type(self, resource_type: str) -> list[tuple[str, dict]]:
        return [(lid, res) for lid, res in self.resources.items() if res.get("Type") == resource_type]

    def properties(self, logical_id: str) -> dict:
        return self.resources[logical_id].get("Properties", {})

    def default_name(self, logical_id: str, limit: int = 64) -> str:
        """CloudFormation names unnamed resources <stack>-<logical id>-<suffix>; ours are stable."""
        return f"{self.stack_name}-{logical_id}"[:limit]

    def arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{self.account}:{resource}"

    # resolution
    def pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
            "AWS::StackId": self.arn("cloudformation", f"stack/{self.stack_name}/00000000-0000-0000-0000-000000000000"),
            "AWS::NoValue": None,
        }.get(name, "")

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.parameters:
            return self.parameters[name].get("Default", "")
        return self._physical(name).ref

    def get_att(self, logical_id: str, attribute: str) -> str:
        physical = self._physical(logical_id)
        if attribute in physical.attrs:
            return physical.attrs[attribute]
        if attribute == "Arn":
            kind = self.resources[logical_id]["Type"]
            if kind == "AWS::CloudWatch::Alarm":  # CloudFormation's AWS::CloudWatch::Alarm return values:
                return self.arn("cloudwatch", f"alarm:{physical.ref}")  # Ref is the name, Arn ...:alarm:<name>
            return self.arn(kind.split("::")[1].lower(), physical.ref)
        raise SimError(f"template: Fn::GetAtt {logical_id}.{attribute} is not emulated")

    def _physical(self, logical_id: str) -> Physical:
        if logical_id not in self.resources:
            raise SimError(f"template: reference to unknown resource {logical_id!r}")
        if logical_id not in self.physical:  # a resource the emulation does not create
            self.physical[logical_id] = Physical(self.default_name(logical_id))
        return self.physical[logical_id]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.get_att(logical_id, self.resolve(attribute))
            if key == "Fn::Join":
                separator, items = arg
                return separator.join(str(item) for item in self.resolve(items) if item is not None)
            if key == "Fn::Select":
                index, items = self.resolve(arg)
                return items[int(index)]
            if key == "Fn::Split":
                separator, text = self.resolve(arg)
                return text.split(separator)
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Base64":
                import base64

                return base64.b64encode(str(self.resolve(arg)).encode()).decode()
            if key.startswith("Fn::"):
                raise SimError(f"template: {key} is not supported by the replay harness")
        return {key: self.resolve(item) for key, item in value.items()}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return _SUB.sub(replace, text)
