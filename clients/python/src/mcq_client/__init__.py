"""Python client for mcq, the distributed Monte Carlo job queue.

>>> from mcq_client import Client
>>> with Client("http://127.0.0.1:8080") as mcq:
...     batch = mcq.submit_batch([{"runs": 100_000}] * 20, seed=2010)
...     mcq.wait(batch.id)
...     prices = [r.price for r in mcq.results(batch.id)]

Errors the server answers raise :class:`ProblemError`; a server that cannot
be reached raises :class:`UnreachableError`.
"""

from .client import Client
from .errors import FieldError, McqError, ProblemError, UnreachableError, WaitTimeout
from .seeds import MAX_SEED, job_seed
from .version import __version__
from .views import Batch, BatchStatus, Job, PriceStats, Result, StateCounts

__all__ = [
    "Batch",
    "BatchStatus",
    "Client",
    "FieldError",
    "Job",
    "MAX_SEED",
    "McqError",
    "PriceStats",
    "ProblemError",
    "Result",
    "StateCounts",
    "UnreachableError",
    "WaitTimeout",
    "__version__",
    "job_seed",
]
