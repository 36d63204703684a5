'use strict';
// How hub's messages (proto-loader objects) are shown to the model: snake_case
// plain objects with enum words in lower case and times as ISO strings, and
// one-line summaries.
const { toDate, fromStruct } = require('../../node/lib/convert');

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

module.exports = { lower, iso, renderAgent, roleName, renderRole, renderMessage, clip, firstLine };
