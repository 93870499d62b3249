"""Run Slurm's client commands. The only module that touches subprocess.

Only `scontrol`, `squeue` and `sacct` can be run, as an argv list (never a shell), resolved to an
absolute path once, with stdin closed and a timeout. `sacct` is optional: a cluster without it (or without
accounting) only loses what it tells about jobs slurmctld has forgotten.
"""

from __future__ import annotations

import os
import shutil
import subprocess  # noqa: S404 - argv lists only, never shell=True
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

PROGRAMS = ("scontrol", "squeue", "sacct")
REQUIRED = ("scontrol", "squeue")  # what the agent cannot work without: checked at start
# HyperPod installs Slurm under /opt/slurm; distribution packages put it in /usr/bin.
DEFAULT_SEARCH_PATH = os.pathsep.join(["/opt/slurm/bin", "/usr/local/bin", "/usr/bin", "/bin"])
OUTPUT_LIMIT = 4000

Runner = Callable[..., Any]  # subprocess.run's signature; tests inject a fake


class SlurmNotFound(RuntimeError):
    """scontrol or squeue is not installed where the agent looks."""


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    returncode: int | None  # None: it did not run to completion (timeout, could not start)
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """`scontrol requeue 42: exit 0` followed by what it printed."""
        status = "did not finish" if self.returncode is None else f"exit {self.returncode}"
        text = f"{' '.join(self.argv)}: {status}"
        return f"{text}: {self.output}" if self.output else text


class Slurm:
    def __init__(self, bin_dir: str | None = None, timeout: float = 30.0, runner: Runner | None = None) -> None:
        self.bin_dir = bin_dir
        self.timeout = timeout
        self._runner = runner or subprocess.run
        self._paths: dict[str, str] = {}

    def resolve(self, program: str) -> str:
        """The absolute path of an allowed program (cached). Raises SlurmNotFound."""
        if program not in PROGRAMS:
            raise ValueError(f"not an allowed program: {program!r}")
        if program not in self._paths:
            if self.bin_dir:
                found = os.path.join(self.bin_dir, program)
                found = found if os.access(found, os.X_OK) else None
            else:
                found = shutil.which(program, path=os.environ.get("PATH", "") + os.pathsep + DEFAULT_SEARCH_PATH)
            if not found:
                where = self.bin_dir or "PATH or " + DEFAULT_SEARCH_PATH
                raise SlurmNotFound(f"{program} not found in {where}")
            self._paths[program] = os.path.abspath(found)
        return self._paths[program]

    def check(self) -> dict[str, str]:
        """Resolve the required programs up front, so a missing Slurm fails at start and not at the first command."""
        return {program: self.resolve(program) for program in REQUIRED}

    def run(self, argv: Sequence[str]) -> Run:
        argv = tuple(argv)
        if not argv or not all(isinstance(arg, str) and "\x00" not in arg for arg in argv):
            raise ValueError("argv must be a non-empty list of strings")
        try:
            executable = self.resolve(argv[0])
        except SlurmNotFound as error:
            return Run(argv, None, str(error))
        try:
            completed = self._runner(
                [executable, *argv[1:]], shell=False, stdin=subprocess.DEVNULL, capture_output=True,  # noqa: S603
                text=True, errors="replace", timeout=self.timeout, check=False,
            )
        except subprocess.TimeoutExpired:
            return Run(argv, None, f"timed out after {self.timeout:g}s")
        except OSError as error:
            return Run(argv, None, f"could not run: {error}")
        output = "\n".join(part.strip() for part in (completed.stdout or "", completed.stderr or "") if part.strip())
        return Run(argv, completed.returncode, output[:OUTPUT_LIMIT])
