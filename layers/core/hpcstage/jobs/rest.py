"""SlurmRest: jobs through slurmrestd's OpenAPI, v0.0.40 to v0.0.42 (Slurm 23.11 to 25.11, what
current ParallelCluster releases ship) or v0.0.38 (Slurm 22.05 and 23.02).

Slurm 24.05 removed the v0.0.38 plugins (its RELEASE_NOTES), so the version is not fixed: unless
one is given, the client asks ``GET /slurm/VERSION/ping`` for each supported version, newest first,
and keeps the first that slurmrestd serves (an unloaded plugin answers 404).

Authentication is JWT: slurmrestd reads the token from `X-SLURM-USER-TOKEN` and the user from
`X-SLURM-USER-NAME` (22.05 answers 401 to `Authorization: Bearer` and without the user name).
The token comes from a callable, asked on every request so a rotated secret (e.g. in AWS Secrets
Manager) is picked up; cache in the callable if that is too often.

Shapes by version (data_parser v0.0.40..42 in src/plugins/data_parser/*/parsers.c):
- v0.0.38, checked against a real slurmrestd 22.05.8: submit takes `script` beside `job` and
  `environment` as an object; `job_state` is a string; `exit_code` is the raw wait status (768 for
  `exit 3`); an unknown job id answers HTTP 500 with error_number 2017; a bad token HTTP 500 too.
- v0.0.40+: the script goes in `job.script`, `environment` is a list of `NAME=value` strings;
  `job_state` is a list (a base state and flags such as COMPLETING); `exit_code` is
  `{status: [...], return_code: {set, infinite, number}, signal: {id: {...}, name}}`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from .base import TERMINAL_STATES, JobError, JobLookupError, JobSpec, JobState, JobStatus, check_job_id
from .script import build_script
from .slurmcli import map_state

# Newest first: the order in which an unset version is probed.
SUPPORTED_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38")
LEGACY_VERSION = "v0.0.38"
ESLURM_INVALID_JOB_ID = 2017
# Flags in a v0.0.40+ job_state list that mean the job is not over yet, whatever its base state.
_STILL_RUNNING_FLAGS = frozenset({"COMPLETING", "STAGE_OUT", "SIGNALING"})
_BACK_IN_QUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
# slurmrestd jobs start with only the environment given here; the script exports the rest.
DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SlurmRestError(JobError):
    def __init__(self, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


def job_properties(
    spec: JobSpec, *, job_path: str = DEFAULT_JOB_PATH, version: str = LEGACY_VERSION
) -> dict[str, Any]:
    # slurmrestd does not read #SBATCH lines, so the options are repeated here.
    properties: dict[str, Any] = {
        "name": spec.name,
        "current_working_directory": spec.workdir,
        "standard_output": spec.output_path,
        "tasks": 1,
        "cpus_per_task": spec.cpus,
        "time_limit": spec.time_limit_min,
    }
    if version == LEGACY_VERSION:
        properties["environment"] = {"PATH": job_path}
    else:
        properties["environment"] = [f"PATH={job_path}"]
    if spec.partition:
        properties["partition"] = spec.partition
    return properties


def submit_body(
    spec: JobSpec, *, job_path: str = DEFAULT_JOB_PATH, version: str = LEGACY_VERSION
) -> dict[str, Any]:
    job = job_properties(spec, job_path=job_path, version=version)
    if version == LEGACY_VERSION:
        return {"script": build_script(spec), "job": job}
    # v0.0.41 tags the top-level `script` deprecated (Slurm 24.05 RELEASE_NOTES); job.script is in all.
    return {"job": {**job, "script": build_script(spec)}}


def _number(value: Any) -> int | None:
    """A plain int, or a v0.0.40+ `{set, infinite, number}` object (None when not set)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, dict) and value.get("set") and not value.get("infinite"):
        number = value.get("number")
        return number if isinstance(number, int) and not isinstance(number, bool) else None
    return None


def state_of(job_state: Any) -> JobState:
    """`job_state` as a string (v0.0.38) or a list of a base state and flags (v0.0.40+)."""
    words = [job_state] if isinstance(job_state, str) else [str(w) for w in job_state or []]
    states = [map_state(w) for w in words]
    base = next((s for s in states if s is not JobState.UNKNOWN), JobState.UNKNOWN)
    flags = {w.upper() for w in words}
    if base in TERMINAL_STATES and flags & _STILL_RUNNING_FLAGS:
        return JobState.RUNNING
    if base in TERMINAL_STATES and flags & _BACK_IN_QUEUE_FLAGS:
        return JobState.PENDING
    return base


def exit_of(raw_exit: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait status (v0.0.38) or a v0.0.40+ exit_code object."""
    if isinstance(raw_exit, int) and not isinstance(raw_exit, bool):
        # A wait(2) status: exit code in the second byte, terminating signal in the low 7 bits.
        return (raw_exit >> 8) & 0xFF, (raw_exit & 0x7F) or None
    if not isinstance(raw_exit, dict):
        return None, None
    signal = raw_exit.get("signal")
    signal_id = _number(signal.get("id")) if isinstance(signal, dict) else None
    return _number(raw_exit.get("return_code")), signal_id or None


def status_from_job(job: dict[str, Any]) -> JobStatus:
    state = state_of(job.get("job_state", ""))
    exit_code = signal = None
    if state in TERMINAL_STATES:
        exit_code, signal = exit_of(job.get("exit_code"))
    reason = str(job.get("state_reason") or "")
    return JobStatus(state, exit_code, signal, "" if reason == "None" else reason)


class SlurmRest:
    def __init__(
        self,
        base_url: str,
        *,
        user_name: str,
        token: Callable[[], str],
        timeout_s: float = 30.0,
        job_path: str = DEFAULT_JOB_PATH,
        api_version: str | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"slurmrestd URL must be http(s)://host:port, got {base_url!r}")
        if api_version is not None and api_version not in SUPPORTED_VERSIONS:
            raise ValueError(
                f"slurmrestd API version {api_version!r} is not supported; use one of {', '.join(SUPPORTED_VERSIONS)}"
            )
        self._base = base_url.rstrip("/")
        self._version = api_version
        self._user_name = user_name
        self._token = token
        self._timeout_s = timeout_s
        self._job_path = job_path
        self._names: dict[str, str] = {}

    def submit(self, spec: JobSpec) -> str:
        if spec.user and spec.user != self._user_name:
            raise ValueError(f"this slurmrestd client submits as {self._user_name!r}, not {spec.user!r}")
        body = submit_body(spec, job_path=self._job_path, version=self.api_version)
        answer = self._request("POST", "/job/submit", body)
        try:
            job_id = check_job_id(str(answer.get("job_id", "")))
        except ValueError:
            raise SlurmRestError(
                f"slurmrestd accepted the job but returned no job id: {answer!r:.300}"
            ) from None
        self._names[job_id] = spec.name
        return job_id

    def status(self, job_id: str, *, name: str | None = None) -> JobStatus:
        name = name if name is not None else self._names.get(check_job_id(job_id))
        jobs = self._request("GET", f"/job/{job_id}").get("jobs") or []
        if not jobs:
            raise JobLookupError(f"slurmrestd knows no job {job_id}")
        job = jobs[0]
        if name is not None and job.get("name") != name:
            raise JobLookupError(f"job {job_id} is now {job.get('name')!r}, not {name!r}: the id was reused")
        return status_from_job(job)

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        name = name if name is not None else self._names.get(check_job_id(job_id))
        if name is not None:
            self.status(job_id, name=name)  # raises if the id now belongs to another job
        self._request("DELETE", f"/job/{job_id}")

    @property
    def api_version(self) -> str:
        """The OpenAPI version used: the one given, or the newest this slurmrestd serves."""
        if self._version is None:
            for version in SUPPORTED_VERSIONS:
                try:
                    self._request("GET", "/ping", version=version)
                except SlurmRestError as err:
                    if err.http_status == 404:
                        continue
                    raise
                self._version = version
                break
            else:
                raise SlurmRestError(
                    f"slurmrestd at {self._base} serves none of the OpenAPI versions {', '.join(SUPPORTED_VERSIONS)} "
                    "(GET /slurm/VERSION/ping answered 404 for each); load one with slurmrestd -s openapi/...",
                    http_status=404,
                )
        return self._version

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, version: str | None = None
    ) -> dict[str, Any]:
        api = f"{self._base}/slurm/{version or self.api_version}"
        request = urllib.request.Request(  # noqa: S310 (the URL scheme is checked in __init__)
            api + path,
            data=None if body is None else json.dumps(body).encode("utf-8"),
            method=method,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "X-SLURM-USER-NAME": self._user_name,
                "X-SLURM-USER-TOKEN": self._token(),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:  # noqa: S310
                answer = _decode(response.read())
        except urllib.error.HTTPError as err:
            raise _http_error(method, path, err.code, err.read()) from None
        except (urllib.error.URLError, TimeoutError) as err:
            raise SlurmRestError(f"slurmrestd at {api} did not answer {method} {path}: {err}") from err
        if answer.get("errors"):
            raise _http_error(method, path, 200, json.dumps(answer).encode())
        return answer


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(payload or b"{}")
    except ValueError:
        return {"errors": [{"description": payload[:300].decode("utf-8", errors="replace")}]}
    return (
        answer
        if isinstance(answer, dict)
        else {"errors": [{"description": f"not a JSON object: {answer!r:.200}"}]}
    )


def _http_error(method: str, path: str, status: int, payload: bytes) -> JobError:
    errors = _decode(payload).get("errors") or []
    if any(isinstance(e, dict) and e.get("error_number") == ESLURM_INVALID_JOB_ID for e in errors):
        return JobLookupError(f"slurmrestd knows no such job ({method} {path})")
    descriptions = "; ".join(
        str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors
    )
    if status == 401:
        descriptions = descriptions or "authentication failed: check the token and the user name"
    return SlurmRestError(
        f"slurmrestd {method} {path} answered HTTP {status}: {descriptions[:500] or 'no detail'}",
        http_status=status,
    )
