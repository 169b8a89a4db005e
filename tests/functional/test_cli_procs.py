"""How many processes the command line lists in: one per usable core, and one under moto's in-process mock."""

from __future__ import annotations

import pytest
from hpcstage import cli
from hpcstage.errors import InputError
from hpcstage.inventory.procs import default_processes, usable_cores
from moto import mock_aws


def test_the_default_is_one_process_per_usable_core() -> None:
    assert default_processes() == max(1, min(8, usable_cores()))
    assert cli._processes(None) == default_processes()
    assert cli._processes(3) == 3


def test_under_an_in_process_mock_the_listing_stays_in_this_process() -> None:
    with mock_aws():
        assert cli._processes(None) == 1
        assert cli._processes(1) == 1
        with pytest.raises(InputError, match=r"^--procs 2: an in-process mock of S3 \(moto's mock_aws\)"):
            cli._processes(2)
    assert cli._processes(None) == default_processes()  # the mock is gone


def test_procs_must_be_a_positive_whole_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["inventory", "s3://b", "--procs", "0"])
    assert exit_.value.code == 2
    assert "--procs" in capsys.readouterr().err
