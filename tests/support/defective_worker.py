"""`ocrq worker` with a defect on its page path (OCRQ_TEST_DEFECT): `render` raises while a page is rendered,
`write` while a read page's result is written. Neither is an outage, a bad document or a time limit."""

from __future__ import annotations

import os

from celery.signals import worker_init

from cli.main import main

DEFECT = os.environ["OCRQ_TEST_DEFECT"]


class Defect(RuntimeError):
    pass


def _render(*_args, **_kwargs):
    raise Defect("/srv/ocrq/worker/jobs/pipeline.py: render blew up")


@worker_init.connect
def _break(**_kwargs) -> None:
    # After the worker chose its metrics folder (the pipeline imports prometheus_client), before its pool forks.
    from common.jobs import states
    from worker.jobs import pipeline

    finish_page = states.finish_page

    def finish(session, *, page_id, outcome):
        if outcome.error is None:
            raise Defect("/srv/ocrq/common/jobs/states.py: write blew up")
        return finish_page(session, page_id=page_id, outcome=outcome)

    if DEFECT == "render":
        pipeline.render_page = _render
    elif DEFECT == "write":
        states.finish_page = finish

if __name__ == "__main__":
    main()
