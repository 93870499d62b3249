"""The stack, synthesized in-process exactly as ``cdk synth`` builds it, cached per config content.

The cache key covers the config file, the CDK code (infra/) and the CDK library version, so a
changed stack is never replayed from a stale template.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from sim.cfn import SimError

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "sim-cache"
STACK_NAME = "Medic"


def import_paths() -> None:
    """The Lambda asset (functions/, where the shared config model lives) and the repo root (infra/)."""
    for path in (ROOT / "functions", ROOT):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def load_config(path: Path) -> Any:
    """The typed Medic config, validated as ``cdk synth`` validates it."""
    import_paths()
    try:
        from infra.config import load_config as infra_load_config
    except ImportError:  # infra not there (yet): the shared model validates the same way
        infra_load_config = None
    if infra_load_config is not None:
        return infra_load_config(path)
    from medic.config import parse_config

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise SimError(f"cannot read config {path}: {error}") from None
    return parse_config(data, str(path))


def cache_key(config_path: Path) -> str:
    digest = hashlib.sha256()
    digest.update(Path(config_path).read_bytes())
    for version_of in ("aws-cdk-lib", "cdk-nag"):
        try:
            digest.update(f"{version_of}={metadata.version(version_of)}".encode())
        except metadata.PackageNotFoundError:
            pass
    sources = sorted((ROOT / "infra").rglob("*.py")) + [ROOT / "functions" / "medic" / "config.py",
                                                         ROOT / "cdk.json", ROOT / "cdk.context.json"]
    for source in sources:
        if source.is_file():
            digest.update(str(source.relative_to(ROOT)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:24]


def stack_template(config_path: Path, cache: Path = CACHE) -> dict:
    """The synthesized CloudFormation template for this config (from the cache when unchanged)."""
    config_path = Path(config_path)
    if not config_path.is_file():
        raise SimError(f"config file not found: {config_path}")
    cached = cache / f"{cache_key(config_path)}.template.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    template = synthesize(config_path)
    cache.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(template, indent=1))
    partial.replace(cached)
    return template


def _cdk_context() -> dict:
    """The context ``cdk synth`` would pass: cdk.json's feature flags and cdk.context.json."""
    context: dict = {}
    for name, key in (("cdk.json", "context"), ("cdk.context.json", None)):
        path = ROOT / name
        if path.is_file():
            data = json.loads(path.read_text())
            context.update(data.get(key, {}) if key else data)
    return context


def _quiet_node_banners(node: str) -> None:
    """jsii prints a large banner about the Node version on every start; it is not the replay's news."""
    try:
        version = subprocess.run([node, "--version"],  # noqa: S603 - the very binary jsii runs
                                 capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return
    major = version.strip().lstrip("v").split(".")[0]
    for warning in ("END_OF_LIFE", "DEPRECATED", "UNTESTED"):
        os.environ.setdefault(f"JSII_SILENCE_WARNING_{warning}_NODE_VERSION", major)


def synthesize(config_path: Path) -> dict:
    import_paths()
    local_node = ROOT / "node_modules" / "node" / "bin" / "node"  # Node pinned through package.json
    if local_node.is_file():
        os.environ.setdefault("JSII_NODE", str(local_node))
    _quiet_node_banners(os.environ.get("JSII_NODE", "node"))
    try:
        import aws_cdk as cdk

        from infra.stack import MedicStack
    except ImportError as error:
        raise SimError(f"cannot synthesize the stack: {error} (is infra/ there and the venv active?)") from None
    config = load_config(config_path)
    with tempfile.TemporaryDirectory(prefix="medic-sim-synth-") as outdir:
        app = cdk.App(outdir=outdir, context=_cdk_context())
        MedicStack(app, STACK_NAME, config=config)
        assembly = app.synth()
        return assembly.get_stack_by_name(STACK_NAME).template
