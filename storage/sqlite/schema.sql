-- hub's storage schema. Table and column names are triflux's (schema v8) so a
-- triflux database opens and migrates in place; see docs/design/storage.md.
--
-- Every statement is idempotent (IF NOT EXISTS): the migrator runs this whole
-- file inside one transaction on every version change, between the column
-- seams (storage/sqlite/migrations.cc). CREATE TABLE IF NOT EXISTS cannot add a CHECK
-- to an existing table, hence the triggers at the end, which the migrator
-- installs on every open.

CREATE TABLE IF NOT EXISTS _meta (
  key TEXT PRIMARY KEY,
  value TEXT
);

CREATE TABLE IF NOT EXISTS agents (
  agent_id TEXT PRIMARY KEY,
  cli TEXT NOT NULL CHECK (cli IN ('codex', 'gemini', 'claude', 'other')),
  pid INTEGER,
  capabilities_json TEXT NOT NULL DEFAULT '[]',
  topics_json TEXT NOT NULL DEFAULT '[]',
  last_seen_ms INTEGER NOT NULL,
  lease_expires_ms INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('online', 'stale', 'offline')),
  metadata_json TEXT NOT NULL DEFAULT '{}',
  project_id TEXT,
  session_id TEXT,
  host_id TEXT,
  transport_locators_json TEXT NOT NULL DEFAULT '[]',
  presence_generation INTEGER NOT NULL DEFAULT 0,
  -- hub: the lease TTL of the latest registration or heartbeat (NULL for
  -- rows written by triflux), so a restart can extend each lease by its own.
  lease_ttl_ms INTEGER
);
CREATE INDEX IF NOT EXISTS idx_agents_status ON agents(status);
CREATE INDEX IF NOT EXISTS idx_agents_lease ON agents(lease_expires_ms);

CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('request', 'response', 'event', 'handoff',
                                     'human_request', 'human_response',
                                     'system')),
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  topic TEXT NOT NULL,
  priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 9),
  ttl_ms INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  correlation_id TEXT NOT NULL,
  trace_id TEXT NOT NULL,
  payload_json TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL CHECK (status IN ('queued', 'delivered', 'acked',
                                         'expired', 'dead_letter')),
  role_key_wire TEXT
);
-- Only the indexes hub's queries use (docs/design/storage.md, "Indexes"):
-- every index is one more b-tree insert per publish. triflux's
-- idx_messages_status, _to_agent, _correlation, _expires, _priority and
-- _role_key are dropped when a database is opened (storage/sqlite/migrations.cc).
-- The two partial indexes hold pending messages only: an ack takes a message
-- out of them and adds nothing, and an agent or topic message never enters
-- the role backlog's.
CREATE INDEX IF NOT EXISTS idx_messages_expiry_pending
  ON messages(expires_at_ms) WHERE status IN ('queued', 'delivered');
CREATE INDEX IF NOT EXISTS idx_messages_trace ON messages(trace_id);
CREATE INDEX IF NOT EXISTS idx_messages_role_pending
  ON messages(role_key_wire, expires_at_ms)
  WHERE role_key_wire IS NOT NULL AND status IN ('queued', 'delivered');

-- Durable per-recipient delivery state (triflux created but never wrote it).
CREATE TABLE IF NOT EXISTS message_inbox (
  delivery_id INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  agent_id TEXT NOT NULL,
  delivered_at_ms INTEGER,
  acked_at_ms INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  UNIQUE (message_id, agent_id)
);
CREATE INDEX IF NOT EXISTS idx_inbox_agent
  ON message_inbox(agent_id, delivered_at_ms);
-- Lookups by message_id use the UNIQUE (message_id, agent_id) index.

CREATE TABLE IF NOT EXISTS dead_letters (
  message_id TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  failed_at_ms INTEGER NOT NULL,
  last_error TEXT
);
-- hub: ListDeadLetters pages by (failed_at_ms DESC, message_id) with a keyset,
-- so a page seeks here instead of sorting the table. An index changes no
-- table's shape: a triflux file gains it on its next open (the migrator runs
-- this file on every open) without a version change.
CREATE INDEX IF NOT EXISTS idx_dead_letters_failed
  ON dead_letters(failed_at_ms DESC, message_id);

CREATE TABLE IF NOT EXISTS role_registry (
  role_key_wire TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  role_kind TEXT NOT NULL CHECK (role_kind IN ('cto', 'lead')),
  scope_id TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('electable', 'elected-probing', 'active',
                                       'unreachable', 'quarantined')),
  holder_agent_id TEXT,
  previous_holder_agent_id TEXT,
  epoch INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  activation_seq INTEGER NOT NULL DEFAULT 0 CHECK (activation_seq >= 0),
  activation_id TEXT,
  activation_deadline_ms INTEGER,
  holder_lease_expires_ms INTEGER,
  charter_version TEXT,
  charter_acked_epoch INTEGER,
  retry_count INTEGER NOT NULL DEFAULT 0,
  next_probe_ms INTEGER,
  blocked_reason TEXT,
  last_transition_ms INTEGER NOT NULL,
  last_reason TEXT NOT NULL,
  version INTEGER NOT NULL DEFAULT 0,
  CHECK ((role_kind = 'cto' AND scope_id = '') OR
         (role_kind = 'lead' AND scope_id <> '')),
  CHECK (state <> 'active' OR holder_agent_id IS NOT NULL),
  UNIQUE (project_id, role_kind, scope_id)
);

CREATE TABLE IF NOT EXISTS role_candidates (
  role_key_wire TEXT NOT NULL
    REFERENCES role_registry(role_key_wire) ON DELETE CASCADE,
  agent_id TEXT NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('grant', 'standup', 'operator')),
  priority INTEGER NOT NULL DEFAULT 0,
  transport_locators_json TEXT NOT NULL DEFAULT '[]',
  consecutive_probe_failures INTEGER NOT NULL DEFAULT 0,
  excluded_until_ms INTEGER,
  last_probe_ms INTEGER,
  last_probe_code TEXT,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (role_key_wire, agent_id)
);

-- hub_schema_version 2: which principal owns each agent id (the first
-- authenticated principal that registered it; docs/design/auth.md). hub's own
-- table: triflux neither reads nor writes it, so the file stays a triflux v8
-- database.
CREATE TABLE IF NOT EXISTS hub_agent_owners (
  agent_id TEXT PRIMARY KEY,
  principal TEXT NOT NULL CHECK (principal <> ''),
  claimed_at_ms INTEGER NOT NULL
);

-- hub_schema_version 3: lead scopes closed for good (RoleService.CloseRoleScope,
-- docs/design/roles.md "Closing a lead scope"). Closing removes the scope's
-- role row, its candidates and its pending role messages (dead-lettered with
-- reason ROLE_SCOPE_CLOSED) in the transaction that inserts this row; the
-- store then refuses every write that would bring the scope back, so its id
-- is never reused. hub's own table, like hub_agent_owners.
-- hub_schema_version 4 added dead_lettered_count: how many pending messages
-- the close dead-lettered (NULL for scopes closed by an older hub, which did
-- not record it; the migration adds the column to their table).
CREATE TABLE IF NOT EXISTS hub_closed_scopes (
  project_id TEXT NOT NULL,
  scope_id TEXT NOT NULL CHECK (scope_id <> ''),
  role_key_wire TEXT NOT NULL UNIQUE,
  closed_at_ms INTEGER NOT NULL,
  closed_by TEXT NOT NULL CHECK (closed_by <> ''),
  reason TEXT NOT NULL,
  dead_lettered_count INTEGER CHECK (dead_lettered_count >= 0),
  PRIMARY KEY (project_id, scope_id)
);

-- hub_schema_version 7: path reservations (ReservationService,
-- docs/design/reservations.md). hub's own tables. One token row per project
-- holds the last fencing token handed out and how many reservation rows the
-- project holds; every reservation write takes it first. A reservation is
-- live while expires_at_ms is ahead and its holder's agents row exists at
-- presence_generation and is not offline: the reads decide that in SQL, so
-- an ended reservation conflicts with nothing before a sweep deletes it.
-- Patterns are normalized (paths/path_pattern.h); `prefix` is a pattern's
-- literal directory prefix, the key conflicting rows are found by.
CREATE TABLE IF NOT EXISTS hub_reservation_tokens (
  project_id TEXT PRIMARY KEY,
  last_token INTEGER NOT NULL CHECK (last_token >= 0),
  held INTEGER NOT NULL CHECK (held >= 0)
);

CREATE TABLE IF NOT EXISTS hub_reservations (
  reservation_id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  presence_generation INTEGER NOT NULL,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  token INTEGER NOT NULL CHECK (token > 0),
  reason TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  UNIQUE (project_id, token)
);
CREATE INDEX IF NOT EXISTS idx_hub_reservations_agent
  ON hub_reservations (agent_id, project_id);
CREATE INDEX IF NOT EXISTS idx_hub_reservations_expiry
  ON hub_reservations (expires_at_ms);

CREATE TABLE IF NOT EXISTS hub_reservation_patterns (
  reservation_id TEXT NOT NULL
    REFERENCES hub_reservations (reservation_id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  project_id TEXT NOT NULL,
  pattern TEXT NOT NULL CHECK (pattern <> ''),
  prefix TEXT NOT NULL,
  -- hub_schema_version 11 (below).
  exclusive INTEGER NOT NULL DEFAULT 1 CHECK (exclusive IN (0, 1)),
  PRIMARY KEY (reservation_id, pattern)
);
CREATE INDEX IF NOT EXISTS idx_hub_reservation_patterns_prefix
  ON hub_reservation_patterns (project_id, prefix);
-- hub_schema_version 11: a pattern row carries its reservation's mode
-- (`exclusive`, added by a migration seam with DEFAULT 1: a row from before
-- counts as exclusive, which only makes a shared request read it), and
-- shared requests, which can only conflict with exclusive rows, read them
-- through this partial index: a project's many shared `**/...` patterns
-- (read by every request, their prefix being "") then cost a shared check
-- nothing.
CREATE INDEX IF NOT EXISTS idx_hub_reservation_patterns_exclusive
  ON hub_reservation_patterns (project_id, prefix) WHERE exclusive = 1;

-- hub_schema_version 8: the reservation change log (WatchReservations,
-- docs/design/reservations.md, "Watching"). Every reservation write appends
-- one row per reservation it grants, renews, narrows or ends, in its own
-- transaction, with the reservation as it is after the change (as it was,
-- for an end); `patterns` are its normalized patterns joined by newlines
-- (a pattern holds no control character). One writer commits in seq order;
-- AUTOINCREMENT never hands a seq out twice, even once the log is pruned.
CREATE TABLE IF NOT EXISTS hub_reservation_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  written_at_ms INTEGER NOT NULL,
  reservation_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  presence_generation INTEGER NOT NULL,
  exclusive INTEGER NOT NULL,
  token INTEGER NOT NULL,
  reason TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  patterns TEXT NOT NULL,
  -- hub_schema_version 10: a waiter's waits_for (ids joined by newlines).
  waits_for TEXT NOT NULL DEFAULT ''
);

-- hub_schema_version 9: waiting reserves (Reserve with `wait`,
-- docs/design/reservations.md, "Waiting"). One row per reserve that waits
-- for conflicting reservations to end; `seq` is its place in its project's
-- queue, handed out under the project's token row (so in arrival order on
-- every hub). A reserve conflicts with the overlapping waiters of other
-- agents ahead of it (all of them, for a reserve that does not wait), so
-- the first waiter for a path gets it first. A row past its deadline (its
-- hub died) is ignored and swept.
CREATE TABLE IF NOT EXISTS hub_reservation_waiters (
  waiter_id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  presence_generation INTEGER NOT NULL,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  seq INTEGER NOT NULL CHECK (seq > 0),
  created_at_ms INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  patterns TEXT NOT NULL,
  -- hub_schema_version 10: what it waits behind (docs/design/
  -- reservations.md, "What a waiter waits for"): the ids its last attempt
  -- conflicted with, at most 4, joined by newlines.
  waits_for TEXT NOT NULL DEFAULT '',
  UNIQUE (project_id, seq)
);

-- hub_schema_version 12: jobs (docs/design/jobs.md). assign_jobs is
-- triflux's table (TRIFLUX-HUB.md §8), created here when absent with
-- triflux's columns first; hub's columns follow and are added to a triflux
-- table by migration seams (migrations.cc). hub writes triflux's `status`
-- word beside its own `hub_state`, so triflux still reads every row; a row
-- triflux wrote (hub_state NULL) is read as the state its status names.
CREATE TABLE IF NOT EXISTS assign_jobs (
  job_id TEXT PRIMARY KEY,
  supervisor_agent TEXT NOT NULL,
  worker_agent TEXT NOT NULL,
  topic TEXT NOT NULL DEFAULT 'assign.job',
  task TEXT NOT NULL DEFAULT '',
  payload_json TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL
    CHECK (status IN ('queued','running','succeeded','failed','timed_out')),
  attempt INTEGER NOT NULL DEFAULT 1,
  retry_count INTEGER NOT NULL DEFAULT 0,
  max_retries INTEGER NOT NULL DEFAULT 0,
  priority INTEGER NOT NULL DEFAULT 5,
  ttl_ms INTEGER NOT NULL DEFAULT 600000,
  timeout_ms INTEGER NOT NULL DEFAULT 600000,
  deadline_ms INTEGER,
  trace_id TEXT,
  correlation_id TEXT,
  last_message_id TEXT,
  result_json TEXT,
  error_json TEXT,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  started_at_ms INTEGER,
  dispatched_at_ms INTEGER,
  completed_at_ms INTEGER,
  last_retry_at_ms INTEGER,
  hub_state TEXT CHECK (hub_state IN ('blocked','queued','offered','running',
    'waiting_human','succeeded','failed','timed_out','cancelled')),
  project_id TEXT,
  supervisor_role_wire TEXT,
  worker_kind TEXT NOT NULL DEFAULT 'agent'
    CHECK (worker_kind IN ('agent','role','pool')),
  worker_role_wire TEXT,
  pool_filter_json TEXT,
  retry_policy_json TEXT,
  on_dependency_failure TEXT NOT NULL DEFAULT 'cancel'
    CHECK (on_dependency_failure IN ('cancel','block')),
  idempotency_key TEXT,
  attempt_worker TEXT,
  attempt_generation INTEGER,
  attempt_role_epoch INTEGER,
  not_before_ms INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1)),
  progress_json TEXT
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
  WHERE hub_state IN ('offered','running','waiting_human');
CREATE UNIQUE INDEX IF NOT EXISTS idx_hub_jobs_idempotency
  ON assign_jobs (project_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- ListJobs: newest change first.
CREATE INDEX IF NOT EXISTS idx_hub_jobs_updated
  ON assign_jobs (updated_at_ms DESC, job_id DESC);

-- A job's dependencies: job_id waits for parent_id to succeed.
CREATE TABLE IF NOT EXISTS hub_job_dependencies (
  job_id TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  PRIMARY KEY (job_id, parent_id)
);
CREATE INDEX IF NOT EXISTS idx_hub_job_dependencies_parent
  ON hub_job_dependencies (parent_id);

-- hub_schema_version 13: who held each attempt (a claim inserts its row),
-- so that a late result is kept only from the attempt's own worker.
CREATE TABLE IF NOT EXISTS hub_job_attempts (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  agent_id TEXT NOT NULL,
  presence_generation INTEGER NOT NULL,
  role_epoch INTEGER,
  claimed_at_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, attempt)
);

-- The first result or error each superseded attempt reported, kept.
CREATE TABLE IF NOT EXISTS hub_job_late_results (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  agent_id TEXT NOT NULL,
  result_json TEXT,
  error_json TEXT,
  reported_at_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, attempt)
);

-- v8 integrity for role_registry tables created before the CHECK existed
-- (harmless duplicates of the CHECK on tables created by this file). The
-- message contains "CHECK constraint failed" as triflux's trigger does.
CREATE TRIGGER IF NOT EXISTS role_registry_active_requires_holder_insert
BEFORE INSERT ON role_registry
WHEN NEW.state = 'active' AND NEW.holder_agent_id IS NULL
BEGIN
  SELECT RAISE(ABORT,
    'CHECK constraint failed: role_registry active requires holder_agent_id');
END;

CREATE TRIGGER IF NOT EXISTS role_registry_active_requires_holder_update
BEFORE UPDATE ON role_registry
WHEN NEW.state = 'active' AND NEW.holder_agent_id IS NULL
BEGIN
  SELECT RAISE(ABORT,
    'CHECK constraint failed: role_registry active requires holder_agent_id');
END;
