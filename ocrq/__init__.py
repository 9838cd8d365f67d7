"""Python client for the ocrq API: `from ocrq import Client`."""

from ocrq.client import TERMINAL, AsyncClient, AsyncJob, Client, Event, Job, OcrqError, Retry

__all__ = ["TERMINAL", "AsyncClient", "AsyncJob", "Client", "Event", "Job", "OcrqError", "Retry"]
