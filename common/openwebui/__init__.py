"""Open WebUI's external document loader (PUT {url}/process) answered by ocrq jobs.

The contract is Open WebUI's ExternalDocumentLoader (open-webui/open-webui,
backend/open_webui/retrieval/loaders/external_document.py; the same in the open-webui 0.12.4 wheel): it PUTs the
file's bytes with `Authorization: Bearer <key>`, `X-Filename` (URL-quoted) and the file's Content-Type, and reads
a JSON object or a list of them, each `page_content` (a string) and `metadata` (an object), into LangChain
Documents. A 422 whose detail says "No extractable text" lets it fall back to Open WebUI's own parsing.
"""
