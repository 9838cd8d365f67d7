"""Python client for the ocrq API."""
