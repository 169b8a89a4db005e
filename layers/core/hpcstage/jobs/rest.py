"""SlurmRest: jobs through slurmrestd's OpenAPI v0.0.38 (Slurm 22.05, still served by 23.02).

Authentication is JWT: slurmrestd 22.05 reads the token from `X-SLURM-USER-TOKEN` and the user
from `X-SLURM-USER-NAME` (it answers 401 to `Authorization: Bearer` and without the user name).
The token comes from a callable, asked on every request so a rotated secret (e.g. in AWS Secrets
Manager) is picked up; cache in the callable if that is too often.

Checked against a real slurmrestd 22.05.8: submit needs `environment` as an object; a job's
`exit_code` is the raw wait status (768 for `exit 3`); an unknown job id answers HTTP 500 with
error_number 2017; a bad token answers HTTP 500 too.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from .base import TERMINAL_STATES, JobError, JobLookupError, JobSpec, JobStatus, check_job_id
from .script import build_script
from .slurmcli import map_state

API_VERSION = "v0.0.38"
ESLURM_INVALID_JOB_ID = 2017
# slurmrestd jobs start with only the environment given here; the script exports the rest.
DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SlurmRestError(JobError):
    def __init__(self, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status


def job_properties(spec: JobSpec, *, job_path: str = DEFAULT_JOB_PATH) -> dict[str, Any]:
    # slurmrestd does not read #SBATCH lines, so the options are repeated here.
    properties: dict[str, Any] = {
        "name": spec.name,
        "current_working_directory": spec.workdir,
        "standard_output": spec.output_path,
        "tasks": 1,
        "cpus_per_task": spec.cpus,
        "time_limit": spec.time_limit_min,
        "environment": {"PATH": job_path},
    }
    if spec.partition:
        properties["partition"] = spec.partition
    return properties


def status_from_job(job: dict[str, Any]) -> JobStatus:
    state = map_state(str(job.get("job_state", "")))
    raw_exit = job.get("exit_code")
    exit_code = signal = None
    if state in TERMINAL_STATES and isinstance(raw_exit, int):
        # A wait(2) status: exit code in the second byte, terminating signal in the low 7 bits.
        exit_code, signal = (raw_exit >> 8) & 0xFF, (raw_exit & 0x7F) or None
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
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"slurmrestd URL must be http(s)://host:port, got {base_url!r}")
        self._api = f"{base_url.rstrip('/')}/slurm/{API_VERSION}"
        self._user_name = user_name
        self._token = token
        self._timeout_s = timeout_s
        self._job_path = job_path
        self._names: dict[str, str] = {}

    def submit(self, spec: JobSpec) -> str:
        if spec.user and spec.user != self._user_name:
            raise ValueError(f"this slurmrestd client submits as {self._user_name!r}, not {spec.user!r}")
        body = {"script": build_script(spec), "job": job_properties(spec, job_path=self._job_path)}
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

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 (the URL scheme is checked in __init__)
            self._api + path,
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
            raise SlurmRestError(f"slurmrestd at {self._api} did not answer {method} {path}: {err}") from err
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
