"""`ocrq worker` whose pool children take OCRQ_TEST_CHILD_START_DELAY_S longer to start, as on a busy host."""

from __future__ import annotations

import os
import time

from celery.signals import worker_process_init

from cli.main import main


@worker_process_init.connect
def _start_slowly(**_kwargs) -> None:
    time.sleep(float(os.environ["OCRQ_TEST_CHILD_START_DELAY_S"]))


if __name__ == "__main__":
    main()
