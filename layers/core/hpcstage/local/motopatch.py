"""Explicit, idempotent patches of moto 5.2.5 internals that the local runtime depends on.

Call ``apply_patches()`` (or ``use_patches()``, as ``LocalAws`` does for its lifetime);
``remove_patches()`` restores moto exactly.
Every patch replaces a named attribute of a moto class and keeps the original, so the set of
changes is listed in one place (``_targets()``) and nothing is patched as a side effect of
importing this module. moto is pinned: any other version raises ``MotoVersionError`` instead of
silently misbehaving, because these patches reach into private code.

1. ``lambda``: ``LambdaSimpleBackend.invoke`` (the backend moto uses when ``use_docker`` is False)
   imports and calls the real handler of every function registered with ``register_function``;
   unregistered functions keep moto's echo behaviour. Errors come back as AWS returns them
   (``X-Amz-Function-Error: Unhandled`` and an ``errorType``/``errorMessage`` payload), which the
   Step Functions interpreter turns into a task failure named after the exception class.
   A function's environment variables are applied to os.environ while it runs; os.environ is
   process-global, so ``EnvironmentGate`` lets invocations with the same variables run together
   and makes functions with different variables take turns (first come, first served). The
   function's Timeout is reported by ``get_remaining_time_in_millis`` but not enforced.
   An asynchronous (``Event``) invocation runs on a thread of its own; ``drain_event_invocations``
   waits (bounded) for those still running, so that ``LocalAws`` does not stop the emulator under a
   handler that outlives the execution it answered (the fleet's lister that reduced a run answers, then
   exits: its last DynamoDB writes come after the execution has ended).
2. ``s3_listing``: ``S3Backend.list_objects_v2`` bisects a per-bucket sorted key index instead of
   sorting the whole bucket for every page; answers, truncation and continuation tokens are
   identical to moto's (the tests compare both over many pages). ``S3Backend.list_object_versions``
   given a KeyMarker without a VersionIdMarker answers as S3 does, with the versions of the keys after
   the marker: moto 5.2.5 dropped the first version at or after it (the newest version of the next key,
   so a versioned listing that starts a range at a cut point lost one version per range).
3. ``map_iteration``: the Map workers of moto's interpreter recurse once per item, so one worker
   handling ~990 items dies with RecursionError and the execution stays RUNNING forever; the
   patched ``_eval_pool`` methods iterate instead.
4. ``map_tolerance``: a Distributed Map with failed items now fails with
   ``States.ExceedToleratedFailureThreshold`` when ToleratedFailureCount/Percentage (default 0) is
   exceeded, as in AWS, instead of succeeding with ``null`` results. A Distributed Map without
   MaxConcurrency runs at most ``UNBOUNDED_MAP_WORKERS`` threads instead of one per item.
5. ``fail_state``: a Fail state whose ErrorPath yields a ``States.*`` name (re-raising a caught
   ``States.ExceedToleratedFailureThreshold`` or ``States.Timeout``) fails the execution with that
   error, instead of crashing moto's interpreter on "Custom Error Names MUST NOT begin with States.".
6. ``dynamodb``: moto's DynamoDB backend is not thread-safe (TransactWriteItems deep-copies the tables
   for its rollback while other threads change them: "dictionary changed size during iteration"), so
   every DynamoDB request is handled under one lock, as the one-at-a-time answers of a single server.
   The fleet's listers (many threads, conditional writes and transactions) depend on it.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import itertools
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

LOG = logging.getLogger(__name__)

SUPPORTED_MOTO_VERSION = "5.2.5"

# A Distributed Map with no MaxConcurrency starts this many worker threads (moto: one per item).
UNBOUNDED_MAP_WORKERS = 64
# os.environ is process-global, so invocations of functions whose environments differ take turns
# (see EnvironmentGate); a caller waits at most this long for its turn. 900 s is Lambda's maximum
# timeout, so only a real deadlock (a handler synchronously invoking another function) hits it.
ENVIRONMENT_WAIT_S = 900.0

# AWS's error names for failures of the runtime rather than of the handler's own code.
IMPORT_ERROR = "Runtime.ImportModuleError"
HANDLER_NOT_FOUND = "Runtime.HandlerNotFound"
MARSHAL_ERROR = "Runtime.MarshalError"
UNMARSHAL_ERROR = "Runtime.UnmarshalError"
ENVIRONMENT_BUSY = "Local.EnvironmentBusy"

EXCEED_TOLERATED_FAILURE_CAUSE = "The specified tolerated failure threshold was exceeded"


class MotoVersionError(RuntimeError):
    """The installed moto is not the version these patches were written and tested against."""


def check_moto_version() -> None:
    import moto

    found = getattr(moto, "__version__", "unknown")
    if found != SUPPORTED_MOTO_VERSION:
        raise MotoVersionError(
            f"hpcstage.local patches moto internals and supports moto=={SUPPORTED_MOTO_VERSION} only; "
            f"found moto {found}. Install the pinned version: pip install 'moto[server]=={SUPPORTED_MOTO_VERSION}'"
        )


# --------------------------------------------------------------------------------------------------
# Lambda: registry of code directories and in-process invocation of the real handler
# --------------------------------------------------------------------------------------------------

_registry_lock = threading.Lock()
_registry: dict[str, Path] = {}


def register_function(function_name: str, code_dir: str | os.PathLike[str]) -> None:
    """Make invocations of ``function_name`` import its handler from ``code_dir`` (a CodeUri)."""
    path = Path(code_dir).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"code directory of Lambda function {function_name!r} not found: {path}")
    with _registry_lock:
        _registry[function_name] = path


def unregister_function(function_name: str) -> None:
    """Forget the function and its imported handler modules (the next deployment starts cold)."""
    with _registry_lock:
        _registry.pop(function_name, None)
    with _modules_lock:
        for key in [key for key in _modules if key.function_name == function_name]:
            module = _modules.pop(key)
            _module_locks.pop(key, None)
            sys.modules.pop(module.__name__, None)


def registered_functions() -> dict[str, Path]:
    with _registry_lock:
        return dict(_registry)


def _code_dir_of(function_name: str) -> Path | None:
    with _registry_lock:
        return _registry.get(function_name)


class LocalLambdaContext:
    """The attributes of the Python runtime's LambdaContext that handlers and Powertools read.

    ``memory_limit_in_mb`` is a string, as the AWS runtime (awslambdaric) gives it.
    """

    def __init__(
        self,
        *,
        function_name: str,
        invoked_function_arn: str,
        memory_limit_in_mb: int,
        timeout_s: float,
        function_version: str = "$LATEST",
        aws_request_id: str | None = None,
    ) -> None:
        self.function_name = function_name
        self.function_version = function_version
        self.invoked_function_arn = invoked_function_arn
        self.memory_limit_in_mb = str(memory_limit_in_mb)
        self.aws_request_id = aws_request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/[{function_version}]{self.aws_request_id}"
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class EnvironmentBusyError(RuntimeError):
    """A function waited longer than ENVIRONMENT_WAIT_S for another function's invocations to end."""


class EnvironmentGate:
    """Applies a function's environment variables to os.environ for the duration of its invocations.

    os.environ is shared by every thread, so two functions whose variables differ cannot run at the
    same time: invocations with the same environment run concurrently (a Distributed Map calling one
    function from many workers), invocations with a different one wait their turn in arrival order
    (first come, first served, so a busy function cannot starve another). When the last invocation
    ends, the variables are restored to their previous values.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active_key: tuple[tuple[str, str], ...] | None = None
        self._active = 0
        self._saved: dict[str, str | None] = {}
        self._tickets = itertools.count()
        self._waiting: list[tuple[int, tuple[tuple[str, str], ...]]] = []

    def _may_enter(self, ticket: int, key: tuple[tuple[str, str], ...]) -> bool:
        if self._active and self._active_key != key:
            return False
        return all(other == key for t, other in self._waiting if t < ticket)

    @contextlib.contextmanager
    def applied(self, env: Mapping[str, str], wait_s: float | None = None) -> Iterator[None]:
        key = tuple(sorted(env.items()))
        deadline = time.monotonic() + (ENVIRONMENT_WAIT_S if wait_s is None else wait_s)
        with self._cond:
            entry = (next(self._tickets), key)
            self._waiting.append(entry)
            try:
                while not self._may_enter(entry[0], key):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise EnvironmentBusyError(
                            "another Lambda function with different environment variables kept running; "
                            "a handler that synchronously invokes another function cannot run locally"
                        )
                    self._cond.wait(remaining)
            finally:
                self._waiting.remove(entry)
                self._cond.notify_all()
            if self._active == 0:
                self._saved = {name: os.environ.get(name) for name in env}
                os.environ.update(env)
                self._active_key = key
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if self._active == 0:
                    for name, previous in self._saved.items():
                        if previous is None:
                            os.environ.pop(name, None)
                        else:
                            os.environ[name] = previous
                    self._saved = {}
                    self._active_key = None
                    self._cond.notify_all()


ENVIRONMENT_GATE = EnvironmentGate()


class _HandlerFailure(Exception):
    """A failure of the runtime (import, marshalling) reported under an AWS runtime error name."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True)
class _ModuleKey:
    function_name: str
    code_dir: Path
    module_path: str
    environment: tuple[tuple[str, str], ...]


_modules_lock = threading.Lock()
_modules: dict[_ModuleKey, ModuleType] = {}
_module_locks: dict[_ModuleKey, threading.Lock] = {}
_module_serial = itertools.count(1)


def _module_file(code_dir: Path, module_path: str) -> Path:
    relative = Path(*module_path.split("."))
    as_file = code_dir / relative.with_suffix(".py")
    if as_file.is_file():
        return as_file
    return code_dir / relative / "__init__.py"


def _load_handler_module(key: _ModuleKey) -> ModuleType:
    """Import the handler module once per (function, code, environment), like a cold start.

    Each function gets its own module name, so two functions whose handlers are both ``app.py`` do
    not share (or overwrite) one ``sys.modules['app']``. The import runs under the function's
    environment, because module-level code (Powertools ``Logger()``, settings models) reads it.
    """
    with _modules_lock:
        module = _modules.get(key)
        if module is not None:
            return module
        lock = _module_locks.setdefault(key, threading.Lock())
    with lock:
        with _modules_lock:
            module = _modules.get(key)
        if module is not None:
            return module
        path = _module_file(key.code_dir, key.module_path)
        safe = re.sub(r"\W", "_", f"{key.function_name}_{key.module_path}")
        unique_name = f"_hpcstage_lambda_{next(_module_serial)}_{safe}"
        spec = importlib.util.spec_from_file_location(unique_name, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise _HandlerFailure(
                IMPORT_ERROR,
                f"Unable to import module '{key.module_path}': No module named '{key.module_path}'",
            )
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - any import-time error is reported as AWS reports it
            sys.modules.pop(unique_name, None)
            raise _HandlerFailure(
                IMPORT_ERROR, f"Unable to import module '{key.module_path}': {exc}"
            ) from exc
        with _modules_lock:
            _modules[key] = module
        return module


def _function_environment(fn: Any) -> dict[str, str]:
    env = {name: str(value) for name, value in (fn.environment_vars or {}).items()}
    env.update(
        {
            "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_REGION": fn.region,
            "AWS_DEFAULT_REGION": fn.region,
        }
    )
    return env


def _error_payload(error_type: str, message: str, request_id: str, exc: BaseException | None) -> bytes:
    # Like AWS, the stack trace shows the handler's frames, not the runtime's (this file's).
    frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
    stack = traceback.format_list([frame for frame in frames if frame.filename != __file__])
    body = {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": stack}
    return json.dumps(body).encode("utf-8")


def invoke_handler(fn: Any, code_dir: Path, event: Any) -> tuple[bytes, bool]:
    """Run the handler of moto function ``fn`` from ``code_dir``; return (payload, errored)."""
    module_path, _, attribute = (fn.handler or "").rpartition(".")
    env = _function_environment(fn)
    context = LocalLambdaContext(
        function_name=fn.function_name,
        invoked_function_arn=fn.function_arn,
        memory_limit_in_mb=int(fn.memory_size),
        timeout_s=float(fn.timeout),
    )
    request_id = context.aws_request_id
    try:
        if not module_path or not attribute:
            raise _HandlerFailure(
                HANDLER_NOT_FOUND,
                f"Bad handler '{fn.handler}': not enough values to unpack (expected 2, got 1)",
            )
        key = _ModuleKey(fn.function_name, code_dir, module_path, tuple(sorted(env.items())))
        with ENVIRONMENT_GATE.applied(env):
            module = _load_handler_module(key)
            handler = getattr(module, attribute, None)
            if not callable(handler):
                raise _HandlerFailure(
                    HANDLER_NOT_FOUND, f"Handler '{attribute}' missing on module '{module_path}'"
                )
            result = handler(event, context)
        try:
            return json.dumps(result).encode("utf-8"), False
        except (TypeError, ValueError) as exc:
            raise _HandlerFailure(MARSHAL_ERROR, f"Unable to marshal response: {exc}") from exc
    except _HandlerFailure as failure:
        LOG.info("Lambda %s failed: %s: %s", fn.function_name, failure.error_type, failure)
        return _error_payload(failure.error_type, str(failure), request_id, failure.__cause__), True
    except EnvironmentBusyError as exc:
        LOG.warning("Lambda %s could not run: %s", fn.function_name, exc)
        return _error_payload(ENVIRONMENT_BUSY, str(exc), request_id, exc), True
    except Exception as exc:  # noqa: BLE001 - the handler's exception becomes the function error, as in AWS
        LOG.info("Lambda %s raised %s: %s", fn.function_name, type(exc).__name__, exc)
        return _error_payload(type(exc).__name__, str(exc), request_id, exc), True


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is not None:
        return str(value)
    lowered = name.lower()
    for header, header_value in headers.items():
        if str(header).lower() == lowered:
            return str(header_value)
    return None


def _decode_event(body: Any) -> Any:
    if body is None or body in (b"", ""):
        return {}
    text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else str(body)
    return json.loads(text)


# The threads of asynchronous invocations still running (drain_event_invocations waits for them).
_EVENT_WORKERS: set[threading.Thread] = set()
_EVENT_WORKERS_LOCK = threading.Lock()


def _run_async(fn: Any, code_dir: Path, event: Any) -> None:
    try:
        payload, errored = invoke_handler(fn, code_dir, event)
        if errored:
            LOG.warning("asynchronous invocation of %s failed: %s", fn.function_name, payload.decode("utf-8"))
    finally:
        with _EVENT_WORKERS_LOCK:
            _EVENT_WORKERS.discard(threading.current_thread())


def drain_event_invocations(timeout_s: float) -> list[str]:
    """Wait up to ``timeout_s`` in all for the asynchronous invocations still running; the names of the
    functions whose invocations are still running then (their threads are daemons: they die with the
    process)."""
    deadline = time.monotonic() + timeout_s
    with _EVENT_WORKERS_LOCK:
        workers = list(_EVENT_WORKERS)
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    return sorted(w.name.removeprefix("lambda-event-") for w in workers if w.is_alive())


def _patched_lambda_invoke(
    self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
) -> str | bytes | None:
    fn = self.get_function(function_name, qualifier)
    code_dir = _code_dir_of(fn.function_name)
    if code_dir is None:
        return _original("lambda_invoke")(self, function_name, qualifier, body, headers, response_headers)
    invocation_type = _header(headers, "X-Amz-Invocation-Type") or "RequestResponse"
    response_headers["x-amz-executed-version"] = "$LATEST"
    if invocation_type == "DryRun":
        return b""
    try:
        event = _decode_event(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        response_headers["x-amz-function-error"] = "Unhandled"
        payload = _error_payload(
            UNMARSHAL_ERROR, f"Unable to unmarshal input: {exc}", str(uuid.uuid4()), None
        )
        response_headers["Content-Length"] = str(len(payload))
        return payload
    if invocation_type == "Event":
        worker = threading.Thread(
            target=_run_async,
            args=(fn, code_dir, event),
            name=f"lambda-event-{fn.function_name}",
            daemon=True,
        )
        with _EVENT_WORKERS_LOCK:
            _EVENT_WORKERS.add(worker)
        worker.start()
        return b""
    payload, errored = invoke_handler(fn, code_dir, event)
    if errored:
        response_headers["x-amz-function-error"] = "Unhandled"
    response_headers["Content-Length"] = str(len(payload))
    return payload


# --------------------------------------------------------------------------------------------------
# S3: a sorted key index per bucket, so a ListObjectsV2 page costs O(log n + page)
# --------------------------------------------------------------------------------------------------

# One lock for every bucket's key store: it makes each key mutation and its index update atomic and
# gives a listing a consistent view. The critical sections are dict operations and one list insert.
_INDEX_LOCK = threading.RLock()
_INDEX_ATTR = "_hpcstage_sorted_names"
_MAX_CHAR = "\U0010ffff"


def _index_of(store: Any) -> list[str]:
    """The sorted names of a key store, built on first use and rebuilt if it ever disagrees in size.

    Stores are only changed through ``__setitem__``/``setlist``/``pop`` in moto 5.2.5, which keep the
    index up to date; the size check guards against any other path (it would cost one sort).
    """
    names: list[str] | None = store.__dict__.get(_INDEX_ATTR)
    if names is None or len(names) != dict.__len__(store):
        names = sorted(dict.keys(store))
        store.__dict__[_INDEX_ATTR] = names
    return names


def _index_add(store: Any, name: str) -> None:
    names: list[str] | None = store.__dict__.get(_INDEX_ATTR)
    if names is None:
        return
    at = bisect.bisect_left(names, name)
    if at == len(names) or names[at] != name:
        names.insert(at, name)


def _index_remove(store: Any, name: str) -> None:
    names: list[str] | None = store.__dict__.get(_INDEX_ATTR)
    if names is None:
        return
    at = bisect.bisect_left(names, name)
    if at < len(names) and names[at] == name:
        del names[at]


def _patched_store_setitem(self: Any, key: str, value: Any) -> Any:
    with _INDEX_LOCK:
        result = _original("store_setitem")(self, key, value)
        _index_add(self, key)
        return result


def _patched_store_setlist(self: Any, key: Any, list_: Any) -> Any:
    with _INDEX_LOCK:
        result = _original("store_setlist")(self, key, list_)
        _index_add(self, key)
        return result


def _patched_store_pop(self: Any, key: str) -> None:
    with _INDEX_LOCK:
        _original("store_pop")(self, key)
        _index_remove(self, key)


def _end_of_group(names: list[str], start: int, group: str) -> int:
    """Index of the first name at or after ``start`` that does not start with ``group``."""
    end = bisect.bisect_left(names, group + _MAX_CHAR, start)
    # Names continuing with U+10FFFF itself sort after the probe; they are rare, so step over them.
    while end < len(names) and names[end].startswith(group):
        end += 1
    return end


def scan_listing(store: Any, prefix: str, delimiter: str | None, after: str | None, limit: int) -> list[Any]:
    """Up to ``limit`` entries (FakeKey or common-prefix str) in moto's order, all named > ``after``.

    Mirrors moto's list_objects + list_objects_v2: a common prefix is reported for every key under it,
    even one whose latest version is a delete marker; keys whose latest version is a delete marker
    are not listed; a common prefix counts as one entry and is compared with ``after`` by its name.
    """
    from moto.s3.models import FakeDeleteMarker

    entries: list[Any] = []
    with _INDEX_LOCK:
        names = _index_of(store)
        at = bisect.bisect_left(names, prefix) if prefix else 0
        if after is not None:
            at = max(at, bisect.bisect_right(names, after))
        skip = len(prefix)
        # Bounded: every pass moves `at` forward by at least one name.
        while at < len(names) and len(entries) < limit:
            name = names[at]
            if not name.startswith(prefix):
                break
            cut = name.find(delimiter, skip) if delimiter else -1
            if cut >= 0 and delimiter:
                common_prefix = name[: cut + len(delimiter)]
                if after is None or common_prefix > after:
                    entries.append(common_prefix)
                at = _end_of_group(names, at + 1, common_prefix)
                continue
            versions = dict.get(store, name)
            if versions and not isinstance(versions[-1], FakeDeleteMarker):
                entries.append(versions[-1])
            at += 1
    return entries


def _patched_list_objects_v2(
    self: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> Any:
    from moto.s3.models import FakeTableStorageBucket

    original = _original("list_objects_v2")
    if isinstance(bucket, FakeTableStorageBucket) or max_keys < 0:
        return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
    after: str | None
    if continuation_token:
        after = self._pagination_tokens.get(continuation_token)
        if after is None:
            # An unknown token: keep moto's own behaviour for it, whatever it is.
            return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
    else:
        after = start_after or None
    entries = scan_listing(bucket.keys, prefix or "", delimiter or None, after, max_keys + 1)
    return self._truncate_result(entries, max_keys)


def _patched_list_object_versions(
    self: Any,
    bucket_name: str,
    delimiter: str | None = None,
    key_marker: str | None = None,
    max_keys: int | None = 1000,
    prefix: str = "",
    version_id_marker: str | None = None,
) -> Any:
    from moto.s3.models import unix_time_millis

    if key_marker and not version_id_marker:
        # S3 starts after every version of the keys <= key_marker: continue from the last of them, in the
        # order moto lists (name, newest first), with the (key, version) form of the marker, which moto
        # handles exactly; none: from the start.
        bucket = self.get_bucket(bucket_name)
        ordered = sorted(
            (v for _, versions in bucket.keys.iterlists() for v in versions if v.name <= key_marker),
            key=lambda r: (r.name, -unix_time_millis(r.last_modified)),
        )
        if ordered:
            key_marker, version_id_marker = ordered[-1].name, ordered[-1].version_id
        else:
            key_marker = None
    return _original("list_object_versions")(
        self,
        bucket_name,
        delimiter=delimiter,
        key_marker=key_marker,
        max_keys=max_keys,
        prefix=prefix,
        version_id_marker=version_id_marker,
    )


def original_list_objects_v2(
    backend: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> Any:
    """moto's own list_objects_v2, patched or not: the reference the index is tested against."""
    from moto.s3.models import S3Backend

    method = _originals.get("list_objects_v2", S3Backend.list_objects_v2)
    return method(backend, bucket, prefix, delimiter, continuation_token, start_after, max_keys)


# --------------------------------------------------------------------------------------------------
# Step Functions Map: iterate instead of recursing; enforce the tolerated failure threshold
# --------------------------------------------------------------------------------------------------


def _patched_iteration_eval_pool(self: Any, job: Any, worker_frame: Any) -> None:
    """IterationWorker._eval_pool (Inline Map) with its tail recursion turned into a loop."""
    # Bounded: each pass takes one job off a finite pool, and the pool never refills.
    while True:
        if job is None:
            self._env.close_frame(worker_frame)
            return
        job_frame = worker_frame.open_inner_frame()
        self._eval_job(env=job_frame, job=job)
        worker_frame.close_frame(job_frame)
        if isinstance(job.job_output, Exception) or self.stopped():
            self._env.close_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        next_job = self._job_pool.next_job()
        if next_job is None:
            worker_frame.event_history_context.source_event_id = (
                job_frame.event_history_context.last_published_event_id
            )
            self._env.close_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        self._job_pool.close_job(job)
        job = next_job


def _distributed_eval_pool(open_frame: Callable[[Any], Any]) -> Callable[[Any, Any, Any], None]:
    def eval_pool(self: Any, job: Any, worker_frame: Any) -> None:
        # Bounded: each pass takes one job off a finite pool, and the pool never refills.
        while True:
            if job is None:
                self._env.delete_frame(worker_frame)
                return
            job_frame = open_frame(worker_frame)
            self._eval_job(env=job_frame, job=job)
            worker_frame.delete_frame(job_frame)
            if isinstance(job.job_output, Exception) or self.stopped():
                self._env.delete_frame(worker_frame)
                self._job_pool.close_job(job)
                return
            next_job = self._job_pool.next_job()
            if next_job is None:
                self._env.delete_frame(worker_frame)
                self._job_pool.close_job(job)
                return
            self._job_pool.close_job(job)
            job = next_job

    return eval_pool


# DistributedItemProcessorWorker opens an inner frame per job, DistributedIteratorWorker a plain one.
_patched_item_processor_eval_pool = _distributed_eval_pool(lambda frame: frame.open_inner_frame())
_patched_iterator_eval_pool = _distributed_eval_pool(lambda frame: frame.open_frame())

_TOLERANCE_ATTR = "_hpcstage_tolerance_declared"


def _patched_state_map_from_state_props(self: Any, state_props: Any) -> None:
    """Remember which tolerance fields the definition sets: an unset one does not apply in AWS."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.tolerated_failure import (
        ToleratedFailureCountDecl,
        ToleratedFailurePercentageDecl,
    )

    _original("state_map_from_state_props")(self, state_props)
    declared = (
        state_props.get(ToleratedFailureCountDecl) is not None,
        state_props.get(ToleratedFailurePercentageDecl) is not None,
    )
    setattr(self.iteration_component, _TOLERANCE_ATTR, declared)


def tolerance_exceeded(
    failed: int, total: int, count: int, percentage: float, count_declared: bool, percentage_declared: bool
) -> bool:
    """AWS's rule: with neither field set any failure fails the Map Run; with one or both set, the
    Map Run fails when a set threshold is exceeded (failed = failed + timed-out items)."""
    if not count_declared and not percentage_declared:
        return failed > 0
    if count_declared and failed > count:
        return True
    return bool(percentage_declared and total and failed * 100.0 / total > percentage)


def _patched_distributed_map_run(self: Any, env: Any, eval_input: Any) -> None:
    """DistributedIterationComponent._map_run with a worker cap and the tolerated-failure check."""
    from moto.stepfunctions.parser.api import HistoryEventType, MapRunFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.max_concurrency import (
        DEFAULT_MAX_CONCURRENCY_VALUE,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    input_items: list[Any] = env.stack.pop()
    job_pool = JobPool(job_program=self._get_iteration_program(), job_inputs=input_items)
    record = eval_input.map_run_record
    if record.max_concurrency == DEFAULT_MAX_CONCURRENCY_VALUE:
        workers = min(len(input_items), UNBOUNDED_MAP_WORKERS)
    else:
        workers = min(len(input_items), record.max_concurrency)
    for _ in range(workers):
        self._launch_worker(env=env, eval_input=eval_input, job_pool=job_pool)
    job_pool.await_jobs()

    worker_exception = job_pool.get_worker_exception()
    if worker_exception is not None:
        raise worker_exception

    counts = record.item_counter
    failed = counts.failed.get() + counts.timed_out.get()
    count_declared, percentage_declared = getattr(self, _TOLERANCE_ATTR, (False, False))
    if tolerance_exceeded(
        failed,
        len(input_items),
        int(record.tolerated_failure_count),
        float(record.tolerated_failure_percentage),
        count_declared,
        percentage_declared,
    ):
        error_name = StatesErrorName(typ=StatesErrorNameType.StatesExceedToleratedFailureThreshold)
        raise FailureEventException(
            failure_event=FailureEvent(
                env=env,
                error_name=error_name,
                event_type=HistoryEventType.MapRunFailed,
                # EventDetails is a TypedDict moto declares total; at run time it is this dict.
                event_details=cast(
                    "EventDetails",
                    {
                        "mapRunFailedEventDetails": MapRunFailedEventDetails(
                            error=error_name.error_name, cause=EXCEED_TOLERATED_FAILURE_CAUSE
                        )
                    },
                ),
            )
        )
    env.stack.append([closed.job_output for closed in job_pool.get_closed_jobs()])


# --------------------------------------------------------------------------------------------------
# Step Functions Fail state: re-raising a caught "States.*" error through ErrorPath
# --------------------------------------------------------------------------------------------------


def fail_state_error_name(error: str | None) -> Any:
    """The ErrorName a Fail state reports: moto builds a CustomErrorName, which refuses any name
    starting with "States.", so the common Catch(States.ALL) -> Fail(ErrorPath: $.error.Error)
    pattern crashed the interpreter whenever the caught error was a States.* one."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
        ILLEGAL_CUSTOM_ERROR_PREFIX,
        CustomErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName

    if not error:
        return None
    if not error.startswith(ILLEGAL_CUSTOM_ERROR_PREFIX):
        return CustomErrorName(error)
    try:
        return StatesErrorName.from_name(error)
    except ValueError:
        return ErrorName(error_name=error)  # a States.* name the interpreter does not know


def _patched_state_fail_eval_state(self: Any, env: Any) -> None:
    """StateFail._eval_state, with fail_state_error_name instead of CustomErrorName."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    details = TaskFailedEventDetails()
    error_value = None
    if self.error:
        self.error.eval(env=env)
        error_value = env.stack.pop()
        details["error"] = error_value
    if self.cause:
        self.cause.eval(env=env)
        details["cause"] = env.stack.pop()
    raise FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=fail_state_error_name(error_value),
            event_type=HistoryEventType.TaskFailed,
            event_details=cast("EventDetails", {"taskFailedEventDetails": details}),
        )
    )


# --------------------------------------------------------------------------------------------------
# DynamoDB: one request at a time
# --------------------------------------------------------------------------------------------------

_DYNAMODB_LOCK = threading.RLock()


def _patched_dynamodb_call_action(self: Any) -> Any:
    with _DYNAMODB_LOCK:
        return _original("dynamodb_call_action")(self)


# --------------------------------------------------------------------------------------------------
# Applying and removing
# --------------------------------------------------------------------------------------------------


def _targets() -> dict[str, tuple[str, type, str, Any]]:
    """name -> (patch group, class, attribute, replacement)."""
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.distributed_item_processor_worker import (
        DistributedItemProcessorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.iteration_worker import (
        IterationWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.iterator.distributed_iterator_worker import (
        DistributedIteratorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap
    from moto.stepfunctions.parser.asl.component.state.fail.state_fail import StateFail

    return {
        "lambda_invoke": ("lambda", LambdaSimpleBackend, "invoke", _patched_lambda_invoke),
        "list_objects_v2": ("s3_listing", S3Backend, "list_objects_v2", _patched_list_objects_v2),
        "list_object_versions": (
            "s3_listing",
            S3Backend,
            "list_object_versions",
            _patched_list_object_versions,
        ),
        "store_setitem": ("s3_listing", _VersionedKeyStore, "__setitem__", _patched_store_setitem),
        "store_setlist": ("s3_listing", _VersionedKeyStore, "setlist", _patched_store_setlist),
        "store_pop": ("s3_listing", _VersionedKeyStore, "pop", _patched_store_pop),
        "iteration_eval_pool": ("map_iteration", IterationWorker, "_eval_pool", _patched_iteration_eval_pool),
        "item_processor_eval_pool": (
            "map_iteration",
            DistributedItemProcessorWorker,
            "_eval_pool",
            _patched_item_processor_eval_pool,
        ),
        "iterator_eval_pool": (
            "map_iteration",
            DistributedIteratorWorker,
            "_eval_pool",
            _patched_iterator_eval_pool,
        ),
        "state_map_from_state_props": (
            "map_tolerance",
            StateMap,
            "from_state_props",
            _patched_state_map_from_state_props,
        ),
        "distributed_map_run": (
            "map_tolerance",
            DistributedIterationComponent,
            "_map_run",
            _patched_distributed_map_run,
        ),
        "state_fail_eval_state": ("fail_state", StateFail, "_eval_state", _patched_state_fail_eval_state),
        "dynamodb_call_action": ("dynamodb", DynamoHandler, "call_action", _patched_dynamodb_call_action),
    }


PATCH_GROUPS = ("lambda", "s3_listing", "map_iteration", "map_tolerance", "fail_state", "dynamodb")


class _ToleranceWarningFilter(logging.Filter):
    """Drops moto's parse-time warning that tolerance fields have no effect: with map_tolerance
    applied they do, and the warning would send a reader looking for a problem that is not there."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "declarations currently have no effect" not in record.getMessage()


_TOLERANCE_WARNING_FILTER = _ToleranceWarningFilter()
_PREPROCESSOR_LOGGER = "moto.stepfunctions.parser.asl.parse.preprocessor"

_apply_lock = threading.Lock()
_originals: dict[str, Any] = {}


def _original(name: str) -> Any:
    return _originals[name]


def _check_groups(groups: tuple[str, ...] | frozenset[str]) -> None:
    unknown = set(groups) - set(PATCH_GROUPS)
    if unknown:
        raise ValueError(f"unknown moto patch groups {sorted(unknown)}; known: {list(PATCH_GROUPS)}")


def _apply(groups: tuple[str, ...] | frozenset[str]) -> None:
    for name, (group, owner, attribute, replacement) in _targets().items():
        if group in groups and name not in _originals:
            _originals[name] = owner.__dict__[attribute]
            setattr(owner, attribute, replacement)
    if "map_tolerance" in groups:
        logging.getLogger(_PREPROCESSOR_LOGGER).addFilter(_TOLERANCE_WARNING_FILTER)


def _remove(groups: tuple[str, ...] | frozenset[str]) -> None:
    for name, (group, owner, attribute, _replacement) in _targets().items():
        if group in groups and name in _originals:
            setattr(owner, attribute, _originals.pop(name))
    if "map_tolerance" in groups:
        logging.getLogger(_PREPROCESSOR_LOGGER).removeFilter(_TOLERANCE_WARNING_FILTER)


def apply_patches(groups: tuple[str, ...] = PATCH_GROUPS) -> frozenset[str]:
    """Apply the named patch groups (all by default) on top of those applied; applying twice
    changes nothing. Returns the set of groups applied after this call."""
    _check_groups(groups)
    check_moto_version()
    with _apply_lock:
        _apply(groups)
        return _applied_groups()


def remove_patches(groups: tuple[str, ...] = PATCH_GROUPS) -> None:
    """Restore the moto attributes patched by the named groups (all by default)."""
    _check_groups(groups)
    with _apply_lock:
        _remove(groups)


def use_patches(groups: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """Make exactly these groups applied; return the groups applied before, to restore them later.

    LocalAws uses it so that its ``patches`` choice holds for its lifetime whatever ran before it
    in the process, and is undone afterwards.
    """
    _check_groups(groups)
    if groups:
        check_moto_version()
    with _apply_lock:
        previous = _applied_groups()
        _remove(frozenset(PATCH_GROUPS) - frozenset(groups))
        _apply(groups)
        return previous


def _applied_groups() -> frozenset[str]:
    targets = _targets()
    return frozenset(targets[name][0] for name in _originals)


def applied_patches() -> frozenset[str]:
    with _apply_lock:
        return _applied_groups()
