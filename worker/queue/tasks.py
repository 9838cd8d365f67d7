"""The retry rule every task of ocrq shares."""

from __future__ import annotations

from common.outages import TASK_RETRY_TYPES

# While the database or storage is unreachable a task tries again later instead of failing: every task is
# idempotent, and the sweepers would find its work anyway, only later. Periodic sweeps just wait for the next run.
RETRY_OUTAGES = {"autoretry_for": TASK_RETRY_TYPES, "retry_backoff": 2, "retry_backoff_max": 30,
                 "retry_jitter": True, "max_retries": 40}

