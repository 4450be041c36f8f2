"""troth.sdk: durable async functions.

``Troth`` is the app (registry, client, worker); ``Context`` is what a durable function
uses for durable calls. See ``troth.sdk.app`` and ``troth.sdk.context``.
"""

from troth.sdk.app import Troth
from troth.sdk.client import DurablePromise, ExecutionStatus, Handle, QueuedStatus
from troth.sdk.clock import VirtualClock, WallClock
from troth.sdk.codec import Codec, JsonSerializer
from troth.sdk.context import Context, DurableFuture
from troth.sdk.errors import (
    AlreadySettledError,
    CanceledError,
    FunctionNotFoundError,
    HaltedError,
    IdempotencyConflictError,
    NetworkError,
    NonDeterminismError,
    RemoteError,
    ServerError,
    TimedOutError,
    TrothError,
    UnstorableValueError,
)
from troth.sdk.options import Options
from troth.sdk.queues import Queue, RateLimit
from troth.sdk.retry import Constant, Exponential, Linear, Never, RetryPolicy
from troth.sdk.saga import Saga
from troth.sdk.worker_process import worker_main

__all__ = [
    "AlreadySettledError",
    "CanceledError",
    "Codec",
    "Constant",
    "Context",
    "DurableFuture",
    "DurablePromise",
    "ExecutionStatus",
    "Exponential",
    "FunctionNotFoundError",
    "HaltedError",
    "Handle",
    "IdempotencyConflictError",
    "JsonSerializer",
    "Linear",
    "NetworkError",
    "Never",
    "NonDeterminismError",
    "Options",
    "Queue",
    "QueuedStatus",
    "RateLimit",
    "RemoteError",
    "RetryPolicy",
    "Saga",
    "ServerError",
    "TimedOutError",
    "Troth",
    "TrothError",
    "UnstorableValueError",
    "VirtualClock",
    "WallClock",
    "worker_main",
]
