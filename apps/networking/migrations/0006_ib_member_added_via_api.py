"""InfiniBand partition members remember whether the members API (or the service-ports action) added them; the
service ports already there (members without an instance: compute always names one) were."""
from django.db import migrations, models


def forwards(apps, schema_editor):
    Member = apps.get_model("networking", "IbPartitionMember")
    Member.objects.filter(instance_id__isnull=True).update(added_via_api=True)


class Migration(migrations.Migration):
    dependencies = [("networking", "0005_sg_rule_whole_family_prefix")]
    operations = [
        migrations.AddField(model_name="ibpartitionmember", name="added_via_api",
                            field=models.BooleanField(default=False)),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
