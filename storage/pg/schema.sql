-- hub's schema in PostgreSQL (issue #18): the tables of storage/sqlite/schema.sql
-- with the same names, columns and rules, in PostgreSQL types, so one Store
-- contract reads the same rows from either engine. Times stay milliseconds
-- since the epoch (BIGINT), JSON columns stay TEXT (the bytes a client wrote
-- read back unchanged), and the CHECKs SQLite needed triggers for are plain
-- CHECKs. Every text column orders and compares byte by byte (COLLATE "C"),
-- as SQLite does, whatever the database's default collation: page tokens and
-- orderings are the same on both engines. No triflux history: PostgreSQL
-- databases are hub's own.
--
-- Every statement is idempotent (IF NOT EXISTS): storage/pg/pg_schema.cc runs
-- the whole file in one transaction, under an advisory lock, whenever the
-- recorded version is older than kPgSchemaVersion.

-- Columns of a few fixed values (or a range) are domains, not table CHECKs
-- (hub_schema_version 10). PostgreSQL reads a table's CHECK constraints back
-- from their stored text and compiles them once per statement that writes
-- the table: on the messages table that was about 7 % of the writer's CPU
-- per publish (measured 2026-12-05, commit 6a9cde2; the run is in git history
-- of docs/BENCHMARKS.md). A domain's checks are
-- read once per session and cached. Each domain is created bare and gets
-- its check apart, after the columns use it: a column turned into a domain
-- with a check would have its whole table rewritten, one turned into a bare
-- domain is not, and adding the check then only reads the rows once. The
-- same statements make a new database and upgrade one of version 9 or
-- older (whose table CHECKs, the same rules, are dropped).
DO $$ BEGIN
  CREATE DOMAIN hub_agent_cli AS TEXT COLLATE "C";
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_agent_status AS TEXT COLLATE "C";
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_message_type AS TEXT COLLATE "C";
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_message_priority AS INTEGER;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_message_status AS TEXT COLLATE "C";
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS agents (
  agent_id TEXT COLLATE "C" PRIMARY KEY,
  cli hub_agent_cli NOT NULL,
  pid BIGINT,
  capabilities_json TEXT COLLATE "C" NOT NULL DEFAULT '[]',
  topics_json TEXT COLLATE "C" NOT NULL DEFAULT '[]',
  last_seen_ms BIGINT NOT NULL,
  lease_expires_ms BIGINT NOT NULL,
  status hub_agent_status NOT NULL,
  metadata_json TEXT COLLATE "C" NOT NULL DEFAULT '{}',
  project_id TEXT COLLATE "C",
  session_id TEXT COLLATE "C",
  host_id TEXT COLLATE "C",
  transport_locators_json TEXT COLLATE "C" NOT NULL DEFAULT '[]',
  presence_generation BIGINT NOT NULL DEFAULT 0,
  lease_ttl_ms BIGINT,
  -- The hub (and its incarnation) that holds the agent's presence: the
  -- one it registered, attached or heartbeated through last, or the one
  -- that took it over from a dead hub. NULL: no hub holds it.
  -- docs/design/multi-hub.md.
  stream_hub_id TEXT COLLATE "C",
  stream_hub_incarnation BIGINT
);
CREATE INDEX IF NOT EXISTS idx_agents_stream_hub
  ON agents(stream_hub_id, stream_hub_incarnation)
  WHERE stream_hub_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_agents_status ON agents(status);
CREATE INDEX IF NOT EXISTS idx_agents_lease ON agents(lease_expires_ms);
-- Version 9 and older: the same rules as table CHECKs.
ALTER TABLE agents
  DROP CONSTRAINT IF EXISTS agents_cli_check,
  DROP CONSTRAINT IF EXISTS agents_status_check,
  ALTER COLUMN cli TYPE hub_agent_cli,
  ALTER COLUMN status TYPE hub_agent_status;
DO $$ BEGIN
  ALTER DOMAIN hub_agent_cli ADD CONSTRAINT hub_agent_cli_check
    CHECK (VALUE IN ('codex', 'gemini', 'claude', 'other'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  ALTER DOMAIN hub_agent_status ADD CONSTRAINT hub_agent_status_check
    CHECK (VALUE IN ('online', 'stale', 'offline'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS messages (
  id TEXT COLLATE "C" PRIMARY KEY,
  type hub_message_type NOT NULL,
  from_agent TEXT COLLATE "C" NOT NULL,
  to_agent TEXT COLLATE "C" NOT NULL,
  topic TEXT COLLATE "C" NOT NULL,
  priority hub_message_priority NOT NULL,
  ttl_ms BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  correlation_id TEXT COLLATE "C" NOT NULL,
  trace_id TEXT COLLATE "C" NOT NULL,
  payload_json TEXT COLLATE "C" NOT NULL DEFAULT '{}',
  status hub_message_status NOT NULL,
  role_key_wire TEXT COLLATE "C"
);
-- The same partial indexes of pending messages as SQLite's (an ack takes a
-- message out of them and adds nothing).
CREATE INDEX IF NOT EXISTS idx_messages_expiry_pending
  ON messages(expires_at_ms) WHERE status IN ('queued', 'delivered');
CREATE INDEX IF NOT EXISTS idx_messages_trace ON messages(trace_id);
CREATE INDEX IF NOT EXISTS idx_messages_role_pending
  ON messages(role_key_wire, expires_at_ms)
  WHERE role_key_wire IS NOT NULL AND status IN ('queued', 'delivered');
-- Version 9 and older: the same rules as table CHECKs. A column a trigger's
-- WHEN names cannot change its type: the trigger is made again below.
DROP TRIGGER IF EXISTS hub_inbox_pending_status ON messages;
ALTER TABLE messages
  DROP CONSTRAINT IF EXISTS messages_type_check,
  DROP CONSTRAINT IF EXISTS messages_priority_check,
  DROP CONSTRAINT IF EXISTS messages_status_check,
  ALTER COLUMN type TYPE hub_message_type,
  ALTER COLUMN priority TYPE hub_message_priority,
  ALTER COLUMN status TYPE hub_message_status;
DO $$ BEGIN
  ALTER DOMAIN hub_message_type ADD CONSTRAINT hub_message_type_check
    CHECK (VALUE IN ('request', 'response', 'event', 'handoff',
                     'human_request', 'human_response', 'system'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  ALTER DOMAIN hub_message_priority ADD CONSTRAINT hub_message_priority_check
    CHECK (VALUE BETWEEN 1 AND 9);
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  ALTER DOMAIN hub_message_status ADD CONSTRAINT hub_message_status_check
    CHECK (VALUE IN ('queued', 'delivered', 'acked', 'expired', 'dead_letter'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

-- delivery_id orders one recipient's deliveries as they were written; it is
-- no cursor across hubs (an identity is handed out in insert order, not
-- commit order: docs/design/postgres.md).
CREATE TABLE IF NOT EXISTS message_inbox (
  delivery_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_id TEXT COLLATE "C" NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  agent_id TEXT COLLATE "C" NOT NULL,
  delivered_at_ms BIGINT,
  acked_at_ms BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  UNIQUE (message_id, agent_id)
);
-- An agent's unacked rows: ListPending, the pending counts, an ack's rows.
-- Partial (hub_schema_version 3): a full index on agent_id also held every
-- acked row an agent ever had, and a planner that misjudged an agent's
-- rows (a new agent, statistics older than it) walked all of them per ack.
DROP INDEX IF EXISTS idx_inbox_agent;
CREATE INDEX IF NOT EXISTS idx_inbox_agent_unacked
  ON message_inbox(agent_id, delivered_at_ms) WHERE acked_at_ms IS NULL;
-- Rows no push reached yet (a publish through another hub than the one
-- holding the recipient's stream): what that hub reads to push them.
CREATE INDEX IF NOT EXISTS idx_inbox_undelivered
  ON message_inbox(agent_id)
  WHERE delivered_at_ms IS NULL AND acked_at_ms IS NULL;

-- Each agent's pending inbox rows (unacked rows of queued|delivered
-- messages), kept in the same transaction as every change to them, whoever
-- writes it: what the inbox limit compares with. A hub's writer keeps them
-- in the statements that change those rows (its session sets
-- hub.inbox_counts = 'kept', storage/pg/pg_store.cc); every other session
-- (an operator's SQL, `hubctl db copy`, a hub older than
-- hub_schema_version 9) has them kept by the triggers below, which skip
-- the writer's statements.
-- A COUNT per publish would read as many rows as the inbox holds (up to the
-- limit: 10 000 by default). The count is two rows: hub_inbox_pending.pending
-- grows with every row that starts to count (a publish, a recipient added,
-- a message queued again), hub_inbox_settled.settled with every row that
-- stops (an ack, an expiry, a dead letter, a delete); an inbox's count is
-- pending - settled. A publish locks its recipients' pending rows (FOR
-- UPDATE) so that concurrent publishes from any hub cannot overshoot the
-- limit, and reads settled without a lock: a settle it does not see yet
-- only makes the inbox look fuller. Acks never wait for another hub's
-- publishes to the same agent, nor those for the acks (hub_schema_version
-- 3; one row for both made them take turns, a commit each).
CREATE TABLE IF NOT EXISTS hub_inbox_pending (
  agent_id TEXT COLLATE "C" PRIMARY KEY,
  pending BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS hub_inbox_settled (
  agent_id TEXT COLLATE "C" PRIMARY KEY,
  settled BIGINT NOT NULL DEFAULT 0
);

-- PL/pgSQL, not LANGUAGE sql: a SQL function called from a trigger parses
-- and plans its body on every call, a PL/pgSQL one once per session
-- (measured 2026-12-01, commit 8b46a9e; the run is in git history of
-- docs/BENCHMARKS.md).
CREATE OR REPLACE FUNCTION hub_inbox_pending_add(agent TEXT, delta BIGINT)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF delta > 0 THEN
    INSERT INTO hub_inbox_pending AS p (agent_id, pending) VALUES (agent, delta)
    ON CONFLICT (agent_id) DO UPDATE SET pending = p.pending + delta;
  ELSE
    INSERT INTO hub_inbox_settled AS s (agent_id, settled)
    VALUES (agent, -delta)
    ON CONFLICT (agent_id) DO UPDATE SET settled = s.settled - delta;
  END IF;
END $$;

-- An inbox row counts while it is unacked and its message is pending.
-- The message and the rows are found by key, spelled so as to imply nothing
-- about the partial indexes of pending messages and unacked rows: small in a
-- hub whose agents keep up, the planner would walk one filtered by id
-- (hub_schema_version 8; storage/pg/pg_message_sql.h, HUB_PG_PENDING_BY_KEY).
CREATE OR REPLACE FUNCTION hub_inbox_pending_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.acked_at_ms IS NULL
     AND EXISTS (SELECT 1 FROM messages WHERE id = OLD.message_id
                 AND COALESCE(status, '') IN ('queued', 'delivered')) THEN
    PERFORM hub_inbox_pending_add(OLD.agent_id, -1);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.acked_at_ms IS NULL
     AND EXISTS (SELECT 1 FROM messages WHERE id = NEW.message_id
                 AND COALESCE(status, '') IN ('queued', 'delivered')) THEN
    PERFORM hub_inbox_pending_add(NEW.agent_id, 1);
  END IF;
  RETURN NULL;
END $$;

-- A message entering or leaving pending moves each of its unacked rows.
-- A deleted message's rows are uncounted before the cascade deletes them
-- (the rows' own trigger no longer finds the message then).
CREATE OR REPLACE FUNCTION hub_inbox_pending_message() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  was BOOLEAN := TG_OP IN ('UPDATE', 'DELETE')
                 AND OLD.status IN ('queued', 'delivered');
  now_pending BOOLEAN := TG_OP = 'UPDATE'
                         AND NEW.status IN ('queued', 'delivered');
BEGIN
  IF was <> now_pending THEN
    PERFORM hub_inbox_pending_add(i.agent_id, CASE WHEN was THEN -1 ELSE 1 END)
    FROM message_inbox i
    WHERE i.message_id = OLD.id AND COALESCE(i.acked_at_ms, -1) < 0
    ORDER BY i.agent_id;
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NULL;
END $$;

-- Not for a session that keeps the counts in its own statements (a hub's
-- writer, hub_schema_version 9): the condition is evaluated before any
-- PL/pgSQL runs, and calling the functions cost a publish and its ack
-- about an eighth of the server's CPU (measured 2026-12-05, commit 7ead9b9;
-- the run is in git history of docs/BENCHMARKS.md).
CREATE OR REPLACE TRIGGER hub_inbox_pending_row
  AFTER INSERT OR DELETE OR UPDATE OF acked_at_ms ON message_inbox
  FOR EACH ROW
  WHEN (current_setting('hub.inbox_counts', true) IS DISTINCT FROM 'kept')
  EXECUTE FUNCTION hub_inbox_pending_row();
CREATE OR REPLACE TRIGGER hub_inbox_pending_status
  AFTER UPDATE OF status ON messages
  FOR EACH ROW WHEN ((OLD.status IN ('queued', 'delivered')) IS DISTINCT FROM
                     (NEW.status IN ('queued', 'delivered'))
                     AND current_setting('hub.inbox_counts', true)
                         IS DISTINCT FROM 'kept')
  EXECUTE FUNCTION hub_inbox_pending_message();
CREATE OR REPLACE TRIGGER hub_inbox_pending_delete
  BEFORE DELETE ON messages
  FOR EACH ROW
  WHEN (current_setting('hub.inbox_counts', true) IS DISTINCT FROM 'kept')
  EXECUTE FUNCTION hub_inbox_pending_message();

CREATE TABLE IF NOT EXISTS dead_letters (
  message_id TEXT COLLATE "C" PRIMARY KEY,
  reason TEXT COLLATE "C" NOT NULL,
  failed_at_ms BIGINT NOT NULL,
  last_error TEXT COLLATE "C"
);
CREATE INDEX IF NOT EXISTS idx_dead_letters_failed
  ON dead_letters(failed_at_ms DESC, message_id);

CREATE TABLE IF NOT EXISTS role_registry (
  role_key_wire TEXT COLLATE "C" PRIMARY KEY,
  project_id TEXT COLLATE "C" NOT NULL,
  role_kind TEXT COLLATE "C" NOT NULL CHECK (role_kind IN ('cto', 'lead')),
  scope_id TEXT COLLATE "C" NOT NULL DEFAULT '',
  state TEXT COLLATE "C" NOT NULL CHECK (state IN ('electable', 'elected-probing', 'active',
                                       'unreachable', 'quarantined')),
  holder_agent_id TEXT COLLATE "C",
  previous_holder_agent_id TEXT COLLATE "C",
  epoch BIGINT NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  activation_seq BIGINT NOT NULL DEFAULT 0 CHECK (activation_seq >= 0),
  activation_id TEXT COLLATE "C",
  activation_deadline_ms BIGINT,
  holder_lease_expires_ms BIGINT,
  charter_version TEXT COLLATE "C",
  charter_acked_epoch BIGINT,
  retry_count BIGINT NOT NULL DEFAULT 0,
  next_probe_ms BIGINT,
  blocked_reason TEXT COLLATE "C",
  last_transition_ms BIGINT NOT NULL,
  last_reason TEXT COLLATE "C" NOT NULL,
  version BIGINT NOT NULL DEFAULT 0,
  CHECK ((role_kind = 'cto' AND scope_id = '') OR
         (role_kind = 'lead' AND scope_id <> '')),
  CHECK (state <> 'active' OR holder_agent_id IS NOT NULL),
  UNIQUE (project_id, role_kind, scope_id)
);

CREATE TABLE IF NOT EXISTS role_candidates (
  role_key_wire TEXT COLLATE "C" NOT NULL
    REFERENCES role_registry(role_key_wire) ON DELETE CASCADE,
  agent_id TEXT COLLATE "C" NOT NULL,
  source TEXT COLLATE "C" NOT NULL CHECK (source IN ('grant', 'standup', 'operator')),
  priority BIGINT NOT NULL DEFAULT 0,
  transport_locators_json TEXT COLLATE "C" NOT NULL DEFAULT '[]',
  consecutive_probe_failures BIGINT NOT NULL DEFAULT 0,
  excluded_until_ms BIGINT,
  last_probe_ms BIGINT,
  last_probe_code TEXT COLLATE "C",
  updated_at_ms BIGINT NOT NULL,
  PRIMARY KEY (role_key_wire, agent_id)
);
-- Candidates by agent (a candidate's arrival re-ensures its roles).
CREATE INDEX IF NOT EXISTS idx_role_candidates_agent
  ON role_candidates(agent_id);

CREATE TABLE IF NOT EXISTS hub_agent_owners (
  agent_id TEXT COLLATE "C" PRIMARY KEY,
  principal TEXT COLLATE "C" NOT NULL CHECK (principal <> ''),
  claimed_at_ms BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS hub_closed_scopes (
  project_id TEXT COLLATE "C" NOT NULL,
  scope_id TEXT COLLATE "C" NOT NULL CHECK (scope_id <> ''),
  role_key_wire TEXT COLLATE "C" NOT NULL UNIQUE,
  closed_at_ms BIGINT NOT NULL,
  closed_by TEXT COLLATE "C" NOT NULL CHECK (closed_by <> ''),
  reason TEXT COLLATE "C" NOT NULL,
  dead_lettered_count BIGINT CHECK (dead_lettered_count >= 0),
  PRIMARY KEY (project_id, scope_id)
);

-- hub_schema_version 2: path reservations (docs/design/reservations.md),
-- as in SQLite's schema.sql. Every reservation write of a project locks its
-- token row first (SELECT ... FOR UPDATE), so reserves of one project
-- serialize across hubs and each sees what the previous one committed.
CREATE TABLE IF NOT EXISTS hub_reservation_tokens (
  project_id TEXT COLLATE "C" PRIMARY KEY,
  last_token BIGINT NOT NULL CHECK (last_token >= 0),
  held BIGINT NOT NULL CHECK (held >= 0)
);

CREATE TABLE IF NOT EXISTS hub_reservations (
  reservation_id TEXT COLLATE "C" PRIMARY KEY,
  project_id TEXT COLLATE "C" NOT NULL,
  agent_id TEXT COLLATE "C" NOT NULL,
  presence_generation BIGINT NOT NULL,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  token BIGINT NOT NULL CHECK (token > 0),
  reason TEXT COLLATE "C" NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  UNIQUE (project_id, token)
);
CREATE INDEX IF NOT EXISTS idx_hub_reservations_agent
  ON hub_reservations (agent_id, project_id);
CREATE INDEX IF NOT EXISTS idx_hub_reservations_expiry
  ON hub_reservations (expires_at_ms);

CREATE TABLE IF NOT EXISTS hub_reservation_patterns (
  reservation_id TEXT COLLATE "C" NOT NULL
    REFERENCES hub_reservations (reservation_id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  project_id TEXT COLLATE "C" NOT NULL,
  pattern TEXT COLLATE "C" NOT NULL CHECK (pattern <> ''),
  prefix TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (reservation_id, pattern)
);
CREATE INDEX IF NOT EXISTS idx_hub_reservation_patterns_prefix
  ON hub_reservation_patterns (project_id, prefix);

-- hub_schema_version 4: the reservation change log (WatchReservations,
-- docs/design/reservations.md, "Watching"). Every reservation write appends
-- one row per reservation it grants, renews, narrows or ends, in its own
-- transaction, with the reservation after the change (as it was, for an
-- end); `patterns` are its normalized patterns joined by newlines. The row
-- is inserted without a seq; a deferred constraint trigger gives it the
-- next one from the counter at COMMIT, as hub_role_change_logged does for
-- roles: the counter's lock is the transaction's last, so seq order is
-- commit order and a reader that sees seq n sees every change before it
-- (a BIGSERIAL seq, handed out in insert order, would let a reader paging
-- by it skip a row that commits late).
CREATE TABLE IF NOT EXISTS hub_reservation_change_counter (
  id BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
  seq BIGINT NOT NULL CHECK (seq >= 0)
);
INSERT INTO hub_reservation_change_counter (id, seq) VALUES (true, 0)
ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS hub_reservation_changes (
  change_id BIGSERIAL PRIMARY KEY,
  seq BIGINT UNIQUE,
  kind TEXT COLLATE "C" NOT NULL,
  written_at_ms BIGINT NOT NULL,
  reservation_id TEXT COLLATE "C" NOT NULL,
  project_id TEXT COLLATE "C" NOT NULL,
  agent_id TEXT COLLATE "C" NOT NULL,
  presence_generation BIGINT NOT NULL,
  exclusive INTEGER NOT NULL,
  token BIGINT NOT NULL,
  reason TEXT COLLATE "C" NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  patterns TEXT COLLATE "C" NOT NULL
);

-- hub_schema_version 5: waiting reserves, as SQLite's hub_reservation_waiters
-- (its 9): `seq` is handed out under the project's token row lock.
CREATE TABLE IF NOT EXISTS hub_reservation_waiters (
  waiter_id TEXT COLLATE "C" PRIMARY KEY,
  project_id TEXT COLLATE "C" NOT NULL,
  agent_id TEXT COLLATE "C" NOT NULL,
  presence_generation BIGINT NOT NULL,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  seq BIGINT NOT NULL CHECK (seq > 0),
  created_at_ms BIGINT NOT NULL,
  deadline_ms BIGINT NOT NULL,
  patterns TEXT COLLATE "C" NOT NULL,
  UNIQUE (project_id, seq)
);

-- hub_schema_version 6: what a waiter waits behind (SQLite's 10): the ids
-- its last attempt conflicted with, at most 4, joined by newlines; the
-- change log carries them on `waiting` changes.
ALTER TABLE hub_reservation_waiters
  ADD COLUMN IF NOT EXISTS waits_for TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE hub_reservation_changes
  ADD COLUMN IF NOT EXISTS waits_for TEXT COLLATE "C" NOT NULL DEFAULT '';

-- hub_schema_version 7: a pattern row's mode, and the partial index shared
-- requests read exclusive patterns through (SQLite's 11): a row from before
-- counts as exclusive (DEFAULT 1), which only makes shared requests read it.
ALTER TABLE hub_reservation_patterns
  ADD COLUMN IF NOT EXISTS exclusive INTEGER NOT NULL DEFAULT 1
  CHECK (exclusive IN (0, 1));
CREATE INDEX IF NOT EXISTS idx_hub_reservation_patterns_exclusive
  ON hub_reservation_patterns (project_id, prefix) WHERE exclusive = 1;

CREATE OR REPLACE FUNCTION hub_reservation_change_logged() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  n BIGINT;
BEGIN
  INSERT INTO hub_reservation_change_counter AS c (id, seq) VALUES (true, 1)
  ON CONFLICT (id) DO UPDATE SET seq = c.seq + 1
  RETURNING c.seq INTO n;
  UPDATE hub_reservation_changes SET seq = n WHERE change_id = NEW.change_id;
  RETURN NULL;
END $$;

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger
                 WHERE tgname = 'hub_reservation_change_logged'
                   AND tgrelid = 'hub_reservation_changes'::regclass) THEN
    CREATE CONSTRAINT TRIGGER hub_reservation_change_logged
      AFTER INSERT ON hub_reservation_changes
      DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION hub_reservation_change_logged();
  END IF;
END $$;

-- Whether `doc` is a JSON array with the string `item` among its elements;
-- false for text that is no JSON array at all (a malformed topics_json
-- matches nothing instead of failing the query, as in SQLite).
CREATE OR REPLACE FUNCTION hub_json_array_has(doc TEXT, item TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
  RETURN jsonb_typeof(doc::jsonb) = 'array' AND doc::jsonb ? item;
EXCEPTION WHEN others THEN
  RETURN false;
END
$$;

-- The hubs sharing this database (docs/design/multi-hub.md). A hub's lease
-- is renewed in the database's clock (clock_timestamp()); a hub whose lease
-- ran out is declared dead by another (state dead) and its agents taken
-- over in the same transaction. Incarnations come from one sequence, so a
-- hub that joins again never gets a number it or anyone had before.
CREATE SEQUENCE IF NOT EXISTS hub_incarnations;
CREATE TABLE IF NOT EXISTS hub_hubs (
  hub_id TEXT COLLATE "C" PRIMARY KEY,
  incarnation BIGINT NOT NULL,
  address TEXT COLLATE "C" NOT NULL,
  state TEXT COLLATE "C" NOT NULL CHECK (state IN ('live', 'dead', 'left')),
  joined_at TIMESTAMPTZ NOT NULL,
  renewed_at TIMESTAMPTZ NOT NULL,
  lease_expires_at TIMESTAMPTZ NOT NULL,
  -- Set once, by the hub that declared this one dead (or found it left) and
  -- took over its agents.
  taken_over_at TIMESTAMPTZ,
  taken_over_by TEXT COLLATE "C"
);

-- One row per group transaction of a hub's writer, inserted by the
-- transaction itself before any operation of the group runs
-- (storage/pg/pg_group_commit.h): when COMMIT's answer is lost with the
-- connection, the writer looks its id up to learn whether the group
-- committed. The id is a UUIDv7 of the writer's (time-ordered, unique across
-- hubs and across a failover); begun_at is the database's clock. A row is
-- needed for seconds; writers delete rows over ten minutes old as they go.
CREATE TABLE IF NOT EXISTS hub_commits (
  id UUID PRIMARY KEY,
  begun_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The role change log: every committed change of a role_registry row, by
-- whatever path wrote it (a hub's store, a copy, an operator's SQL), so that
-- every hub can publish every change to its watchers
-- (docs/design/multi-hub.md, "Role changes across hubs"). `seq` is the
-- change's place in commit order: consecutive (1, 2, 3, ...; a rolled-back
-- write leaves no hole) and, once a reader sees seq n, every change before
-- it is visible too. A BIGSERIAL would not do: it is handed out in insert
-- order, and a reader paging by it skips a row that commits late.
CREATE TABLE IF NOT EXISTS hub_role_change_counter (
  id BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
  seq BIGINT NOT NULL CHECK (seq >= 0)
);
INSERT INTO hub_role_change_counter (id, seq) VALUES (true, 0)
ON CONFLICT (id) DO NOTHING;

-- After seq, kind and the database's clock when the change committed
-- (written_at_ms), the role row after the change (for `removed`, the row as
-- it was): role_registry's columns, in its order (LIKE), and nothing else,
-- so that the trigger copies the row as it is (NEW.*) and a reader reads it
-- as role_registry's. A column added to role_registry must be added here
-- too (pg_schema_test checks it; the trigger would fail every role write).
-- Plain columns rather than JSON: half the bytes (no key names), so half the
-- WAL the log adds to a role write. Rows older than a few minutes are pruned
-- (hubs start reading at the head).
CREATE TABLE IF NOT EXISTS hub_role_changes (
  seq BIGINT PRIMARY KEY,
  kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('created', 'updated', 'removed')),
  written_at_ms BIGINT NOT NULL,
  LIKE role_registry
);

-- Appends one change. A deferred constraint trigger runs at COMMIT, after
-- every other statement of the transaction, so the counter row's lock is
-- taken last and held only while the transaction commits: whoever waits for
-- it holds nothing the holder could want (no deadlock through the counter,
-- however a group mixes its operations), and the order in which
-- transactions get it is the order in which they commit. The upsert cannot
-- fail, so neither can the COMMIT because of it.
CREATE OR REPLACE FUNCTION hub_role_change_logged() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  n BIGINT;
BEGIN
  INSERT INTO hub_role_change_counter AS c (id, seq) VALUES (true, 1)
  ON CONFLICT (id) DO UPDATE SET seq = c.seq + 1
  RETURNING c.seq INTO n;
  IF TG_OP = 'DELETE' THEN
    INSERT INTO hub_role_changes
    SELECT n, 'removed', (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
           OLD.*;
  ELSE
    INSERT INTO hub_role_changes
    SELECT n, CASE TG_OP WHEN 'INSERT' THEN 'created' ELSE 'updated' END,
           (extract(epoch FROM clock_timestamp()) * 1000)::bigint, NEW.*;
  END IF;
  RETURN NULL;
END $$;

-- CREATE OR REPLACE does not apply to constraint triggers.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger
                 WHERE tgname = 'hub_role_change_logged'
                   AND tgrelid = 'role_registry'::regclass) THEN
    CREATE CONSTRAINT TRIGGER hub_role_change_logged
      AFTER INSERT OR UPDATE OR DELETE ON role_registry
      DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION hub_role_change_logged();
  END IF;
END $$;

-- hub_schema_version 11: jobs (docs/design/jobs.md), as SQLite's
-- assign_jobs, hub_job_dependencies and hub_job_late_results (its 12):
-- triflux's columns first, then hub's, with the same names, defaults and
-- rules. hub writes triflux's `status` word beside its own `hub_state` on
-- every row, and `hubctl db copy` fills hub_state of a row triflux wrote
-- from its status (storage/pg/copy_rows.cc), so on PostgreSQL hub_state is
-- set on every row hub made or copied: claims, the deadline sweep and a gone
-- worker's attempts read the partial indexes below, which hold only rows
-- with a hub_state. The column stays nullable, as SQLite's: a write fenced
-- on a state still matches a row with none by its status
-- (storage/pg/pg_job_rows.cc). The enumerated columns are domains, as
-- agents' and messages' are (hub_schema_version 10): every fenced write of
-- a job would otherwise compile the table's CHECKs again.
DO $$ BEGIN
  CREATE DOMAIN hub_job_status AS TEXT COLLATE "C"
    CHECK (VALUE IN ('queued', 'running', 'succeeded', 'failed', 'timed_out'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_job_state AS TEXT COLLATE "C"
    CHECK (VALUE IN ('blocked', 'queued', 'offered', 'running',
                     'waiting_human', 'succeeded', 'failed', 'timed_out',
                     'cancelled'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_job_worker_kind AS TEXT COLLATE "C"
    CHECK (VALUE IN ('agent', 'role', 'pool'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_job_dependency_failure AS TEXT COLLATE "C"
    CHECK (VALUE IN ('cancel', 'block'));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE DOMAIN hub_job_flag AS INTEGER CHECK (VALUE IN (0, 1));
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS assign_jobs (
  job_id TEXT COLLATE "C" PRIMARY KEY,
  supervisor_agent TEXT COLLATE "C" NOT NULL,
  worker_agent TEXT COLLATE "C" NOT NULL,
  topic TEXT COLLATE "C" NOT NULL DEFAULT 'assign.job',
  task TEXT COLLATE "C" NOT NULL DEFAULT '',
  payload_json TEXT COLLATE "C" NOT NULL DEFAULT '{}',
  status hub_job_status NOT NULL,
  attempt BIGINT NOT NULL DEFAULT 1,
  retry_count BIGINT NOT NULL DEFAULT 0,
  max_retries BIGINT NOT NULL DEFAULT 0,
  priority BIGINT NOT NULL DEFAULT 5,
  ttl_ms BIGINT NOT NULL DEFAULT 600000,
  timeout_ms BIGINT NOT NULL DEFAULT 600000,
  deadline_ms BIGINT,
  trace_id TEXT COLLATE "C",
  correlation_id TEXT COLLATE "C",
  last_message_id TEXT COLLATE "C",
  result_json TEXT COLLATE "C",
  error_json TEXT COLLATE "C",
  created_at_ms BIGINT NOT NULL,
  updated_at_ms BIGINT NOT NULL,
  started_at_ms BIGINT,
  dispatched_at_ms BIGINT,
  completed_at_ms BIGINT,
  last_retry_at_ms BIGINT,
  hub_state hub_job_state,
  project_id TEXT COLLATE "C",
  supervisor_role_wire TEXT COLLATE "C",
  worker_kind hub_job_worker_kind NOT NULL DEFAULT 'agent',
  worker_role_wire TEXT COLLATE "C",
  pool_filter_json TEXT COLLATE "C",
  retry_policy_json TEXT COLLATE "C",
  on_dependency_failure hub_job_dependency_failure NOT NULL DEFAULT 'cancel',
  idempotency_key TEXT COLLATE "C",
  attempt_worker TEXT COLLATE "C",
  attempt_generation BIGINT,
  attempt_role_epoch BIGINT,
  not_before_ms BIGINT,
  cancel_requested hub_job_flag NOT NULL DEFAULT 0,
  progress_json TEXT COLLATE "C"
);
-- Claims read a project's queued jobs by priority, then age.
CREATE INDEX IF NOT EXISTS idx_hub_jobs_queued
  ON assign_jobs (project_id, priority DESC, created_at_ms, job_id)
  WHERE hub_state = 'queued';
-- A gone worker's attempts; the deadline sweep.
CREATE INDEX IF NOT EXISTS idx_hub_jobs_attempt_worker
  ON assign_jobs (attempt_worker, attempt_generation)
  WHERE attempt_worker IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_hub_jobs_live_deadline
  ON assign_jobs (deadline_ms)
  WHERE hub_state IN ('offered', 'running', 'waiting_human');
CREATE UNIQUE INDEX IF NOT EXISTS idx_hub_jobs_idempotency
  ON assign_jobs (project_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- ListJobs: newest change first.
CREATE INDEX IF NOT EXISTS idx_hub_jobs_updated
  ON assign_jobs (updated_at_ms DESC, job_id DESC);

-- A job's dependencies: job_id waits for parent_id to succeed.
CREATE TABLE IF NOT EXISTS hub_job_dependencies (
  job_id TEXT COLLATE "C" NOT NULL,
  parent_id TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (job_id, parent_id)
);
CREATE INDEX IF NOT EXISTS idx_hub_job_dependencies_parent
  ON hub_job_dependencies (parent_id);

-- The first result or error each superseded attempt reported, kept.
CREATE TABLE IF NOT EXISTS hub_job_late_results (
  job_id TEXT COLLATE "C" NOT NULL,
  attempt BIGINT NOT NULL,
  agent_id TEXT COLLATE "C" NOT NULL,
  result_json TEXT COLLATE "C",
  error_json TEXT COLLATE "C",
  reported_at_ms BIGINT NOT NULL,
  PRIMARY KEY (job_id, attempt)
);

-- hub_schema_version 12: who held each attempt (a claim inserts its row),
-- so that a late result is kept only from the attempt's own worker
-- (SQLite's 13).
CREATE TABLE IF NOT EXISTS hub_job_attempts (
  job_id TEXT COLLATE "C" NOT NULL,
  attempt BIGINT NOT NULL CHECK (attempt >= 1),
  agent_id TEXT COLLATE "C" NOT NULL,
  presence_generation BIGINT NOT NULL,
  role_epoch BIGINT,
  claimed_at_ms BIGINT NOT NULL,
  PRIMARY KEY (job_id, attempt)
);
