"""`ocrq worker` with two defects on its page path: rendering a document's first page raises, and so does writing
a read page's result. Neither is an outage, a bad document or a time limit."""

from __future__ import annotations

from celery.signals import worker_init

from cli.main import main


class Defect(RuntimeError):
    pass


@worker_init.connect
def _break(**_kwargs) -> None:
    # After the worker chose its metrics folder (the pipeline imports prometheus_client), before its pool forks.
    from common.jobs import states
    from worker.jobs import pipeline

    render_page, finish_page = pipeline.render_page, states.finish_page

    def render(path, index, **kwargs):
        if index == 0:
            raise Defect("/srv/ocrq/worker/jobs/pipeline.py: render blew up")
        return render_page(path, index, **kwargs)

    def finish(session, *, page_id, outcome):
        if outcome.error is None:
            raise Defect("/srv/ocrq/common/jobs/states.py: write blew up")
        return finish_page(session, page_id=page_id, outcome=outcome)

    pipeline.render_page, states.finish_page = render, finish


if __name__ == "__main__":
    main()
