"""docling-serve's API (/v1/convert/*, /v1/status/poll, /v1/result) spoken over ocrq jobs.

The wire shapes are those of docling-serve 1.x as its client reads them (docling-slim's
docling/datamodel/service/responses.py and requests.py, docling-project/docling-serve docling_serve/app.py);
they are written here in pydantic alone, so the service needs nothing of docling to answer them.
"""
