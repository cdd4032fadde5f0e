"""The demo storage catalog (`manage.py demo_load`): one shared `ssd` type, loaded once however often it runs."""
import io

import pytest

from apps.storage.demo import load_demo
from apps.storage.models import VolumeType

pytestmark = pytest.mark.django_db


def test_demo_volume_type_is_loaded_once():
    out = io.StringIO()
    load_demo(out)
    load_demo(out)
    assert [(t.name, t.pool_kind, t.host_local, t.is_active) for t in VolumeType.objects.all()] == [
        ("ssd", "dir", False, True)]
    assert out.getvalue().splitlines() == ["storage: 1 demo volume type created (ssd)",
                                           "storage: 0 demo volume type created (ssd)"]
