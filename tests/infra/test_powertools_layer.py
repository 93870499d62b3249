"""Specification: the functions run the Powertools release the tests ran (the one requirements.txt pins), taken
from Powertools' public SSM parameter by CloudFormation when it deploys, for the functions' runtime and
architecture; nothing names a layer account or number that holds in one partition or region only."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from infra.components.powertools import REQUIREMENTS, layer_parameter_name, pinned_version
from medic.config import ConfigError, parse_config
from tests.infra.conftest import resources

CLUSTER = {"name": "c1", "id": "abcdefabcdef", "orchestrator": "slurm"}


def powertools_parameter(raw: dict) -> tuple[str, dict]:
    (found,) = [(name, parameter) for name, parameter in raw["Parameters"].items()
                if parameter.get("Default", "").startswith("/aws/service/powertools/python/")]
    return found


def test_the_pinned_powertools_is_the_installed_package_the_tests_ran():
    assert pinned_version() == metadata.version("aws-lambda-powertools")


def test_the_layer_comes_from_the_ssm_parameter_of_exactly_the_pinned_release(raw):
    name, parameter = powertools_parameter(raw)
    # Resolved by CloudFormation at deploy time (a stack parameter of SSM type), not looked up at synth
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert parameter["Default"] == f"/aws/service/powertools/python/arm64/python3.13/{pinned_version(REQUIREMENTS)}"
    for function in resources(raw, "AWS::Lambda::Function").values():
        if "Layers" in function["Properties"]:
            assert {"Ref": name} in function["Properties"]["Layers"]


def test_the_parameter_names_the_architecture_and_runtime_every_function_runs(raw):
    _, parameter = powertools_parameter(raw)
    architecture, runtime = parameter["Default"].split("/")[5:7]
    functions = [function["Properties"] for function in resources(raw, "AWS::Lambda::Function").values()
                 if "Layers" in function["Properties"]]
    assert functions
    for function in functions:
        assert function["Architectures"] == [architecture] == ["arm64"]
        assert function["Runtime"] == runtime == "python3.13"


def test_no_layer_arn_of_one_partition_or_region_is_written_into_the_template(raw):
    text = json.dumps(raw)
    assert "017000801446" not in text and "AWSLambdaPowertoolsPythonV3" not in text


def test_the_documented_parameter_path_format():
    # Powertools docs, "Using SSM Parameter Store": /aws/service/powertools/python/<arch>/<python>/<version>
    assert layer_parameter_name("3.37.0") == "/aws/service/powertools/python/arm64/python3.13/3.37.0"


@pytest.mark.parametrize("text", ["boto3==1.44.5\n", "aws-lambda-powertools>=3\n",
                                  "aws-lambda-powertools==3.37.0\naws-lambda-powertools==3.36.0\n"])
def test_a_requirements_file_without_one_exact_pin_stops_synth(tmp_path, text):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(text)
    with pytest.raises(ValueError, match="aws-lambda-powertools==X.Y.Z"):
        pinned_version(requirements)


def test_the_removed_layer_version_key_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as error:
        parse_config({"clusters": [CLUSTER], "powertools_layer_version": 27}, "medic.yaml")
    assert "powertools_layer_version is no longer used: remove it" in str(error.value)
    assert "requirements.txt" in str(error.value)
