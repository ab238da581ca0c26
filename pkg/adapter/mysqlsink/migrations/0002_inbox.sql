-- The inbox: one row per message stored, written in the same transaction as
-- the message's statement. A redelivered id with the same body hash is a
-- duplicate (nothing is applied again); with another hash it is an id
-- collision (poison). Rows older than the retention are removed in chunks,
-- oldest first, by the stored_at index.
CREATE TABLE IF NOT EXISTS {prefix}sluice_inbox (
  message_id   VARBINARY(512) NOT NULL,
  body_sha256  BINARY(32)     NOT NULL,
  loop_id      VARCHAR(255)   NOT NULL DEFAULT '',
  stored_at    DATETIME(6)    NOT NULL,
  PRIMARY KEY (message_id),
  KEY stored_at (stored_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
