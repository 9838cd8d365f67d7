"""Object storage keys, namespaced by tenant."""


def source_key(*, tenant_id: str, job_id: str) -> str:
    return f"tenants/{tenant_id}/jobs/{job_id}/source"


def result_prefix(*, tenant_id: str, job_id: str) -> str:
    return f"tenants/{tenant_id}/jobs/{job_id}/result"
