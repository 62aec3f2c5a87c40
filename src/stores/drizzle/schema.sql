-- idempotent-mutations: the table of idempotency records (PostgreSQL).
-- The same DDL that `createDrizzleStore(db).ensureTable()` runs for `idempotencyKeys`; drizzle-kit
-- users can export `idempotencyKeys` (or a `defineIdempotencyTable(...)`) from their schema instead.
-- Times are set from the server clock (statement_timestamp()); rows past expires_at are deleted by store.sweep().

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
  "scope" text NOT NULL,
  "key" text NOT NULL,
  "fingerprint" text NOT NULL,
  "status" text NOT NULL,
  "response" text,
  "lease_token" text NOT NULL,
  "locked_until" timestamp with time zone NOT NULL,
  "expires_at" timestamp with time zone NOT NULL,
  CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope", "key")
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" ("expires_at");
