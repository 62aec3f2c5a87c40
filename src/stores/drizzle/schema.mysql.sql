-- idempotent-mutations: the table of idempotency records (MySQL 8+, MariaDB 10.5+).
-- The same DDL that `createDrizzleStore(db).ensureTable()` runs for `mysqlIdempotencyKeys`; drizzle-kit
-- users can export `mysqlIdempotencyKeys` (or a `defineMySqlIdempotencyTable(...)`) from their schema instead.
-- Text columns compare byte for byte (utf8mb4_bin): keys and tokens are case-sensitive.
-- Times are UTC from the server clock (UTC_TIMESTAMP(3)); rows past expires_at are deleted by store.sweep().
-- A second run fails on CREATE INDEX with "Duplicate key name" (MySQL has no CREATE INDEX IF NOT EXISTS).

CREATE TABLE IF NOT EXISTS `idempotency_keys` (
  `scope` varchar(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `key` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `fingerprint` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `status` varchar(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `response` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  `lease_token` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `locked_until` datetime(3) NOT NULL,
  `expires_at` datetime(3) NOT NULL,
  CONSTRAINT `idempotency_keys_pkey` PRIMARY KEY(`scope`,`key`)
);

CREATE INDEX `idempotency_keys_expires_at_idx` ON `idempotency_keys` (`expires_at`);
