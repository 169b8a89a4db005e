"""The batch script for a JobSpec: `#SBATCH` options, exported environment, `cd`, then the command.

Every value is shell-quoted. sbatch reads `#SBATCH` lines with shell-like quoting, and JobSpec has
already refused what that parser cannot carry (newlines, backslashes), so a job name such as
`x$(touch /tmp/p)` reaches Slurm as exactly those characters and is never run.
"""

from __future__ import annotations

from ..shell import quote
from .base import ENV_NAME_RE, JobSpec

FILE_LIST_VARIABLE = "HPCSTAGE_FILE_LIST"
# Exit status of the script when workdir is missing: distinct from the command's own codes.
WORKDIR_MISSING_EXIT = 97


def sbatch_directives(spec: JobSpec) -> list[str]:
    options = [
        f"--job-name={quote(spec.name)}",
        f"--output={quote(spec.output_path)}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={spec.cpus:d}",
        f"--time={spec.time_limit_min:d}",
    ]
    if spec.partition:
        options.append(f"--partition={quote(spec.partition)}")
    return [f"#SBATCH {option}" for option in options]


def environment_lines(spec: JobSpec) -> list[str]:
    variables = dict(spec.environment)
    if spec.file_list is not None:
        variables[FILE_LIST_VARIABLE] = spec.file_list
    lines = []
    for name, value in variables.items():
        # JobSpec checked these already; checked again because an unquoted name in `export`
        # is shell syntax, and this is the line that would run it.
        if not ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        lines.append(f"export {name}={quote(value)}")
    return lines


def build_script(spec: JobSpec) -> str:
    lines = [
        "#!/bin/bash",
        *sbatch_directives(spec),
        "",
        *environment_lines(spec),
        f"cd -- {quote(spec.workdir)} || exit {WORKDIR_MISSING_EXIT}",
        "",
        spec.command.rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"
