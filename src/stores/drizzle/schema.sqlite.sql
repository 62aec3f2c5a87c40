-- idempotent-mutations: the table of idempotency records (SQLite, libSQL).
-- The same DDL that `createDrizzleStore(db).ensureTable()` runs for `sqliteIdempotencyKeys`; drizzle-kit
-- users can export `sqliteIdempotencyKeys` (or a `defineSQLiteIdempotencyTable(...)`) from their schema instead.
-- Times are epoch milliseconds from the database clock; rows past expires_at are deleted by store.sweep().
-- Several processes on one file: PRAGMA journal_mode = WAL once, and a busy timeout on every connection.

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
  "scope" text NOT NULL,
  "key" text NOT NULL,
  "fingerprint" text NOT NULL,
  "status" text NOT NULL,
  "response" text,
  "lease_token" text NOT NULL,
  "locked_until" integer NOT NULL,
  "expires_at" integer NOT NULL,
  PRIMARY KEY("scope", "key")
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" ("expires_at");
