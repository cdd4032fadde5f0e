# The VgpuDevice model (nothing wrote it; the ledger and the instance's devices record vGPUs) leaves the state.
# Its table stays for release N's code, which still joins it (ADR 1120, "Contract"; a later release drops it);
# its foreign keys go now, so nothing references the tables it pointed at (a TRUNCATE of them, as a test
# database's flush does, would otherwise refuse). The table is empty: nothing ever wrote a row.

from django.db import migrations

DROP_FKS = """
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'inventory_vgpudevice'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE inventory_vgpudevice DROP CONSTRAINT %I', r.conname);
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0007_agent_command_restore_devices'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='VgpuDevice')],
            database_operations=[migrations.RunSQL(DROP_FKS, reverse_sql=migrations.RunSQL.noop)],
        ),
    ]
