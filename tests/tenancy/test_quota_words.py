"""Quota keys in a person's words (`apps.tenancy.quotas.quota_words`, `quota_reason`): a tenant reads "8
H100-SXM5-80GB GPUs" and "2048 GiB of memory", never ``gpus:H100-SXM5-80GB`` or ``memory_mib``."""
from __future__ import annotations

from apps.tenancy.quotas import quota_amount, quota_reason, quota_words


def test_each_key_in_words_with_its_unit():
    assert quota_words("gpus:H100-SXM5-80GB", 8) == "8 H100-SXM5-80GB GPUs"
    assert quota_words("gpus", 8) == "8 GPUs"
    assert quota_words("memory_mib", 2097152) == "2048 GiB of memory"
    assert quota_words("memory_mib", 1536) == "1.5 GiB of memory"
    assert quota_words("vcpus", 64) == "64 vCPUs"
    assert quota_words("volume_gib:ssd", 500) == "500 GiB of ssd volumes"
    assert quota_words("mig_slices:3g.40gb", 7) == "7 3g.40gb MIG slices"
    assert quota_words("ib_partitions", 2) == "2 InfiniBand partitions"
    assert (quota_amount("memory_mib", 65536), quota_amount("instances", 3)) == ("64 GiB", "3")


def test_an_exceeded_line_as_a_reason():
    line = {"resource": "gpus:H100", "scope": "project", "limit": 8, "used": 8, "requested": 1, "exceeded": True}
    assert quota_reason(line) == {
        "code": "quota_exceeded", "resource": "gpus:H100", "scope": "project",
        "message": "Quota of this project: 8 H100 GPUs allowed, 8 in use, this launch needs 1 more"}
