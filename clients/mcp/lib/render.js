'use strict';
// How hub's messages (proto-loader objects) are shown to the model: snake_case
// plain objects with enum words in lower case and times as ISO strings, and
// one-line summaries.
const { toDate, fromStruct, durationMs } = require('../../node/lib/convert');

const lower = (prefix, v) => (v ? String(v).replace(prefix, '').toLowerCase() : v);
const iso = (ts) => { const d = toDate(ts); return d ? d.toISOString() : null; };

function renderAgent(a) {
  return {
    agent_id: a.agentId, cli: lower('AGENT_CLI_', a.cli), status: lower('AGENT_STATUS_', a.status),
    live: a.live, stream_attached: a.streamAttached, project_id: a.projectId || null,
    session_id: a.sessionId || null, host_id: a.hostId || null, topics: a.topics,
    capabilities: a.capabilities, presence_generation: a.presenceGeneration,
    last_seen_at: iso(a.lastSeenAt),
  };
}

function roleName(key) {
  if (!key) return '?';
  return key.kind === 'ROLE_KIND_LEAD' ? `lead of ${key.scopeId} in ${key.projectId}`
    : `cto of ${key.projectId}`;
}

function renderRole(r) {
  return {
    role: lower('ROLE_KIND_', r.roleKey && r.roleKey.kind), project_id: r.roleKey && r.roleKey.projectId,
    scope_id: (r.roleKey && r.roleKey.scopeId) || null, role_key_wire: r.roleKeyWire,
    state: lower('ROLE_STATE_', r.state), holder_agent_id: r.holderAgentId || null,
    epoch: r.epoch, activation_id: r.activationId || null,
    charter_acked_epoch: r.charterAckedEpoch === undefined ? null : r.charterAckedEpoch,
    blocked_reason: r.blockedReason || null, last_reason: r.lastReason, version: r.version,
  };
}

function renderMessage(m) {
  const payload = fromStruct(m.payload) || {};
  return {
    message_id: m.messageId, from: m.fromAgentId, to: m.to, type: lower('MESSAGE_TYPE_', m.type),
    priority: m.priority, topic: m.topic, created_at: iso(m.createdAt), expires_at: iso(m.expiresAt),
    correlation_id: m.correlationId, trace_id: m.traceId, status: lower('MESSAGE_STATUS_', m.status),
    text: typeof payload.text === 'string' ? payload.text : null, payload,
  };
}

// A job's supervisor or worker (a JobParty) as shown to the model.
function renderParty(p) {
  if (!p) return null;
  if (p.target === 'agentId') return { agent_id: p.agentId };
  if (p.target === 'pool') return { pool: { capabilities: p.pool.capabilities, topic: p.pool.topic || null } };
  if (p.target === 'roleKey' || p.roleKeyWire) {
    return { role: roleName(p.roleKey), role_key_wire: p.roleKeyWire || null };
  }
  return null;
}

// A party in a few words: "agent x", "cto of prj_…", "pool [mcp]".
function partyName(p) {
  const r = renderParty(p);
  if (!r) return 'nobody';
  if (r.agent_id) return r.agent_id;
  if (r.pool) return `a pool (capabilities ${r.pool.capabilities.join(', ') || 'any'}` +
    `${r.pool.topic ? `, topic ${r.pool.topic}` : ''})`;
  return r.role;
}

function renderJobError(e) {
  return e ? { reason: e.reason, message: e.message, retryable: e.retryable, details: fromStruct(e.details) } : null;
}

function renderJob(j) {
  const a = j.attempt || {};
  return {
    job_id: j.jobId, project_id: j.projectId, state: lower('JOB_STATE_', j.state), task: j.task,
    payload: fromStruct(j.payload) || {}, supervisor: renderParty(j.supervisor), worker: renderParty(j.worker),
    topic: j.topic, priority: j.priority, timeout_seconds: durationMs(j.timeout) / 1000,
    max_attempts: j.maxAttempts,
    // The current attempt: its number, and the worker that holds it (none
    // while the job waits for a claim).
    attempt: { attempt: a.attempt, agent_id: a.agentId || null, presence_generation: a.presenceGeneration || null,
      role_epoch: a.roleEpoch || null },
    cancel_requested: j.cancelRequested, progress: fromStruct(j.progress), result: fromStruct(j.result),
    error: renderJobError(j.error),
    late_results: (j.lateResults || []).map((l) => ({ attempt: l.attempt, agent_id: l.agentId,
      result: fromStruct(l.result), error: renderJobError(l.error), reported_at: iso(l.reportedAt) })),
    depends_on: j.dependsOn, idempotency_key: j.idempotencyKey || null, trace_id: j.traceId || null,
    correlation_id: j.correlationId || null, not_before: iso(j.notBefore), deadline: iso(j.deadline),
    created_at: iso(j.createdAt), updated_at: iso(j.updatedAt), started_at: iso(j.startedAt),
    completed_at: iso(j.completedAt),
  };
}

// One line about a job: "<id> succeeded (attempt 1 of 3 by w, priority 5, for w): task".
function jobLine(j) {
  const a = j.attempt || {};
  const state = lower('JOB_STATE_', j.state);
  const task = j.task.split('\n')[0];
  return `${j.jobId} ${state}${j.cancelRequested && state === 'running' ? ' (cancel requested)' : ''} ` +
    `(attempt ${a.attempt} of ${j.maxAttempts}${a.agentId ? ` by ${a.agentId}` : ''}, priority ${j.priority}, ` +
    `for ${partyName(j.worker)}): ` +
    (task.length > 120 ? task.slice(0, 117) + '...' : task);
}

// The first line of a message body (payload.text, else the payload as JSON),
// at most 160 characters.
function clip(text, payload) {
  const body = typeof text === 'string' ? text : JSON.stringify(payload);
  const line = body.split('\n')[0];
  return line.length > 160 ? line.slice(0, 157) + '...' : line;
}

function firstLine(m) {
  const payload = fromStruct(m.payload) || {};
  return clip(payload.text, payload);
}

module.exports = { lower, iso, renderAgent, roleName, renderRole, renderMessage, clip, firstLine,
  renderJob, jobLine, partyName };
