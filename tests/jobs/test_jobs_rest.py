"""SlurmRest against a small slurmrestd stand-in on 127.0.0.1 (random port) that checks the JWT
headers and the request JSON. Its v0.0.38 answers copy the shapes of a real slurmrestd 22.05.8;
its v0.0.41 answers follow the data_parser v0.0.41 definitions (SchedMD/slurm 24.05,
src/plugins/data_parser/v0.0.41/parsers.c: JOB_INFO, PROCESS_EXIT_CODE_VERBOSE,
OPENAPI_JOB_SUBMIT_RESPONSE, JOB_DESC_MSG). test_jobs_local_slurm.py also runs SlurmRest against
the real local one (22.05, v0.0.38) when it is up."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hpcstage.jobs import JobLookupError, JobSpec, JobState, JobStatus, build_script
from hpcstage.jobs.rest import SlurmRest, SlurmRestError, job_properties, status_from_job

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJhbGljZSJ9.c2lnbmF0dXJl"
API = "/slurm/v0.0.38"
META = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def no_val(number: int | None) -> dict[str, Any]:
    """A data_parser UINT32_NO_VAL / UINT16_NO_VAL as v0.0.40+ dumps it."""
    return {"set": number is not None, "infinite": False, "number": number or 0}


def exit_code_v41(status: str, code: int | None, signal: int | None = None, name: str = "") -> dict[str, Any]:
    """PROCESS_EXIT_CODE_VERBOSE: status flags, return_code and signal {id, name}."""
    return {"status": [status], "return_code": no_val(code), "signal": {"id": no_val(signal), "name": name}}


@dataclass
class FakeSlurmrestd:
    """Routes: GET /ping, POST /job/submit, GET /job/{id}, DELETE /job/{id} under /slurm/VERSION
    for its one version (other versions' paths answer 404, as an unloaded plugin does)."""

    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    next_id: int = 100
    version: str = "v0.0.38"

    def answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, headers, body))
        if headers.get("x-slurm-user-name") != "alice" or headers.get("x-slurm-user-token") != TOKEN:
            return 401, "Authentication failure"
        api = f"/slurm/{self.version}"
        meta = {"plugin": {"type": f"openapi/{self.version}"}, "Slurm": {"release": "22.05.8"}}
        if not path.startswith(api + "/"):
            return 404, "Unable to find query handler"
        if method == "GET" and path == f"{api}/ping":
            return 200, {"meta": meta, "errors": [], "pings": [{"hostname": "head", "pinged": "UP"}]}
        if method == "POST" and path == f"{api}/job/submit":
            return self.submit(body)
        job_id = int(path.rsplit("/", 1)[1])
        if job_id not in self.jobs:
            error = {
                "error": "Invalid job id specified",
                "error_number": 2017,
                "description": "Unable to find",
            }
            return 500, {"meta": meta, "errors": [error], "jobs": []}
        if method == "DELETE":
            if self.version == "v0.0.38":
                self.jobs[job_id].update(job_state="CANCELLED", exit_code=15)
            else:
                self.jobs[job_id].update(
                    job_state=["CANCELLED"], exit_code=exit_code_v41("SIGNALED", None, 15, "TERM")
                )
            return 200, {"meta": meta, "errors": []}
        return 200, {"meta": meta, "errors": [], "warnings": [], "jobs": [self.jobs[job_id]]}

    def submit(self, body: Any) -> tuple[int, Any]:
        job = body["job"]
        meta = {"plugin": {"type": f"openapi/{self.version}"}}
        if self.version == "v0.0.38":
            if not isinstance(job.get("environment"), dict):  # v0.0.38 rejects a list
                return 500, {"meta": meta, "errors": [{"error": "environment must be a dictionary"}]}
            if not isinstance(body.get("script"), str):
                return 500, {"meta": meta, "errors": [{"error": "script required"}]}
        else:
            environment = job.get("environment")
            if not isinstance(environment, list) or not all(
                isinstance(e, str) and "=" in e for e in environment
            ):
                return 500, {"meta": meta, "errors": [{"error": "environment must be a list of NAME=value"}]}
            if not isinstance(job.get("script"), str) or "script" in body:
                return 500, {"meta": meta, "errors": [{"error": "the script goes in job.script"}]}
        self.next_id += 1
        state: Any = "PENDING" if self.version == "v0.0.38" else ["PENDING"]
        self.jobs[self.next_id] = {"job_id": self.next_id, "name": job["name"], "job_state": state}
        answer = {"meta": meta, "errors": [], "job_id": self.next_id, "step_id": "batch"}
        if self.version != "v0.0.38":
            answer |= {"warnings": [], "job_submit_user_msg": "", "result": {"job_id": self.next_id}}
        return 200, answer


@pytest.fixture
def slurmrestd() -> Iterator[tuple[FakeSlurmrestd, str]]:
    fake = FakeSlurmrestd()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            headers = {name.lower(): value for name, value in self.headers.items()}  # case-insensitive
            status, payload = fake.answer(self.command, self.path, headers, body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def client(url: str, token: str = TOKEN, api_version: str | None = "v0.0.38") -> SlurmRest:
    return SlurmRest(url, user_name="alice", token=lambda: token, timeout_s=10, api_version=api_version)


def spec(name: str = "stage $(id) 'q' ü") -> JobSpec:
    return JobSpec(
        name=name,
        command="exit 3",
        workdir="/fsx/work",
        output_dir="/fsx/logs",
        environment={"A": "x y"},
        cpus=2,
        time_limit_min=15,
    )


def test_submit_posts_the_script_and_job_properties_with_jwt_headers(
    slurmrestd: tuple[FakeSlurmrestd, str],
) -> None:
    fake, url = slurmrestd
    job = spec()

    assert client(url).submit(job) == "101"

    method, path, headers, body = fake.requests[0]
    assert (method, path) == ("POST", "/slurm/v0.0.38/job/submit")
    assert headers["content-type"] == "application/json"
    assert body == {
        "script": build_script(job),
        "job": {
            "name": "stage $(id) 'q' ü",
            "current_working_directory": "/fsx/work",
            "standard_output": "/fsx/logs/slurm-%j.out",
            "tasks": 1,
            "cpus_per_task": 2,
            "time_limit": 15,
            "environment": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        },
    }


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            {"job_state": "PENDING", "state_reason": "Priority"},
            JobStatus(JobState.PENDING, reason="Priority"),
        ),
        ({"job_state": "RUNNING", "exit_code": 0, "state_reason": "None"}, JobStatus(JobState.RUNNING)),
        ({"job_state": "COMPLETED", "exit_code": 0}, JobStatus(JobState.COMPLETED, exit_code=0)),
        (
            {"job_state": "FAILED", "exit_code": 768, "state_reason": "NonZeroExitCode"},
            JobStatus(JobState.FAILED, exit_code=3, reason="NonZeroExitCode"),
        ),
        ({"job_state": "CANCELLED", "exit_code": 15}, JobStatus(JobState.CANCELLED, exit_code=0, signal=15)),
        ({"job_state": "TIMEOUT", "exit_code": 0}, JobStatus(JobState.TIMEOUT, exit_code=0)),
    ],
)
def test_status_reads_state_and_decodes_the_wait_status(
    slurmrestd: tuple[FakeSlurmrestd, str], job: dict[str, Any], expected: JobStatus
) -> None:
    fake, url = slurmrestd
    fake.jobs[7] = {"job_id": 7, "name": "n", **job}

    assert client(url).status("7", name="n") == expected
    assert fake.requests[-1][:2] == ("GET", "/slurm/v0.0.38/job/7")


def test_a_reused_or_unknown_job_id_is_a_lookup_error(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    fake, url = slurmrestd
    fake.jobs[7] = {"job_id": 7, "name": "someone else", "job_state": "RUNNING"}

    with pytest.raises(JobLookupError, match="reused"):
        client(url).status("7", name="mine")
    with pytest.raises(JobLookupError):
        client(url).status("8")


def test_cancel_checks_the_name_then_deletes(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    fake, url = slurmrestd
    rest = client(url)
    job_id = rest.submit(spec(name="mine"))

    rest.cancel(job_id)

    assert [r[:2] for r in fake.requests[1:]] == [
        ("GET", f"{API}/job/{job_id}"),
        ("DELETE", f"{API}/job/{job_id}"),
    ]
    assert rest.status(job_id).state is JobState.CANCELLED


def test_cancel_leaves_a_reused_id_alone(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    fake, url = slurmrestd
    fake.jobs[7] = {"job_id": 7, "name": "someone else", "job_state": "RUNNING"}

    with pytest.raises(JobLookupError):
        client(url).cancel("7", name="mine")
    assert fake.jobs[7]["job_state"] == "RUNNING"


def test_a_bad_token_is_reported_with_the_http_status(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    _, url = slurmrestd

    with pytest.raises(SlurmRestError, match="HTTP 401: Authentication failure") as caught:
        client(url, token="wrong").submit(spec())
    assert caught.value.http_status == 401


def test_the_token_is_asked_for_on_every_request(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    _, url = slurmrestd
    calls = []

    def token() -> str:
        calls.append(1)
        return TOKEN

    rest = SlurmRest(url, user_name="alice", token=token)
    rest.status(rest.submit(spec()))

    assert len(calls) == 2 + 4  # four pings find the version (v0.0.42, 41, 40 answer 404), then two calls


def test_errors_in_a_200_answer_are_raised(slurmrestd: tuple[FakeSlurmrestd, str]) -> None:
    fake, url = slurmrestd
    fake.submit = lambda body: (200, {"errors": [{"error": "Invalid partition name specified"}]})  # type: ignore[method-assign]

    with pytest.raises(SlurmRestError, match="Invalid partition name"):
        client(url).submit(spec())


def test_unreachable_slurmrestd_and_bad_urls() -> None:
    with pytest.raises(SlurmRestError, match="did not answer"):
        SlurmRest("http://127.0.0.1:9", user_name="alice", token=lambda: TOKEN, timeout_s=5).status("1")
    with pytest.raises(ValueError, match="http"):
        SlurmRest("file:///etc/passwd", user_name="alice", token=lambda: TOKEN)


def test_submitting_as_another_user_than_the_tokens_is_refused() -> None:
    rest = SlurmRest("http://127.0.0.1:9", user_name="alice", token=lambda: TOKEN)

    with pytest.raises(ValueError, match="alice"):
        rest.submit(JobSpec(name="n", command="true", workdir="/w", output_dir="/o", user="bob"))


def test_partition_is_passed_when_set() -> None:
    assert (
        job_properties(JobSpec(name="n", command="true", workdir="/w", output_dir="/o", partition="q1"))[
            "partition"
        ]
        == "q1"
    )


# -- OpenAPI v0.0.40+ (Slurm 23.11 and later; 24.05 removed v0.0.38) -----------------------------


def test_the_newest_served_version_is_found_and_used_for_v0041_shapes(
    slurmrestd: tuple[FakeSlurmrestd, str],
) -> None:
    fake, url = slurmrestd
    fake.version = "v0.0.41"
    rest = client(url, api_version=None)
    job = spec()

    job_id = rest.submit(job)

    assert rest.api_version == "v0.0.41"
    assert [r[:2] for r in fake.requests] == [
        ("GET", "/slurm/v0.0.42/ping"),
        ("GET", "/slurm/v0.0.41/ping"),
        ("POST", "/slurm/v0.0.41/job/submit"),
    ]
    assert fake.requests[-1][3] == {
        "job": {
            "name": "stage $(id) 'q' ü",
            "current_working_directory": "/fsx/work",
            "standard_output": "/fsx/logs/slurm-%j.out",
            "tasks": 1,
            "cpus_per_task": 2,
            "time_limit": 15,
            "environment": [f"PATH={PATH_ENV}"],
            "script": build_script(job),
        }
    }
    assert rest.status(job_id) == JobStatus(JobState.PENDING)
    rest.cancel(job_id)
    assert rest.status(job_id) == JobStatus(JobState.CANCELLED, exit_code=None, signal=15)


def test_a_slurmrestd_with_no_supported_version_is_a_clear_error(
    slurmrestd: tuple[FakeSlurmrestd, str],
) -> None:
    fake, url = slurmrestd
    fake.version = "v0.0.37"

    with pytest.raises(
        SlurmRestError, match="serves none of the OpenAPI versions v0.0.42, v0.0.41, v0.0.40, v0.0.38"
    ):
        client(url, api_version=None).submit(spec())
    with pytest.raises(ValueError, match="v0.0.39"):
        client(url, api_version="v0.0.39")


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            {"job_state": ["PENDING"], "state_reason": "Priority"},
            JobStatus(JobState.PENDING, reason="Priority"),
        ),
        (
            {"job_state": ["RUNNING"], "exit_code": exit_code_v41("PENDING", None)},
            JobStatus(JobState.RUNNING),
        ),
        (
            {"job_state": ["COMPLETED"], "exit_code": exit_code_v41("SUCCESS", 0), "state_reason": "None"},
            JobStatus(JobState.COMPLETED, exit_code=0),
        ),
        (
            {
                "job_state": ["FAILED"],
                "exit_code": exit_code_v41("ERROR", 3),
                "state_reason": "NonZeroExitCode",
            },
            JobStatus(JobState.FAILED, exit_code=3, reason="NonZeroExitCode"),
        ),
        (
            {"job_state": ["CANCELLED"], "exit_code": exit_code_v41("SIGNALED", None, 9, "KILL")},
            JobStatus(JobState.CANCELLED, exit_code=None, signal=9),
        ),
        (
            {"job_state": ["TIMEOUT"], "exit_code": exit_code_v41("SUCCESS", 0)},
            JobStatus(JobState.TIMEOUT, exit_code=0),
        ),
        # a base state and flags: still completing is not finished; a requeued job is back in the queue
        (
            {"job_state": ["COMPLETED", "COMPLETING"], "exit_code": exit_code_v41("SUCCESS", 0)},
            JobStatus(JobState.RUNNING),
        ),
        (
            {"job_state": ["FAILED", "REQUEUED"], "exit_code": exit_code_v41("ERROR", 1)},
            JobStatus(JobState.PENDING),
        ),
        (
            {"job_state": ["OUT_OF_MEMORY"], "exit_code": exit_code_v41("ERROR", 137)},
            JobStatus(JobState.FAILED, exit_code=137),
        ),
    ],
)
def test_v0041_job_records_map_to_statuses(job: dict[str, Any], expected: JobStatus) -> None:
    assert status_from_job({"job_id": 7, "name": "n", **job}) == expected
