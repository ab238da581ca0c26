-- Messages stored by Sluice consumers that have no statement configured
-- (the demo and quick starts). The primary key on the source's message id
-- makes redelivery idempotent: a second insert of the same id changes
-- nothing. {prefix} is the configured table prefix.
CREATE TABLE IF NOT EXISTS {prefix}messages (
  id          VARCHAR(255) NOT NULL,
  body        JSON         NOT NULL,
  stored_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
