"""`ocrq worker` whose pool child dies once, right after a page task wrote its result and before the ack."""

from __future__ import annotations

import os
from pathlib import Path

from celery.signals import task_success

from cli.main import main

MARK = Path(os.environ["OCRQ_TEST_CRASH_MARK"])


@task_success.connect
def _die_before_ack(sender=None, **_kwargs) -> None:
    if sender is not None and sender.name == "ocrq.ocr_page" and not MARK.exists():
        MARK.write_text(str(os.getpid()))
        os._exit(1)


if __name__ == "__main__":
    main()
