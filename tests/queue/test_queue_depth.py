"""Queue depth on the embedded filesystem broker: messages Celery really wrote, counted per queue."""

from __future__ import annotations

from common.queue.app import create_celery
from common.queue.depth import QueueDepths
from common.settings import Settings


def test_filesystem_broker_depth_per_queue(tmp_path):
    settings = Settings(home=tmp_path)
    app = create_celery(settings)
    for queue in ("ocrq.pages.bulk", "ocrq.pages.bulk", "ocrq.gpu.b2048", "other.queue"):
        app.send_task("ocrq.nothing", args=["x"], queue=queue)
    depths = QueueDepths(settings, known=["ocrq.control", "celery"]).read()
    assert depths == {"ocrq.control": 0, "ocrq.pages.bulk": 2, "ocrq.gpu.b2048": 1}
