"""hpcstage.shell: every quoted argument reaches the program byte for byte and is never executed.

Each hostile argument is passed through a real shell (bash, and dash as /bin/sh, which is what
SSM's AWS-RunShellScript uses) to a Python program that prints its argv as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hpcstage.shell import as_user, check_user_name, command, quote

SHELLS = [shell for shell in ("/bin/bash", "/bin/sh") if Path(shell).exists()]
PRINT_ARGV = "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"


def hostile_arguments(canary: Path) -> list[str]:
    c = str(canary)
    return [
        f"$(touch {c})",
        f"`touch {c}`",
        f"; touch {c}",
        f"&& touch {c}",
        f"|| touch {c}",
        f"| touch {c}",
        f"\ntouch {c}\n",
        f"> {c}",
        f"x'; touch {c}; echo '",
        f'x"; touch {c}; echo "',
        f"$'\\n' touch {c}",
        "it's",
        '"double"',
        "back\\slash\\",
        "-n",
        "--",
        "-rf",
        "../../etc/passwd",
        "*",
        "~",
        "$HOME",
        "${PATH}",
        "!!",
        "#not a comment",
        "tab\there",
        "  spaces  ",
        "",
        "ünïcødé ☃ 日本",
        "\r\x1b[31mred",
    ]


def run_shell(
    shell: str, text: str, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shell, "-c", text], capture_output=True, text=True, timeout=30, check=False, env=env
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_each_hostile_argument_arrives_byte_for_byte_and_runs_nothing(shell: str, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    args = hostile_arguments(canary)

    done = run_shell(shell, command([sys.executable, "-c", PRINT_ARGV, *args]))

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == args
    assert not canary.exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_printf_prints_a_quoted_argument_unchanged(shell: str, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    payload = f"a$(touch {canary})b`touch {canary}`c;d&&e\nf'g\"h\\i"

    done = run_shell(shell, command(["printf", "%s", payload]))

    assert done.stdout == payload
    assert not canary.exists()


def test_quote_leaves_plain_words_alone_and_single_quotes_the_rest() -> None:
    assert quote("sbatch") == "sbatch"
    assert quote("--parsable") == "--parsable"
    assert quote("a b") == "'a b'"
    assert quote("it's") == "'it'\"'\"'s'"
    assert quote("") == "''"


def test_nul_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        quote("a\0b")
    with pytest.raises(ValueError, match="NUL"):
        command(["printf", "%s", "ok", "bad\0"])


def test_non_strings_and_bare_strings_are_refused() -> None:
    with pytest.raises(TypeError):
        quote(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        command("rm -rf /")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        command([])


def test_as_user_builds_runuser_login_with_the_command_as_one_argument() -> None:
    inner = command(["squeue", "-h", "-o", "%T|%j"])

    assert inner == "squeue -h -o '%T|%j'"
    assert as_user("ec2-user", inner) == "runuser -l ec2-user -c 'squeue -h -o '\"'\"'%T|%j'\"'\"''"


@pytest.mark.parametrize("user", ["-c", "--help", "root;id", "a b", "$(id)", "", "x" * 33, "Ünï"])
def test_user_names_that_could_be_options_or_shell_are_refused(user: str) -> None:
    with pytest.raises(ValueError, match="user name"):
        as_user(user, "id")


def test_portable_user_names_are_accepted() -> None:
    for user in ("ec2-user", "ubuntu", "_svc", "slurm_1"):
        assert check_user_name(user) == user


@pytest.mark.parametrize("shell", SHELLS)
def test_as_user_survives_two_levels_of_shell(shell: str, tmp_path: Path) -> None:
    """The outer shell runs runuser; runuser's -c text goes through a second shell: still literal."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    runuser = fake_bin / "runuser"
    # Stands in for `runuser -l USER -c CMD`: records USER, runs CMD with a shell as runuser would.
    runuser.write_text(
        '#!/bin/sh\n[ "$1" = -l ] && [ "$3" = -c ] && [ $# -eq 4 ] || exit 64\n'
        'printf %s "$2" > "$RUNUSER_LOG"\nexec /bin/sh -c "$4"\n'
    )
    runuser.chmod(0o755)
    canary = tmp_path / "canary"
    args = hostile_arguments(canary)
    env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "RUNUSER_LOG": str(tmp_path / "user")}

    done = run_shell(shell, as_user("ec2-user", command([sys.executable, "-c", PRINT_ARGV, *args])), env=env)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == args
    assert (tmp_path / "user").read_text() == "ec2-user"
    assert not canary.exists()


@pytest.mark.skipif(shutil.which("runuser") is None or os.geteuid() != 0, reason="needs root and runuser")
def test_as_user_with_the_real_runuser(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    args = [f"$(touch {canary})", "it's", "-n"]

    done = run_shell("/bin/sh", as_user("root", command([sys.executable, "-c", PRINT_ARGV, *args])))

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == args
    assert not canary.exists()
