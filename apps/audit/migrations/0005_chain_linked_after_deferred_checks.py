"""The chain is linked after every other deferred check of the transaction (ADR 0111, ADR 0003).

PostgreSQL fires deferred triggers at commit in the order they were queued. The chain trigger of migration 0004
fired at the transaction's first audit event and took the chain's advisory lock while the deferred foreign-key
checks of rows written after that event were still to run; such a check (`FOR KEY SHARE` on the referenced row)
could wait for a transaction that held the row `FOR UPDATE` and was itself waiting, at its commit, for the chain
lock: a deadlock.

Now linking has two deferred stages, both named `audit_event_chain` (so `SET CONSTRAINTS audit_event_chain
IMMEDIATE` still links at once):

1. on `audit_auditevent`: queue the event (a row in `audit_chainpending`) and take no lock. A trigger event
   queued while the commit fires deferred triggers runs after all those already queued.
2. on `audit_chainpending`: take the chain lock, link the event, drop the pending row. By then every other
   deferred check of the transaction has run, so the lock is held only by a transaction that waits for nothing
   else.
"""
from django.db import migrations

FORWARD = """
CREATE UNLOGGED TABLE audit_chainpending (event_id uuid PRIMARY KEY);

CREATE OR REPLACE FUNCTION audit_event_chain() RETURNS trigger AS $$
BEGIN
  INSERT INTO audit_chainpending (event_id) VALUES (NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION audit_event_chain_link() RETURNS trigger AS $$
DECLARE
  e audit_auditevent;
  last_seq bigint;
  last_hash text;
BEGIN
  PERFORM pg_advisory_xact_lock(7262626001);
  SELECT * INTO e FROM audit_auditevent WHERE id = NEW.event_id;
  SELECT seq, hash INTO last_seq, last_hash FROM audit_auditchainlink ORDER BY seq DESC LIMIT 1;
  IF last_seq IS NULL THEN
    last_seq := 0;
    last_hash := repeat('0', 64);
  END IF;
  INSERT INTO audit_auditchainlink (event_id, seq, prev_hash, hash)
  VALUES (e.id, last_seq + 1, last_hash,
          encode(sha256(convert_to(last_hash || audit_event_canonical(e), 'UTF8')), 'hex'));
  DELETE FROM audit_chainpending WHERE event_id = NEW.event_id;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER audit_event_chain AFTER INSERT ON audit_chainpending
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit_event_chain_link();
"""

# Back to migration 0004's single stage (the lock taken at the first event's trigger).
REVERSE = """
DROP TRIGGER IF EXISTS audit_event_chain ON audit_chainpending;
DROP FUNCTION IF EXISTS audit_event_chain_link();
DROP TABLE IF EXISTS audit_chainpending;
CREATE OR REPLACE FUNCTION audit_event_chain() RETURNS trigger AS $$
DECLARE
  last_seq bigint;
  last_hash text;
BEGIN
  PERFORM pg_advisory_xact_lock(7262626001);
  SELECT seq, hash INTO last_seq, last_hash FROM audit_auditchainlink ORDER BY seq DESC LIMIT 1;
  IF last_seq IS NULL THEN
    last_seq := 0;
    last_hash := repeat('0', 64);
  END IF;
  INSERT INTO audit_auditchainlink (event_id, seq, prev_hash, hash)
  VALUES (NEW.id, last_seq + 1, last_hash,
          encode(sha256(convert_to(last_hash || audit_event_canonical(NEW), 'UTF8')), 'hex'));
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0004_hash_chain_and_no_truncate'),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
