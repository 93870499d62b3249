"""Specification: the synthesized template passes cfn-lint (cdk-nag already ran during synth)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_cfn_lint_finds_no_errors(synthesized):
    _, template_path = synthesized
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(template_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 4), result.stdout + result.stderr  # 4: warnings only
