"""Security-group rules: a remote prefix of the whole family (0.0.0.0/0, ::/0) is stored as no prefix, which
means the same; a rule that thereby equals an older rule of its group is that rule twice and is removed."""
from django.db import migrations

KEY = ("security_group_id", "direction", "ethertype", "protocol", "port_range_min", "port_range_max", "icmp_type",
       "icmp_code", "remote_ip_prefix", "remote_group_id")


def forwards(apps, schema_editor):
    Rule = apps.get_model("networking", "SecurityGroupRule")
    Rule.objects.filter(remote_ip_prefix__in=["0.0.0.0/0", "::/0"]).update(remote_ip_prefix="")
    seen = set()
    for rule in Rule.objects.filter(remote_ip_prefix="").order_by("created_at", "id"):
        key = tuple(getattr(rule, f) for f in KEY)
        if key in seen:
            rule.delete()
        else:
            seen.add(key)


class Migration(migrations.Migration):
    dependencies = [("networking", "0004_fabric_drift_event")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
