"""Ship the two default SLA tiers, the number sequences, and database guards:
usage records are immutable, and a finalized/paid/void invoice keeps its number and amounts."""
from decimal import Decimal

from django.db import migrations

DEFAULT_TIERS = [
    {"code": "standard", "name": "Standard", "target_uptime_pct": Decimal("99.0"), "support_response_minutes": 480,
     "credit_schedule": [{"below": "99.0", "credit_pct": "10"}, {"below": "95.0", "credit_pct": "30"},
                         {"below": "90.0", "credit_pct": "100"}]},
    {"code": "premium", "name": "Premium", "target_uptime_pct": Decimal("99.9"), "support_response_minutes": 60,
     "credit_schedule": [{"below": "99.9", "credit_pct": "10"}, {"below": "99.0", "credit_pct": "25"},
                         {"below": "95.0", "credit_pct": "100"}]},
]

GUARDS = """
CREATE OR REPLACE FUNCTION billing_usage_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'billing usage records are immutable' USING ERRCODE = 'restrict_violation'; END $$;
CREATE TRIGGER billing_usage_immutable BEFORE UPDATE OR DELETE ON billing_usagerecord
  FOR EACH ROW EXECUTE FUNCTION billing_usage_immutable();

CREATE OR REPLACE FUNCTION billing_invoice_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.status <> 'draft' AND (NEW.number IS DISTINCT FROM OLD.number OR NEW.subtotal <> OLD.subtotal
      OR NEW.credits <> OLD.credits OR NEW.tax <> OLD.tax OR NEW.total <> OLD.total
      OR NEW.period <> OLD.period OR NEW.organization_id <> OLD.organization_id OR NEW.status = 'draft') THEN
    RAISE EXCEPTION 'invoice % is % and cannot change', OLD.id, OLD.status USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER billing_invoice_frozen BEFORE UPDATE ON billing_invoice
  FOR EACH ROW EXECUTE FUNCTION billing_invoice_frozen();
"""

UNGUARDS = """
DROP TRIGGER IF EXISTS billing_usage_immutable ON billing_usagerecord;
DROP FUNCTION IF EXISTS billing_usage_immutable();
DROP TRIGGER IF EXISTS billing_invoice_frozen ON billing_invoice;
DROP FUNCTION IF EXISTS billing_invoice_frozen();
"""


def seed(apps, schema_editor):
    SlaTier = apps.get_model("billing", "SlaTier")
    NumberSequence = apps.get_model("billing", "NumberSequence")
    for tier in DEFAULT_TIERS:
        SlaTier.objects.get_or_create(code=tier["code"], defaults=tier)
    for name in ("invoice", "credit_note"):
        NumberSequence.objects.get_or_create(name=name, defaults={"next_value": 1})


def unseed(apps, schema_editor):
    apps.get_model("billing", "SlaTier").objects.filter(code__in=[t["code"] for t in DEFAULT_TIERS]).delete()


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]
    operations = [
        migrations.RunPython(seed, unseed),
        migrations.RunSQL(GUARDS, UNGUARDS),
    ]
