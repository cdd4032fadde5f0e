# The usage summary's `gpus_exclusive` counts only GPUs that are healthy and scrubbed (`inventory_gpu.scrub_state =
# 'clean'`, docs/compute.md "Scrub"); the trigger function of 0002 is replaced with the same body plus that test,
# and every host's count is recomputed once.
from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION scheduling_hostusage_on_gpus() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM scheduling_hostusage u WHERE u.host_id IN (SELECT DISTINCT c.host_id FROM changed c)
    ORDER BY u.host_id FOR UPDATE;
  IF TG_OP = 'DELETE' THEN
    UPDATE scheduling_hostusage u SET
      gpu_model = coalesce((SELECT min(g.model) FROM inventory_gpu g WHERE g.host_id = u.host_id), ''),
      gpus_exclusive = (SELECT count(*) FROM inventory_gpu g WHERE g.host_id = u.host_id
                          AND g.mode = 'exclusive' AND g.health = 'ok' {scrubbed})
    WHERE u.host_id IN (SELECT DISTINCT c.host_id FROM changed c);
  ELSE
    INSERT INTO scheduling_hostusage AS u (host_id, gpu_model, gpus_exclusive, gpus_busy, vcpus_used,
                                           memory_used_mib, projects, updated_at)
    SELECT c.host_id, coalesce(min(g.model), ''),
           count(g.id) FILTER (WHERE g.mode = 'exclusive' AND g.health = 'ok' {scrubbed}),
           0, 0, 0, '{}', now()
    FROM (SELECT DISTINCT host_id FROM changed) c LEFT JOIN inventory_gpu g ON g.host_id = c.host_id
    GROUP BY c.host_id
    ON CONFLICT (host_id) DO UPDATE SET gpu_model = EXCLUDED.gpu_model, gpus_exclusive = EXCLUDED.gpus_exclusive;
  END IF;
  RETURN NULL;
END $$;
"""

RECOUNT = """
UPDATE scheduling_hostusage u SET gpus_exclusive = (
  SELECT count(*) FROM inventory_gpu g WHERE g.host_id = u.host_id
    AND g.mode = 'exclusive' AND g.health = 'ok' {scrubbed})
"""

FORWARD = (FUNCTION + RECOUNT).replace("{scrubbed}", "AND g.scrub_state = 'clean'")
BACKWARD = (FUNCTION + RECOUNT).replace(" {scrubbed}", "")  # the body of 0002


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0002_gpu_scrub'),
        ('scheduling', '0003_allocation_class_created_index'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
