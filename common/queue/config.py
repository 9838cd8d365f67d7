"""Every Celery setting of ocrq, in one place, each with the reason it is set."""

from __future__ import annotations

from kombu import Exchange, Queue

from common.queue import fs_broker, names
from common.queue.buckets import buckets
from common.queue.names import CONTROL_QUEUE, WEBHOOK_QUEUE, cpu_worker_queues, gpu_worker_queues
from common.settings import Settings


def gpu_worker_config(settings: Settings) -> dict:
    """What a GPU worker changes: it must hold a whole pair (or larger batch) of every bucket to send it together.

    A worker that sends each page alone holds one page a process or thread: any more would wait there for a busy
    one while another worker has a free one (on the H200, 6 of 1,024 pages reached the engine 31 s late).
    """
    pair = max(1, settings.engine_pair_size)
    return {"worker_prefetch_multiplier": pair * len(buckets()) if pair > 1 else 1}


# Seconds between a worker's scans for messages of dead workers whose visibility timeout has passed.
UNACKED_RESTORE_INTERVAL_S = 5

# Seconds a new pool child has to load its engine and report up before Celery replaces it.
WORKER_PROC_ALIVE_TIMEOUT_S = 120.0


def build_config(settings: Settings) -> dict:
    transport_options: dict = {
        # Above the hard time limit (Settings checks it), or Redis would hand a live page to a second worker.
        "visibility_timeout": settings.visibility_timeout_s,
        # Honour the order of -Q, so control and interactive queues are drained before bulk.
        "queue_order_strategy": "priority",
        # kombu looks for messages past their visibility timeout every interval x throttle seconds, 10 x 10 by
        # default: a dead worker's unacked page waited up to 100 s beyond the timeout. Look every 5 s.
        "unacked_restore_interval": UNACKED_RESTORE_INTERVAL_S,
        "unacked_restore_throttle": 1,
    }
    if settings.is_embedded_broker:
        folder = str(settings.broker_folder)
        transport_options = {
            # API and worker share one folder: that folder is the embedded default's queue.
            "data_folder_in": folder,
            "data_folder_out": folder,
            "control_folder": str(settings.broker_folder.parent / "broker-control"),
            # The default 1 s poll would idle the worker between pages.
            "polling_interval": 0.05,
        }
    elif settings.broker_key_prefix:
        # Lets several deployments (or test runs) share one Redis without seeing each other's queues.
        transport_options["global_keyprefix"] = settings.broker_key_prefix
    return {
        "broker_url": settings.resolved_broker_url,
        # Embedded: kombu's filesystem transport, but a message file appears only once it is whole.
        "broker_transport": fs_broker.TRANSPORT if settings.is_embedded_broker else None,
        "broker_transport_options": transport_options,
        # JSON only: a pickle from the wire would execute code.
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        # Results live in the database; a result backend would only duplicate them.
        "task_ignore_result": True,
        # Ack after the page is written, so a worker dying mid-page gets the page redelivered.
        "task_acks_late": True,
        # A child killed by SIGKILL or the OOM killer requeues its message instead of acking it.
        "task_reject_on_worker_lost": True,
        # Hold only the message being worked on (by default); the rest stay in the queue for other workers.
        "worker_prefetch_multiplier": settings.worker_prefetch_multiplier,
        # Soft below hard: the soft limit raises inside the task so the page can fail with a reason.
        "task_soft_time_limit": settings.task_soft_time_limit_s,
        "task_time_limit": settings.task_time_limit_s,
        # The API must not hang on a dead broker: a few quick retries, then an error it can report.
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 3, "interval_start": 0, "interval_step": 0.5, "interval_max": 1},
        "broker_connection_timeout": 5,
        "broker_connection_retry_on_startup": True,
        # A worker that loses the broker drops what it holds; the messages come back to another worker.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        # A pool child loads its engine before it reports up. Celery's 4 s default kills a child still loading
        # on a busy host and forks another, forever: the worker beats and holds its prefetched pages but reads
        # nothing (the soak in bench/soak.py saw 37 such kills in a row in one worker).
        "worker_proc_alive_timeout": WORKER_PROC_ALIVE_TIMEOUT_S,
        "task_default_queue": CONTROL_QUEUE,
        # One direct exchange per queue: sharing the default exchange would copy each message to every queue.
        "task_queues": [Queue(name, Exchange(name), routing_key=name)
                        for name in (*cpu_worker_queues(), WEBHOOK_QUEUE, *gpu_worker_queues())],
        "task_create_missing_queues": True,
        # Task events let Flower and the metrics see queue and run times.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        # Celery's own logging setup would override ours.
        "worker_hijack_root_logger": False,
        "beat_schedule": {
            "requeue-stale": {"task": names.REQUEUE_STALE, "schedule": settings.sweep_interval_s,
                              "options": {"queue": CONTROL_QUEUE}},
            # Batches: restart listings that stopped, close items and batches whose end was missed.
            "sweep-batches": {"task": names.SWEEP_BATCHES, "schedule": settings.batch_sweep_interval_s,
                              "options": {"queue": CONTROL_QUEUE}},
            # Publishes webhook retries too long for a countdown, and deliveries whose worker died. Every 10 s bounds
            # how late a long retry goes out. On the control queue, which always has a consumer: a sweep parked on
            # the webhook queue of a deployment without webhook workers would pile up forever.
            "sweep-webhooks": {"task": names.SWEEP_WEBHOOKS, "schedule": 10.0, "options": {"queue": CONTROL_QUEUE}},
            # Retention: delete uploads and results past their days; hourly is plenty for periods counted in days.
            "purge-expired": {"task": names.PURGE_EXPIRED, "schedule": settings.retention_sweep_interval_s,
                              "options": {"queue": CONTROL_QUEUE}},
        },
        "beat_schedule_filename": str(settings.home / "celerybeat-schedule"),
    }
