-- idempotent-mutations: delete expired records (PostgreSQL), from pg_cron or any scheduler.
-- The same rows store.sweep() deletes: those past expires_at on the server's clock, 1000 per
-- transaction, skipping rows a claim holds locked (the next run takes them). Each batch
-- commits on its own, so no lock is held for longer than one batch. Run it as one statement
-- outside a transaction block (pg_cron, psql -f, psql -c do). For your own table, replace
-- "idempotency_keys" (twice) with its name, schema-qualified if it has a schema. It pauses
-- 50 ms between two batches, so a large backlog does not take the database from the requests
-- it serves meanwhile (remove the pg_sleep line to sweep at full speed).
DO $sweep$
DECLARE
  swept integer;
BEGIN
  LOOP
    DELETE FROM "idempotency_keys"
    WHERE ("scope", "key") IN (
      SELECT "scope", "key" FROM "idempotency_keys"
      WHERE "expires_at" <= statement_timestamp()
      LIMIT 1000
      FOR UPDATE SKIP LOCKED
    ) AND "expires_at" <= statement_timestamp();
    GET DIAGNOSTICS swept = ROW_COUNT;
    COMMIT;
    EXIT WHEN swept < 1000;
    PERFORM pg_sleep(0.05);
  END LOOP;
END
$sweep$;
