"""Every parameter of the simulated world, in one place, each with where it comes from.

"assumption" marks a number no public source pins down; RESULTS.md lists them again with what the
result is sensitive to. Change a value here and re-run ``python -m bench.steal_bench`` (or the old peers in bench/sim/strategies.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class S3Params:
    # ListObjectsV2 page latency = lognormal(median 1, sigma) x (fixed + per_key x keys returned).
    # Calibrated so a 1,000-key page has median 155 ms, 5th-95th percentile ~80-300 ms, mean ~168 ms
    # (~6k objects/s per stream). Sources: listing.md "Measured single-stream rates: 3k-12k objects/s
    # (about 80-300 ms a page)"; aws-samples/s3-fast-list README (100M in 8,214 s = 82 ms/page);
    # ClickHouse#65572 (~0.3 s a page); 2014 blog (25M in 2 h = 288 ms/page).
    latency_fixed_s: float = 0.045
    latency_per_key_s: float = 0.000110
    latency_sigma: float = 0.40
    # Request-rate limit per partition. S3 documents >= 5,500 GET/HEAD and 3,500 PUT/COPY/POST/DELETE
    # requests/s per partitioned prefix and says nothing of LIST (listing.md). ListObjectsV2 is an HTTP
    # GET on the bucket, so we use the GET figure -- an assumption; RESULTS.md shows 3,500 as well.
    partition_rate_limit: float = 5_500.0
    # How many partitions the bucket has, as equal-count key ranges. No public source: S3 partitions
    # by load history. Assumption: 1 per 100M objects (a 1B-object bucket has 10), at least 1.
    objects_per_partition: int = 100_000_000
    # Time S3 takes to answer 503 SlowDown (assumption: a fast error, like the fixed part of a page).
    slowdown_latency_s: float = 0.030
    # Small-object GET / PUT (results, stats, round files in the results bucket): median latency.
    # Assumption: 40 ms / 60 ms (in-region small objects; AWS's performance guidelines quote 100-200 ms
    # first-byte latency as what to design for, so these are on the fast side).
    get_latency_s: float = 0.040
    put_latency_s: float = 0.060
    # Price: LIST billed with PUT/COPY/POST at $0.005 per 1,000 requests (S3 Standard, us-east-1;
    # listing.md and hpcstage.s3util.LIST_PRICE_PER_1000). 503s are not billed (assumption).
    list_price_per_1000: float = 0.005


@dataclass(frozen=True)
class RetryParams:
    # botocore 1.44.5 "standard" retry mode (botocore/retries/standard.py): full jitter,
    # t_i = rand(0,1) * min(base_scale * 2**i, 20 s), base_scale 1 s for throttling errors;
    # retry quota 500 tokens, a throttling retry costs 5, a success without retry refunds 1.
    # hpcstage.s3util.retry_config sets max_attempts=10.
    max_attempts: int = 10
    base_scale_s: float = 1.0  # throttling errors (503 SlowDown)
    non_throttling_base_s: float = 0.05  # other errors: 500, resets (ExponentialBackoff's default config)
    max_backoff_s: float = 20.0
    quota_capacity: int = 500
    throttling_retry_cost: int = 5
    success_refund: int = 1


@dataclass(frozen=True)
class LambdaParams:
    # Account concurrency quota: 1,000 per Region by default (AWS Lambda quotas; Lambda Operator Guide).
    concurrency: int = 1_000
    # Scaling rate: 1,000 new execution environments every 10 s per function, refilled continuously
    # (docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html). Modelled as a token bucket.
    scale_burst: int = 1_000
    scale_per_s: float = 100.0
    # Maximum duration of one invocation (Lambda quotas: 900 s).
    timeout_s: float = 900.0
    # Cold start: runtime init + importing hpcstage, boto3, pyarrow. Measured import on this machine:
    # 0.21 s; Lambda at 1,024 MB has ~0.58 vCPU and loads a ~170 MB layer (local-execution.md).
    # Assumption: 1.0 s in total.
    cold_start_s: float = 1.0
    # Overhead of a warm invocation through Step Functions' lambda:invoke (assumption: 50 ms).
    warm_invoke_s: float = 0.05
    # CPU per 1,000-object page in the lister, everything a page costs: the request, the page parser, URL
    # decoding, Parquet and statistics, through the direct page path the listers use (hpcstage.s3direct, on
    # by default since 2026-11-25). `python -m bench.cpu_per_key --alternate-direct 4` on 2026-11-26 (17:33
    # UTC, load 0.2-0.9): 3.04, 3.34, 3.31, 3.12 CPU-s per million keys with it (3.64, 3.52, 4.16, 3.97
    # through botocore); the median, 3.2 ms a page, scaled by 1/0.58 vCPU at 1,024 MB -> 5.5 ms. One
    # stream's figure, as before: a lister's eight threads share the GIL (not measured). (Until 2026-11-26:
    # 10.6 ms, from 6.13 ms at 1b5a40a, before the direct path; until 2026-11-23: 8 ms, Parquet and
    # statistics alone.)
    cpu_per_page_s: float = 0.0055
    # vCPU of a 1,024 MB Lambda (the listers'; the fleet's reduce runs in the lister that ends the run): CPU
    # measured on this machine is scaled by 1/vcpu (Lambda allocates CPU in proportion to memory, one vCPU at
    # 1,769 MB: docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html)
    vcpu: float = 0.58
    # Memory of the peers' Lambda functions: ListerMemoryMB=1,024 as hpcstage's listers (template.yaml).
    # Only used for the GB-s price. (hpcstage's own fleet is costed by bench/sim/des.py.)
    memory_gb: float = 1.0
    memory_gb_by_function: tuple[tuple[str, float], ...] = (("list", 1.0),)
    # Price (us-east-1, x86): $0.0000166667 per GB-s and $0.20 per 1M requests (AWS Lambda pricing).
    price_gb_s: float = 0.0000166667
    price_per_request: float = 0.20 / 1_000_000


@dataclass(frozen=True)
class StepFunctionsParams:
    # Distributed Map runs up to 10,000 child executions in parallel (Step Functions docs,
    # "Orchestrating large-scale parallel workloads"); hpcstage sets MaxConcurrency to the Lambda quota.
    max_concurrency: int = 1_000
    # Child execution start rate: no published figure. Assumption: 500 children/s.
    child_start_rate: float = 500.0
    # Map Run start overhead and the lag between the last child finishing and the Map state completing.
    # re:Post "Why is Step Function's Distributed Map slow?": work done within 1 s of MapRunStarted,
    # then 6+ s before the parent continues. We use 1 s + 6 s.
    map_start_s: float = 1.0
    map_finish_s: float = 6.0
    # Standard workflow price: $0.025 per 1,000 state transitions (AWS Step Functions pricing).
    price_per_transition: float = 0.025 / 1_000
    # Transitions: each child execution ~2 (start + Task); the parent ~6 per round (Map, Choice, Pass...).
    transitions_per_child: int = 2
    transitions_per_round: int = 6
    # The reducer of the static-nohints peer: assumption 0.5 s + 2 ms per result (parallel GETs).
    reduce_fixed_s: float = 0.5
    reduce_per_result_s: float = 0.002
    # Distributed Map's own s3:listObjectsV2 ItemReader, batched 1,000 items per child (ItemBatcher).
    reader_batch_items: int = 1_000


@dataclass(frozen=True)
class HpcstageParams:
    """Settings of the peers that run on hpcstage's platform (Lambda + Distributed Map) without its fleet."""

    # Peers that run on the same Lambda/Distributed Map platform without splitting (static ranges)
    # resume a range that outlives one invocation from its checkpoint, stopping at this budget.
    static_budget_s: float = 840.0


@dataclass(frozen=True)
class SimParams:
    s3: S3Params = field(default_factory=S3Params)
    retry: RetryParams = field(default_factory=RetryParams)
    lam: LambdaParams = field(default_factory=LambdaParams)
    sfn: StepFunctionsParams = field(default_factory=StepFunctionsParams)
    hpc: HpcstageParams = field(default_factory=HpcstageParams)
    seed: int = 20240601

    def with_s3(self, **kw: object) -> SimParams:
        return replace(self, s3=replace(self.s3, **kw))  # type: ignore[arg-type]

    def with_hpc(self, **kw: object) -> SimParams:
        return replace(self, hpc=replace(self.hpc, **kw))  # type: ignore[arg-type]


DEFAULT = SimParams()
