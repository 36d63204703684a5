'use strict';
// The hub_* tools: one JSON Schema each, carrying hub's own bounds
// (proto/hub/v1/*.proto), and one handler that calls the hub through the
// Node.js client and answers {text, structured}. Handlers throw HubError or
// ToolError; server.js turns those into tool errors.
const { duration, toStruct } = require('../../node/lib/convert');
const { ToolError } = require('./errors');
const { lower, iso, renderAgent, roleName, renderRole, renderMessage, clip, renderJob, jobLine, partyName } =
  require('./render');

// ---- bounds (proto/hub/v1) ------------------------------------------------
const AGENT_ID = '^[A-Za-z0-9._:-]{3,64}$';
const PROJECT_ID = '^prj_[A-Za-z0-9_-]{22}$';
const SCOPE_ID = '^scp_[A-Za-z0-9_-]{22}$';
const TOPIC = '^[A-Za-z0-9._:-]{1,128}$';
const REF = '^[A-Za-z0-9._:-]{1,128}$';  // correlation and trace ids
const TYPES = ['request', 'response', 'event', 'handoff', 'human_request', 'human_response'];
const STATES = ['electable', 'elected_probing', 'active', 'unreachable', 'quarantined'];
const MAX_TTL_S = 24 * 3600;  // PublishRequest.ttl: 1 s .. 24 h
const MAX_ASK_WAIT_S = 30;    // AskRequest.await_timeout: 0 .. 30 s
const MAX_QUESTION = 20000;   // hub-mcp's bound on an ask's question
const MAX_TEXT = 100000;      // and on a message's text (payload limit: 1 MiB)

const priority = { type: 'integer', minimum: 1, maximum: 9, default: 5,
  description: '1 (lowest) .. 9 (highest); 7 and above is urgent' };
const ttl = { type: 'integer', minimum: 1, maximum: MAX_TTL_S, default: 300,
  description: 'time to live in seconds, 1 .. 86400 (24 h); then the message is dead-lettered' };
const to = { type: 'string', minLength: 1, maxLength: 600,
  description: 'an agent id; "topic:<name>" (every subscriber); "cto" (the CTO of this ' +
    'project) or "cto:prj_…"; "lead:scp_…" (the lead of a scope of this project) or ' +
    '"lead:prj_…:scp_…"; or "topic:role:rk2.…"' };
const roleProps = {
  role: { type: 'string', enum: ['cto', 'lead'], description: 'the role kind' },
  scope_id: { type: 'string', pattern: SCOPE_ID, description: 'the scope of a lead (scp_…)' },
  project_id: { type: 'string', pattern: PROJECT_ID,
    description: 'the project (prj_…); default: this session\'s project' },
  role_key_wire: { type: 'string', pattern: '^rk2\\.[A-Za-z0-9_-]{1,508}$',
    description: 'the role as its rk2 wire, instead of role/scope_id/project_id' },
};
const pageSize = (max, dflt) => ({ type: 'integer', minimum: 1, maximum: max, default: dflt,
  description: `page size, 1 .. ${max}` });
const pageToken = { type: 'string', maxLength: 4096,
  description: 'next_page_token of the previous call with the same filters' };
const object = (properties, required = []) => ({
  type: 'object', properties, required, additionalProperties: false });

// Argument errors name the reason hub would give for the same field.
const FIELD_REASONS = {
  priority: 'PRIORITY_INVALID', ttl_seconds: 'TTL_INVALID', to: 'MESSAGE_ADDRESS_INVALID',
  agent_id: 'AGENT_ID_INVALID', topic: 'TOPIC_INVALID', project_id: 'PROJECT_ID_INVALID',
  scope_id: 'SCOPE_ID_INVALID', role_key_wire: 'ROLE_KEY_WIRE_INVALID',
  message_ids: 'MESSAGE_ID_INVALID', message_id: 'MESSAGE_ID_INVALID', type: 'MESSAGE_TYPE_INVALID',
  role: 'ROLE_KIND_UNSUPPORTED', page_token: 'PAGE_TOKEN_INVALID',
  patterns: 'RESERVATION_PATH_INVALID', paths: 'RESERVATION_PATH_INVALID',
  path: 'RESERVATION_PATH_INVALID', reservation_id: 'RESERVATION_ID_INVALID',
  reason: 'RESERVATION_REASON_INVALID',
};

// ---- resolution ---------------------------------------------------------------

// The structured role key of a tool call's role arguments.
function roleKeyOf(args, ctx) {
  if (args.role_key_wire) return { roleKeyWire: args.role_key_wire };
  if (!args.role) throw new ToolError('ROLE_KEY_INVALID', 'give role (cto or lead) or role_key_wire');
  const projectId = args.project_id || ctx.identity.projectId;
  if (!projectId) {
    throw new ToolError('SCOPE_REQUIRED', 'this session has no project; give project_id');
  }
  if (args.role === 'lead' && !args.scope_id) {
    throw new ToolError('SCOPE_REQUIRED', 'a lead role needs scope_id (scp_…)');
  }
  if (args.role === 'cto' && args.scope_id) {
    throw new ToolError('ROLE_SCOPE_FORBIDDEN', 'a cto role has no scope_id');
  }
  return { roleKey: { projectId, kind: args.role === 'lead' ? 'ROLE_KIND_LEAD' : 'ROLE_KIND_CTO',
    scopeId: args.scope_id || '' } };
}

async function wireOf(ref, ctx) {
  if (ref.roleKeyWire) return ref.roleKeyWire;
  const r = await ctx.client.hub.encodeRoleKey({ roleKey: ref.roleKey });
  return r.wire;
}

// A tool's `to` as a hub address.
async function addressOf(toArg, ctx) {
  const m = /^(cto|lead)(?::(prj_[A-Za-z0-9_-]{22}))?(?::(scp_[A-Za-z0-9_-]{22}))?$/.exec(toArg);
  if (m && (m[1] === 'lead') === Boolean(m[3])) {
    const ref = roleKeyOf({ role: m[1], project_id: m[2], scope_id: m[3] }, ctx);
    return `topic:role:${await wireOf(ref, ctx)}`;
  }
  if (toArg.startsWith('role:rk2.')) return `topic:${toArg}`;
  return toArg;
}

function payloadOf(args) {
  const payload = { ...(args.payload || {}) };
  if (args.text !== undefined) payload.text = args.text;
  return toStruct(payload);
}

function publishFields(args, ctx) {
  const req = {
    fromAgentId: ctx.identity.agentId,
    priority: args.priority || 5,
    ttl: duration((args.ttl_seconds || 300) * 1000),
    payload: payloadOf(args),
    topic: args.topic || '',
    correlationId: args.correlation_id || '',
    traceId: args.trace_id || '',
  };
  if (ctx.identity.projectId) req.projectId = ctx.identity.projectId;
  return req;
}

function requireGeneration(ctx) {
  const g = ctx.session.presenceGeneration;
  if (!g) throw new ToolError('NOT_REGISTERED', `not registered with the hub at ${ctx.hubAddress} yet`);
  return g;
}

// ---- the tools ------------------------------------------------------------------
const TOOLS = [];
// `fieldReasons`: this tool's own reasons for bad arguments, over FIELD_REASONS.
function tool(name, description, inputSchema, handler, annotations = {}, fieldReasons = {}) {
  TOOLS.push({ name, description, inputSchema, handler, annotations, fieldReasons });
}

tool('hub_whoami',
  'Who this session is on hub: agent id, presence generation, hub identity, project, and the ' +
  'roles it holds with their epochs (the fencing token to hand to anything it writes to).',
  object({}),
  async (args, ctx) => {
    const s = ctx.session;
    const roles = ctx.heldRoles();
    const structured = {
      agent_id: ctx.identity.agentId, agent_id_source: ctx.identity.agentIdSource,
      client: ctx.identity.client, project_id: ctx.identity.projectId || null,
      project_source: ctx.identity.projectSource, host_id: ctx.identity.hostId,
      session_id: ctx.identity.sessionId || null,
      tmux: ctx.identity.tmux ? { session: ctx.identity.tmux.sessionName,
        server: ctx.identity.tmux.serverId, pane: ctx.identity.tmux.pane } : null,
      presence_generation: s.presenceGeneration, state: s.state, attached: s.attached,
      hub: { address: ctx.hubAddress, instance_id: s.hubInstanceId, store_fingerprint: s.storeFingerprint },
      roles, activations: ctx.activationList(), pending_messages: ctx.pendingCount(),
      // Held by the previous hub-mcp of this session when it stopped; what
      // became of them is announced once hub answers.
      unchecked_roles: ctx.inherited.map((r) => ({ name: r.name, role_key_wire: r.wire, epoch: r.epoch })),
    };
    let roleText = roles.length === 0 ? 'no roles'
      : roles.map((r) => `${r.name} at epoch ${r.epoch} (fencing token ${r.fencing_token})`).join('; ');
    if (ctx.inherited.length > 0) {
      roleText += `; not known yet whether it still holds ${ctx.inherited.map((r) =>
        `${r.name} at epoch ${r.epoch}`).join(', ')} (held when hub-mcp of this session last stopped)`;
    }
    const text = `agent ${structured.agent_id} (generation ${s.presenceGeneration}, ${s.state}) on hub ` +
      `${ctx.hubAddress}${s.hubInstanceId ? ` instance ${s.hubInstanceId}` : ''}; project ` +
      `${structured.project_id || 'none'}; ${roleText}; ${structured.pending_messages} unacknowledged ` +
      'messages pushed to this session';
    return { text, structured };
  }, { readOnlyHint: true });

tool('hub_list_agents',
  'Lists agents known to hub, by agent id. Default: this project\'s agents.',
  object({
    project_id: roleProps.project_id,
    all_projects: { type: 'boolean', default: false, description: 'list agents of every project' },
    topic: { type: 'string', pattern: TOPIC, description: 'only agents subscribed to this topic' },
    status: { type: 'array', items: { type: 'string', enum: ['online', 'stale', 'offline'] },
      maxItems: 3, uniqueItems: true, description: 'only agents with one of these statuses' },
    page_size: pageSize(1000, 100), page_token: pageToken,
  }),
  async (args, ctx) => {
    const req = { pageSize: args.page_size || 100, pageToken: args.page_token || '',
      topic: args.topic || '', statuses: (args.status || []).map((s) => `AGENT_STATUS_${s.toUpperCase()}`) };
    if (!args.all_projects) req.projectId = args.project_id || ctx.identity.projectId || '';
    const r = await ctx.client.presence.listAgents(req);
    const agents = r.agents.map(renderAgent);
    const text = agents.length === 0 ? 'no agents match' : agents.map((a) =>
      `${a.agent_id} (${a.cli}, ${a.status}${a.stream_attached ? ', attached' : ''})`).join('\n');
    return { text, structured: { agents, next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true });

tool('hub_send',
  'Sends a message to an agent, a topic, or a role (the cto of this project, the lead of a ' +
  'scope); durable before it returns. A role with no active holder keeps it as backlog for the ' +
  'next holder.',
  object({
    to, text: { type: 'string', maxLength: MAX_TEXT, description: 'the message body (payload.text)' },
    payload: { type: 'object', description: 'extra JSON payload fields' },
    type: { type: 'string', enum: TYPES, description: 'default event (response when correlation_id is given)' },
    priority, ttl_seconds: ttl,
    topic: { type: 'string', pattern: '^[A-Za-z0-9._:-]{0,128}$', description: 'subject label for filtering' },
    correlation_id: { type: 'string', pattern: REF }, trace_id: { type: 'string', pattern: REF },
  }, ['to']),
  async (args, ctx) => {
    const req = { ...publishFields(args, ctx), to: await addressOf(args.to, ctx) };
    if (args.type) req.type = `MESSAGE_TYPE_${args.type.toUpperCase()}`;
    const r = await ctx.client.messages.publish(req);
    ctx.rememberSent(r.messageId, r.traceId, req.to);
    const structured = {
      message_id: r.messageId, to: req.to, recipient_count: r.recipientCount,
      type: lower('MESSAGE_TYPE_', r.type), correlation_id: r.correlationId, trace_id: r.traceId,
      expires_at: iso(r.expiresAt), role_key_wire: r.roleKeyWire || null,
      activation: r.activation ? { disposition: lower('ENSURE_ROLE_DISPOSITION_', r.activation.disposition),
        holder_agent_id: r.activation.holderAgentId || null, epoch: r.activation.epoch } : null,
    };
    // A role message is never handed to its own author (messages.md): one
    // this session sends to a role it holds waits for the next holder.
    const own = r.roleKeyWire && ctx.heldRoles().some((h) => h.role_key_wire === r.roleKeyWire);
    const text = `sent ${r.messageId} to ${args.to}: ${r.recipientCount} recipient(s)` +
      (r.recipientCount === 0 && r.roleKeyWire ? (own ? ' (you hold this role, and a role message is never ' +
        'handed to its author: kept as role backlog for its next holder)' : ' (no active holder: kept as role ' +
        'backlog)') : '');
    return { text, structured };
  });

tool('hub_inbox',
  'Lists this agent\'s pending (unacknowledged, unexpired) messages, highest priority first, ' +
  'then oldest. Acknowledge each with hub_ack once handled.',
  object({ limit: pageSize(100, 20), topic: { type: 'string', pattern: TOPIC }, page_token: pageToken }),
  async (args, ctx) => {
    const req = { agentId: ctx.identity.agentId, pageSize: args.limit || 20, topic: args.topic || '',
      pageToken: args.page_token || '' };
    if (ctx.session.presenceGeneration) req.presenceGeneration = ctx.session.presenceGeneration;
    const r = await ctx.client.messages.listPending(req);
    const messages = r.deliveries.map((d) => ({ ...renderMessage(d.message),
      state: lower('DELIVERY_STATE_', d.state), attempts: d.attempts,
      role_epoch: d.roleEpoch === undefined ? null : d.roleEpoch }));
    const text = messages.length === 0 ? 'no pending messages' : messages.map((m) =>
      `${m.message_id} from ${m.from} [${m.type}, p${m.priority}]: ${clip(m.text, m.payload)}`).join('\n') + (r.nextPageToken ? '\n(more: page_token)' : '');
    return { text, structured: { messages, next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true });

tool('hub_ack',
  'Acknowledges handled messages (1..100 ids); acknowledged messages are not delivered again.',
  object({ message_ids: { type: 'array', minItems: 1, maxItems: 100, uniqueItems: true,
    items: { type: 'string', minLength: 1, maxLength: 64 } } }, ['message_ids']),
  async (args, ctx) => {
    requireGeneration(ctx);
    const r = await ctx.session.ackMessages(args.message_ids);
    ctx.forgetPending(r.ackedMessageIds);
    const text = `acknowledged ${r.ackedMessageIds.length}` +
      (r.ignoredMessageIds.length ? `; ignored ${r.ignoredMessageIds.length} (unknown, not ` +
        `delivered to this agent, or dead): ${r.ignoredMessageIds.join(', ')}` : '');
    return { text, structured: { acked: r.ackedMessageIds, ignored: r.ignoredMessageIds } };
  }, { idempotentHint: true });

tool('hub_ask',
  'Sends a request and waits (at most wait_seconds, 0 .. 30) for the first response with its ' +
  'correlation id. The request stays pending for the recipient whatever the outcome.',
  object({
    to, question: { type: 'string', minLength: 1, maxLength: MAX_QUESTION },
    wait_seconds: { type: 'integer', minimum: 0, maximum: MAX_ASK_WAIT_S, default: 30 },
    payload: { type: 'object' }, priority, ttl_seconds: ttl,
    topic: { type: 'string', pattern: '^[A-Za-z0-9._:-]{0,128}$' },
    correlation_id: { type: 'string', pattern: REF }, trace_id: { type: 'string', pattern: REF },
  }, ['to', 'question']),
  async (args, ctx) => {
    const wait = args.wait_seconds === undefined ? 30 : args.wait_seconds;
    const req = { ...publishFields({ ...args, text: args.question }, ctx), to: await addressOf(args.to, ctx),
      awaitTimeout: duration(wait * 1000) };
    const r = await ctx.client.messages.ask(req, { deadlineMs: wait * 1000 + 5000 });
    ctx.rememberSent(r.requestMessageId, r.traceId, req.to);
    const state = lower('ASK_STATE_', r.state);
    const answer = r.response ? renderMessage(r.response) : null;
    const structured = { state, request_message_id: r.requestMessageId, correlation_id: r.correlationId,
      trace_id: r.traceId, recipient_count: r.recipientCount, answer };
    const text = answer ? `answered by ${answer.from}: ${answer.text !== null ? answer.text : JSON.stringify(answer.payload)}`
      : `no answer within ${wait} s (request ${state}); the request ${r.requestMessageId} stays pending ` +
        `(correlation ${r.correlationId})`;
    return { text, structured };
  });

tool('hub_reply',
  'Answers a request: a response to its sender with its correlation id (what hub_ask waits for).',
  object({
    to: { type: 'string', pattern: AGENT_ID, description: 'the requester (the request\'s from)' },
    correlation_id: { type: 'string', pattern: REF, description: 'the request\'s correlation_id' },
    text: { type: 'string', minLength: 1, maxLength: MAX_TEXT }, payload: { type: 'object' },
    ack_message_id: { type: 'string', minLength: 1, maxLength: 64,
      description: 'also acknowledge this request message' },
    priority, ttl_seconds: ttl, trace_id: { type: 'string', pattern: REF },
  }, ['to', 'correlation_id', 'text']),
  async (args, ctx) => {
    const req = { ...publishFields(args, ctx), to: args.to, type: 'MESSAGE_TYPE_RESPONSE' };
    const r = await ctx.client.messages.publish(req);
    ctx.rememberSent(r.messageId, r.traceId, req.to);
    let acked = null;
    if (args.ack_message_id) {
      acked = await ctx.session.ackMessages([args.ack_message_id]);
      ctx.forgetPending(acked.ackedMessageIds);
    }
    return { text: `replied ${r.messageId} to ${args.to} (correlation ${r.correlationId})`,
      structured: { message_id: r.messageId, correlation_id: r.correlationId, trace_id: r.traceId,
        acked: acked ? acked.ackedMessageIds : [] } };
  });

tool('hub_message_status',
  'Where a message sent from this session stands: queued, delivered, acked or dead_letter, and ' +
  'whether its recipient is present now.',
  object({ message_id: { type: 'string', minLength: 1, maxLength: 64 },
    trace_id: { type: 'string', pattern: REF, description: 'needed for messages not sent from this session' } },
  ['message_id']),
  async (args, ctx) => {
    const sent = ctx.sentMessage(args.message_id);
    const traceId = args.trace_id || (sent && sent.traceId);
    if (!traceId) {
      throw new ToolError('MESSAGE_NOT_FOUND', `${args.message_id} was not sent from this session`);
    }
    let message = null;
    let pageToken = '';
    do {
      const r = await ctx.client.messages.listTrace({ traceId, pageSize: 1000, pageToken });
      message = r.messages.find((m) => m.messageId === args.message_id) || null;
      pageToken = r.nextPageToken;
    } while (!message && pageToken);
    if (!message) throw new ToolError('MESSAGE_NOT_FOUND', `no message ${args.message_id} in trace ${traceId}`);
    const m = renderMessage(message);
    const recipient = await recipientPresence(message, ctx);
    return { text: `${m.message_id} to ${m.to}: ${m.status}; recipient ${recipient.summary}`,
      structured: { message_id: m.message_id, to: m.to, status: m.status, type: m.type,
        created_at: m.created_at, expires_at: m.expires_at, recipient } };
  }, { readOnlyHint: true });

async function recipientPresence(message, ctx) {
  const agentPresence = async (agentId) => {
    try {
      const { agent } = await ctx.client.presence.getAgent({ agentId });
      const present = agent.live && agent.streamAttached;
      return { agent_id: agentId, present, status: lower('AGENT_STATUS_', agent.status),
        summary: `${agentId} ${present ? 'present' : `not present (${lower('AGENT_STATUS_', agent.status)})`}` };
    } catch (e) {
      if (e.reason !== 'AGENT_NOT_FOUND') throw e;
      return { agent_id: agentId, present: false, status: 'unknown', summary: `${agentId} not registered` };
    }
  };
  if (message.roleKeyWire) {
    const { role } = await ctx.client.roles.getRole({ roleKeyWire: message.roleKeyWire });
    if (!role.holderAgentId || role.state !== 'ROLE_STATE_ACTIVE') {
      return { role_key_wire: message.roleKeyWire, present: false, summary: `role ${lower('ROLE_STATE_', role.state)}, no active holder` };
    }
    return { role_key_wire: message.roleKeyWire, ...(await agentPresence(role.holderAgentId)) };
  }
  if (message.to.startsWith('topic:')) {
    const r = await ctx.client.presence.listAgents({ topic: message.to.slice(6), statuses: ['AGENT_STATUS_ONLINE'] });
    const present = r.agents.filter((a) => a.streamAttached).length;
    return { topic: message.to.slice(6), present: present > 0, subscribers_present: present,
      summary: `${present} subscriber(s) present` };
  }
  return agentPresence(message.to);
}

tool('hub_role_get',
  'Reads one role: state, holder, epoch.',
  object(roleProps),
  async (args, ctx) => {
    const { role } = await ctx.client.roles.getRole(roleKeyOf(args, ctx));
    const r = renderRole(role);
    return { text: `${roleName(role.roleKey)}: ${r.state}, holder ${r.holder_agent_id || 'none'}, epoch ${r.epoch}`,
      structured: r };
  }, { readOnlyHint: true });

tool('hub_role_list',
  'Lists roles (default: this project\'s).',
  object({
    project_id: roleProps.project_id, all_projects: { type: 'boolean', default: false },
    role: roleProps.role, scope_id: roleProps.scope_id,
    states: { type: 'array', items: { type: 'string', enum: STATES }, maxItems: 5, uniqueItems: true },
    page_size: pageSize(1000, 100), page_token: pageToken,
  }),
  async (args, ctx) => {
    const req = { pageSize: args.page_size || 100, pageToken: args.page_token || '',
      scopeId: args.scope_id || '', states: (args.states || []).map((s) => `ROLE_STATE_${s.toUpperCase()}`) };
    if (args.role) req.kind = `ROLE_KIND_${args.role.toUpperCase()}`;
    if (!args.all_projects) req.projectId = args.project_id || ctx.identity.projectId || '';
    const r = await ctx.client.roles.listRoles(req);
    const roles = r.roles.map(renderRole);
    const text = roles.length === 0 ? 'no roles' : r.roles.map((x) =>
      `${roleName(x.roleKey)}: ${lower('ROLE_STATE_', x.state)}, holder ${x.holderAgentId || 'none'}, epoch ${x.epoch}`).join('\n');
    return { text, structured: { roles, next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true });

tool('hub_role_candidates',
  'Lists a role\'s candidates in the order the activator tries them.',
  object({ ...roleProps, page_size: pageSize(1000, 100), page_token: pageToken }),
  async (args, ctx) => {
    const r = await ctx.client.roles.listRoleCandidates({ ...roleKeyOf(args, ctx),
      pageSize: args.page_size || 100, pageToken: args.page_token || '' });
    const candidates = r.candidates.map((c) => ({ agent_id: c.agentId, priority: c.priority,
      source: lower('CANDIDATE_SOURCE_', c.source), consecutive_probe_failures: c.consecutiveProbeFailures,
      excluded_until: iso(c.excludedUntil), last_probe_code: c.lastProbeCode || null }));
    const text = candidates.length === 0 ? 'no candidates' : candidates.map((c) =>
      `${c.agent_id} (priority ${c.priority}${c.excluded_until ? `, excluded until ${c.excluded_until}` : ''})`).join('\n');
    return { text, structured: { candidates, next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true });

tool('hub_role_candidacy',
  'Becomes (candidate: true) or stops being (candidate: false) a candidate for a role. A ' +
  'candidate may be activated by hub whenever the role needs a holder. Stopping does not step ' +
  'down from a role already held (hub_role_step_down does).',
  object({ ...roleProps, candidate: { type: 'boolean' },
    priority: { type: 'integer', minimum: -1000000, maximum: 1000000, default: 0,
      description: 'preference among candidates: higher is tried first' } }, ['candidate']),
  async (args, ctx) => {
    const ref = roleKeyOf(args, ctx);
    const wire = await wireOf(ref, ctx);
    if (!args.candidate) {
      const r = await ctx.client.roles.removeRoleCandidate({ roleKeyWire: wire,
        agentId: ctx.identity.agentId });
      // An activation already on its way is declined, too.
      ctx.setWithdrawn(wire, true);
      return { text: r.removed ? `no longer a candidate for ${wire}`
        : `was not a candidate for ${wire}`,
      structured: { role_key_wire: wire, candidate: false, removed: r.removed } };
    }
    // Only the priority: the probe record (failures, exclusion) is hub's, and
    // an agent token may not write it (docs/design/auth.md).
    const r = await ctx.client.roles.upsertRoleCandidate({ roleKeyWire: wire,
      agentId: ctx.identity.agentId, candidate: { priority: args.priority || 0 },
      updateMask: { paths: ['priority'] } });
    ctx.setWithdrawn(wire, false);
    const c = r.candidate;
    return { text: `now a candidate for ${roleName(c.roleKey)} (priority ${c.priority})`,
      structured: { role_key_wire: c.roleKeyWire, candidate: true, created: r.created,
        priority: c.priority, excluded_until: iso(c.excludedUntil) } };
  }, { idempotentHint: true });

tool('hub_role_ensure',
  'Asks hub to make a role active now (pick and activate a candidate). Returns at once with ' +
  'the decision; the chosen holder learns it on its stream.',
  object({ ...roleProps, cause: { type: 'string', minLength: 1, maxLength: 200, description: 'why (logged)' } }),
  async (args, ctx) => {
    const ref = roleKeyOf(args, ctx);
    const req = { ...ref, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL',
      causeId: args.cause || `hub-mcp:${ctx.identity.agentId}:${Date.now()}` };
    if (ctx.session.presenceGeneration) req.agentId = ctx.identity.agentId;
    const { receipt } = await ctx.client.roles.ensureRole(req);
    const structured = { accepted: receipt.accepted,
      disposition: lower('ENSURE_ROLE_DISPOSITION_', receipt.disposition), state: lower('ROLE_STATE_', receipt.state),
      epoch: receipt.epoch, holder_agent_id: receipt.holderAgentId || null,
      activation_id: receipt.activationId || null, blocked_reason: receipt.blockedReason || null,
      role_key_wire: receipt.roleKeyWire };
    return { text: `${roleName(receipt.roleKey)}: ${structured.disposition}, ${structured.state}, epoch ` +
      `${receipt.epoch}, holder ${structured.holder_agent_id || 'none'}`, structured };
  });

tool('hub_role_step_down',
  'Steps down from a role this session holds: hub releases it at its epoch (the fencing token ' +
  'is then stale) and activates the next candidate at once, passing this session over for that ' +
  'election. Use it when the work of the role is done or handed over; to stay out of later ' +
  'elections, also call hub_role_candidacy with candidate: false.',
  object({ ...roleProps, epoch: { type: 'integer', minimum: 1,
    description: 'the epoch given up; default: the one this session holds' } }),
  async (args, ctx) => {
    const ref = roleKeyOf(args, ctx);
    const wire = await wireOf(ref, ctx);
    const held = ctx.heldRoles().find((r) => r.role_key_wire === wire);
    const epoch = args.epoch || (held && held.epoch);
    if (!epoch) throw new ToolError('ROLE_NOT_HELD', 'this session holds no epoch of that role; give epoch');
    const r = await ctx.client.roles.releaseRole({ roleKeyWire: wire, agentId: ctx.identity.agentId,
      epoch });
    const next = r.next || null;
    const structured = { role_key_wire: wire, released_epoch: epoch, epoch: r.released.epoch,
      next: next && { disposition: lower('ENSURE_ROLE_DISPOSITION_', next.disposition),
        holder_agent_id: next.holderAgentId || null, epoch: next.epoch } };
    const after = !next ? 'the role waits for its next holder'
      : next.holderAgentId ? `${next.holderAgentId} is being activated at epoch ${next.epoch}`
        : `no other candidate (${structured.next.disposition})`;
    return { text: `stepped down from ${roleName(r.released.roleKey)} at epoch ${epoch}; ${after}`, structured };
  });

tool('hub_role_ack_activation',
  'Acknowledges a role activation this session received but did not acknowledge (one it ' +
  'declined while not a candidate, or whose automatic ACK failed). Activations are normally ' +
  'acknowledged on receipt; hub_whoami lists them.',
  object({ activation_id: { type: 'string', minLength: 1, maxLength: 64,
    description: 'default: the newest unacknowledged activation' } }),
  async (args, ctx) => {
    const generation = requireGeneration(ctx);
    const entry = ctx.unackedActivation(args.activation_id);
    if (!entry) throw new ToolError('ACTIVATION_NOT_FOUND', 'no unacknowledged activation ' + (args.activation_id || ''));
    const a = entry.activation;
    const ack = { schema: 'tfx.role-activation-ack.v1', activationId: a.activationId,
      roleKeyWire: a.roleKeyWire, epoch: a.epoch, activationSeq: a.activationSeq,
      holderAgentId: a.holderAgentId, reachable: true,
      charterAck: { roleKeyWire: a.roleKeyWire, epoch: a.epoch, charterVersion: a.charterVersion } };
    const { result } = await ctx.client.roles.ackRoleActivation({ ack, agentId: ctx.identity.agentId,
      presenceGeneration: generation });
    ctx.activationAcked(a, result.role ? result.role.epoch : a.epoch);
    return { text: `acknowledged: you are now ${roleName(a.roleKey)} at epoch ${a.epoch}; fencing token ${a.epoch}`,
      structured: { role_key_wire: a.roleKeyWire, epoch: a.epoch, idempotent: result.idempotent,
        backlog_delivered_count: result.backlogDeliveredCount } };
  });

// ---- path reservations (docs/design/reservations.md) ----------------------------
const PATTERN = { type: 'string', minLength: 1, maxLength: 1024,
  description: 'relative to the repository root, / between components: a file (src/a.cc), ' +
    'a directory (src/, covering everything below it), * and ? inside a component, ** across ' +
    'components (src/**/*.cc)' };

function projectOf(ctx) {
  const projectId = ctx.identity.projectId;
  if (!projectId) throw new ToolError('SCOPE_REQUIRED', 'this session has no project');
  return projectId;
}

function renderReservation(r) {
  return { reservation_id: r.reservationId, agent_id: r.agentId, project_id: r.projectId,
    mode: lower('RESERVATION_MODE_', r.mode), token: Number(r.token), patterns: r.patterns,
    reason: r.reason, expires_at: iso(r.expiresAt), waiter_count: Number(r.waiterCount || 0),
    waiting_agent_ids: r.waitingAgentIds || [] };
}

function renderConflict(c) {
  return { reservation_id: c.reservationId, holder_agent_id: c.holderAgentId,
    mode: lower('RESERVATION_MODE_', c.mode), token: Number(c.token), held_pattern: c.heldPattern,
    pattern: c.pattern, expires_at: iso(c.expiresAt) };
}

tool('hub_reserve',
  'Reserves files and folders of this project before editing them, all or none: exclusive ' +
  '(default: no other agent may reserve anything overlapping) or shared (only exclusive ' +
  'reservations of others conflict). Ends by itself after ttl_seconds or when this session ' +
  'ends. Returns the reservation id and its fencing token.',
  object({
    // The hub counts distinct patterns after normalization against its own
    // limit (64 unless its operator set another), so the schema does not.
    patterns: { type: 'array', minItems: 1, maxItems: 10000, items: PATTERN,
      description: 'files or folders relative to the project; at most 64 distinct ones (the ' +
        'hub\'s default limit): src/, ./src and src count once' },
    shared: { type: 'boolean', default: false },
    ttl_seconds: { type: 'integer', minimum: 1, maximum: MAX_TTL_S, default: 300,
      description: 'how long, 1 .. 86400 s; renew by reserving again' },
    reason: { type: 'string', maxLength: 512, description: 'why, shown to others' },
  }, ['patterns']),
  async (args, ctx) => {
    const req = { projectId: projectOf(ctx), agentId: ctx.identity.agentId, patterns: args.patterns,
      mode: args.shared ? 'RESERVATION_MODE_SHARED' : 'RESERVATION_MODE_EXCLUSIVE',
      ttl: duration((args.ttl_seconds || 300) * 1000), reason: args.reason || '' };
    if (ctx.session.presenceGeneration) req.presenceGeneration = ctx.session.presenceGeneration;
    const { reservation } = await ctx.client.reservations.reserve(req);
    ctx.reservationNotes.refresh();
    const structured = renderReservation(reservation);
    return { text: `reserved ${structured.patterns.join(' ')} (${structured.mode}) as ` +
      `${structured.reservation_id}, fencing token ${structured.token}, until ${structured.expires_at}`,
    structured };
  });

tool('hub_release',
  'Releases a reservation of this session, or some of its patterns.',
  object({
    reservation_id: { type: 'string', minLength: 1, maxLength: 64 },
    patterns: { type: 'array', maxItems: 10000, items: PATTERN,
      description: 'release only these (default: the whole reservation)' },
  }, ['reservation_id']),
  async (args, ctx) => {
    const r = await ctx.client.reservations.releaseReservation({ reservationId: args.reservation_id,
      agentId: ctx.identity.agentId, patterns: args.patterns || [] });
    if (r.ended) ctx.reservationNotes.ended(args.reservation_id);
    ctx.reservationNotes.refresh();
    const left = r.ended ? null : renderReservation(r.reservation);
    return { text: r.ended ? `released ${args.reservation_id}`
      : `released part of ${args.reservation_id}; still held: ${left.patterns.join(' ')}`,
    structured: { ended: r.ended, reservation: left } };
  }, { idempotentHint: false });

tool('hub_reservations',
  'Lists live reservations of this project: this session\'s own by default, or everyone\'s ' +
  '(all), optionally only those overlapping a path.',
  object({ all: { type: 'boolean', default: false }, path: PATTERN,
    page_size: pageSize(1000, 100), page_token: pageToken }),
  async (args, ctx) => {
    const req = { projectId: projectOf(ctx), agentId: args.all ? '' : ctx.identity.agentId,
      path: args.path || '', pageSize: args.page_size || 100, pageToken: args.page_token || '' };
    const r = await ctx.client.reservations.listReservations(req);
    const reservations = r.reservations.map(renderReservation);
    const text = reservations.length === 0 ? 'no reservations' : reservations.map((x) =>
      `${x.reservation_id} ${x.agent_id} ${x.mode} token ${x.token} until ${x.expires_at}: ` +
      x.patterns.join(' ') + (x.waiter_count ? ` (waited for by ${x.waiting_agent_ids.join(', ')}` +
        `${x.waiter_count > x.waiting_agent_ids.length ? ', …' : ''})` : '')).join('\n');
    return { text, structured: { reservations, next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true });

tool('hub_check_paths',
  'Which reservations of other agents editing these files would collide with (a dry run, ' +
  'nothing is reserved): by default those that hold them exclusively; with exclusive, also ' +
  'shared ones (what an exclusive hub_reserve would meet).',
  object({ paths: { type: 'array', minItems: 1, maxItems: 10000, items: PATTERN },
    exclusive: { type: 'boolean', default: false } }, ['paths']),
  async (args, ctx) => {
    const r = await ctx.client.reservations.checkReservations({ projectId: projectOf(ctx),
      agentId: ctx.identity.agentId, patterns: args.paths, literal: true,
      mode: args.exclusive ? 'RESERVATION_MODE_EXCLUSIVE' : 'RESERVATION_MODE_SHARED' });
    const conflicts = r.conflicts.map(renderConflict);
    const text = conflicts.length === 0 ? 'no other agent holds these paths' : conflicts.map((c) =>
      `${c.pattern}: held by ${c.holder_agent_id} (${c.mode}, ${c.held_pattern}, reservation ` +
      `${c.reservation_id}, until ${c.expires_at})`).join('\n');
    return { text, structured: { conflicts } };
  }, { readOnlyHint: true });

// ---- jobs (docs/design/jobs.md) ---------------------------------------------------
// The supervisor's side (hub_assign, hub_job_status, hub_list_jobs,
// hub_cancel_job, hub_retry_job) and the worker's (hub_claim_job,
// hub_job_progress, hub_complete_job, hub_fail_job). This session is the
// supervisor of the jobs it assigns and the worker of the jobs it claims. A
// claim answers the attempt (number, agent, presence generation, role
// epoch) that every later write of it must name; the server keeps the last
// one claimed per job, so the model names the job only.
const JOB_ID = { type: 'string', minLength: 1, maxLength: 64, description: 'the job id (hub_assign or hub_claim_job returned it)' };
const JOB_STATES = ['blocked', 'queued', 'offered', 'running', 'waiting_human', 'succeeded', 'failed',
  'timed_out', 'cancelled'];
const MAX_TASK = 20000;         // CreateJobRequest.task: 1 .. 20,000 bytes
const MAX_JOB_TIMEOUT_S = 24 * 3600;
const WORD = '^[A-Za-z0-9._:-]{1,128}$';
const ATTEMPT = { type: 'integer', minimum: 1,
  description: 'the attempt number, only to override the one this session claimed (hub_job_status ' +
    'shows the job\'s current attempt); normally left out' };
// A job argument hub refuses names hub's job reason.
const JOB_FIELDS = {
  job_id: 'JOB_ID_INVALID', task: 'JOB_FIELD_INVALID', payload: 'JOB_FIELD_INVALID',
  priority: 'JOB_FIELD_INVALID', timeout_seconds: 'JOB_FIELD_INVALID', max_attempts: 'JOB_FIELD_INVALID',
  idempotency_key: 'JOB_FIELD_INVALID', pool_capabilities: 'JOB_WORKER_INVALID',
  progress: 'JOB_FIELD_INVALID', note: 'JOB_FIELD_INVALID', result: 'JOB_FIELD_INVALID',
  summary: 'JOB_FIELD_INVALID', reason: 'JOB_FIELD_INVALID', message: 'JOB_FIELD_INVALID',
  retryable: 'JOB_FIELD_INVALID', details: 'JOB_FIELD_INVALID', attempt: 'JOB_FIELD_INVALID',
  states: 'JOB_FIELD_INVALID',
};
// The refusals of an attempt's write: the attempt is not this session's any more.
const ATTEMPT_REASONS = new Set(['ASSIGN_ATTEMPT_MISMATCH', 'ASSIGN_WORKER_MISMATCH', 'JOB_NOT_RUNNING']);

// The worker of hub_assign: exactly one of agent_id, a role, a pool.
function workerOf(args, ctx) {
  const given = ['agent_id', 'role', 'role_key_wire', 'pool_capabilities'].filter((k) => args[k] !== undefined);
  if (given.length !== 1) {
    throw new ToolError('JOB_WORKER_INVALID', `name the worker with exactly one of agent_id, role (with ` +
      `scope_id for a lead), role_key_wire or pool_capabilities${given.length ? `; got ${given.join(', ')}` : ''}`);
  }
  if (args.pool_topic !== undefined && !args.pool_capabilities) {
    throw new ToolError('JOB_WORKER_INVALID', 'pool_topic goes with pool_capabilities');
  }
  if (args.agent_id) return { agentId: args.agent_id };
  if (args.pool_capabilities) return { pool: { capabilities: args.pool_capabilities, topic: args.pool_topic || '' } };
  return roleKeyOf({ role: args.role, scope_id: args.scope_id, role_key_wire: args.role_key_wire }, ctx);
}

// The attempt a worker tool writes for: the one this session claimed for
// the job (or `attempt` instead of its number). With none remembered (this
// hub-mcp did not claim it, or the claim's answer was lost) the job is read:
// its current attempt, fenced by this session's presence generation, so
// hub refuses it unless this very session holds it.
async function attemptOf(args, ctx) {
  const claimed = ctx.claimedAttempt(args.job_id);
  if (claimed && (args.attempt === undefined || args.attempt === claimed.attempt)) return { ...claimed };
  const generation = requireGeneration(ctx);
  const { job } = await ctx.client.jobs.getJob({ jobId: args.job_id });
  const current = job.attempt;
  const mine = current.agentId === ctx.identity.agentId && current.presenceGeneration === generation;
  return { jobId: args.job_id, attempt: args.attempt !== undefined ? args.attempt : current.attempt,
    agentId: ctx.identity.agentId, presenceGeneration: generation, roleEpoch: mine ? current.roleEpoch : 0 };
}

// Runs a write of `attempt`; a refusal that means the attempt is no longer
// this session's forgets it and says which attempt the job is at.
async function attemptWrite(attempt, ctx, write) {
  try {
    return await write();
  } catch (e) {
    if (ATTEMPT_REASONS.has(e.reason)) {
      ctx.forgetAttempt(attempt.jobId);
      const m = e.metadata || {};
      e.details = `${e.details} (this session wrote as attempt ${attempt.attempt} of agent ${attempt.agentId} ` +
        `at presence generation ${attempt.presenceGeneration}; the job is at attempt ${m.attempt || '?'}, ` +
        `${m.state || 'state unknown'})`;
    }
    throw e;
  }
}

// The fence a worker tool reports, snake_case.
const attemptFields = (a) => ({ attempt: a.attempt, agent_id: a.agentId, presence_generation: a.presenceGeneration,
  role_epoch: a.roleEpoch || null });

// A JSON object argument plus one text field stored in it.
function withText(object, key, text) {
  const out = { ...(object || {}) };
  if (text !== undefined) out[key] = text;
  return toStruct(out);
}

// What a job's state means to its supervisor, after its line.
function jobDetail(j) {
  const r = renderJob(j);
  const parts = [jobLine(j)];
  if (r.result) parts.push(`result: ${clip(undefined, r.result)}`);
  if (r.error) parts.push(`error: ${r.error.reason}${r.error.message ? ` (${clip(r.error.message)})` : ''}`);
  if (r.progress && r.state === 'running') parts.push(`progress: ${clip(undefined, r.progress)}`);
  if (r.deadline) parts.push(`deadline ${r.deadline}`);
  if (r.not_before) parts.push(`not before ${r.not_before}`);
  if (r.late_results.length) parts.push(`${r.late_results.length} late result(s) of superseded attempts`);
  return { r, text: parts.join('; ') };
}

tool('hub_assign',
  'Hands a job to another agent and returns its job id: a task (what to do, in words) with an ' +
  'optional JSON payload, for exactly one worker: one agent (agent_id), whoever holds a role ' +
  '(role cto, or role lead with scope_id), or any agent of this project with every listed ' +
  'capability (pool_capabilities). This session is the job\'s supervisor. hub keeps the job until ' +
  'a worker claims it, gives each try (attempt) to one live worker, re-queues it when that worker ' +
  'goes or fails retryably (up to max_attempts), and ends it timed_out when a worker stays silent ' +
  'past timeout_seconds. Follow it with hub_job_status; hub_cancel_job and hub_retry_job act on it.',
  object({
    task: { type: 'string', minLength: 1, maxLength: MAX_TASK,
      description: 'what the worker is to do, self-contained: the worker sees only this and the payload' },
    payload: { type: 'object', description: 'JSON input for the task (at most 256 KiB as JSON)' },
    agent_id: { type: 'string', pattern: AGENT_ID, description: 'the worker: this one agent' },
    role: { ...roleProps.role, description: 'the worker: whoever holds this role of this project when the ' +
      'job is claimed (cto, or lead with scope_id)' },
    scope_id: roleProps.scope_id,
    role_key_wire: { ...roleProps.role_key_wire, description: 'the worker: a role as its rk2 wire, instead of role' },
    pool_capabilities: { type: 'array', minItems: 0, maxItems: 32, uniqueItems: true,
      items: { type: 'string', minLength: 1, maxLength: 128 },
      description: 'the worker: any agent of this project that has every one of these capabilities ' +
        '(every hub-mcp session has "mcp"; hub_list_agents shows agents\' capabilities); [] is any agent' },
    pool_topic: { type: 'string', pattern: TOPIC, description: 'with pool_capabilities: the agent must also ' +
      'be subscribed to this topic' },
    priority: { ...priority, description: '1 (lowest) .. 9 (highest), default 5: a worker claims its ' +
      'highest-priority job first' },
    timeout_seconds: { type: 'integer', minimum: 1, maximum: MAX_JOB_TIMEOUT_S, default: 600,
      description: 'how long one attempt may go without a progress report (hub_job_progress) before it ' +
        'ends timed_out, 1 .. 86400 s' },
    max_attempts: { type: 'integer', minimum: 1, maximum: 100, default: 1,
      description: 'tries in all, 1 .. 100: a worker that goes or fails retryably leaves the job queued ' +
        'for another attempt while attempts are left' },
    idempotency_key: { type: 'string', minLength: 1, maxLength: 128,
      description: 'assigning again with the same key returns the first job instead of a second one' },
  }, ['task']),
  async (args, ctx) => {
    const req = { projectId: projectOf(ctx), supervisor: { agentId: ctx.identity.agentId },
      worker: workerOf(args, ctx), task: args.task, payload: toStruct(args.payload || {}),
      priority: args.priority || 5, timeout: duration((args.timeout_seconds || 600) * 1000),
      maxAttempts: args.max_attempts || 1, idempotencyKey: args.idempotency_key || '' };
    const r = await ctx.client.jobs.createJob(req);
    const structured = { ...renderJob(r.job), created: r.created };
    const text = `${r.created ? 'assigned' : 'already assigned (same idempotency_key)'} job ${r.job.jobId} ` +
      `to ${partyName(r.job.worker)}: ${structured.state}, attempt ${structured.attempt.attempt} of ` +
      `${structured.max_attempts}; follow it with hub_job_status`;
    return { text, structured };
  }, {}, JOB_FIELDS);

tool('hub_job_status',
  'Reads one job: its state (queued, running, succeeded, failed, timed_out, cancelled, ...), its ' +
  'current attempt and who holds it, the worker\'s last progress, and its result or error.',
  object({ job_id: JOB_ID }, ['job_id']),
  async (args, ctx) => {
    const { job } = await ctx.client.jobs.getJob({ jobId: args.job_id });
    const { r, text } = jobDetail(job);
    return { text, structured: r };
  }, { readOnlyHint: true }, JOB_FIELDS);

tool('hub_list_jobs',
  'Lists jobs of this project, most recently changed first: those this session assigned ' +
  '(side supervisor, the default), those whose worker is this session (side worker), or all.',
  object({
    side: { type: 'string', enum: ['supervisor', 'worker', 'all'], default: 'supervisor',
      description: 'supervisor: jobs this session assigned; worker: jobs assigned to or claimed by this ' +
        'agent; all: every job of this project' },
    states: { type: 'array', items: { type: 'string', enum: JOB_STATES }, maxItems: JOB_STATES.length,
      uniqueItems: true, description: 'only jobs in one of these states' },
    page_size: pageSize(1000, 50), page_token: pageToken,
  }),
  async (args, ctx) => {
    const side = args.side || 'supervisor';
    const req = { projectId: projectOf(ctx), pageSize: args.page_size || 50, pageToken: args.page_token || '',
      states: (args.states || []).map((s) => `JOB_STATE_${s.toUpperCase()}`),
      supervisorAgentId: side === 'supervisor' ? ctx.identity.agentId : '',
      workerAgentId: side === 'worker' ? ctx.identity.agentId : '' };
    const r = await ctx.client.jobs.listJobs(req);
    const text = r.jobs.length === 0 ? 'no jobs' : r.jobs.map(jobLine).join('\n') +
      (r.nextPageToken ? '\n(more: page_token)' : '');
    return { text, structured: { jobs: r.jobs.map(renderJob), next_page_token: r.nextPageToken } };
  }, { readOnlyHint: true }, JOB_FIELDS);

tool('hub_cancel_job',
  'Cancels a job this session assigned. A queued job ends cancelled at once; a running one is ' +
  'marked, its worker is told at its next progress report, and it ends cancelled when the worker ' +
  'stops (or its deadline passes). An ended job is left as it is.',
  object({ job_id: JOB_ID, reason: { type: 'string', maxLength: 512, description: 'why, kept on the job' } },
    ['job_id']),
  async (args, ctx) => {
    const { job } = await ctx.client.jobs.cancelJob({ jobId: args.job_id, reason: args.reason || '',
      agentId: ctx.identity.agentId });
    const r = renderJob(job);
    const text = r.state === 'cancelled' ? `job ${job.jobId} is cancelled`
      : r.cancel_requested && !['succeeded', 'failed', 'timed_out'].includes(r.state)
        ? `job ${job.jobId} is ${r.state}: cancellation requested; its worker ${r.attempt.agent_id || ''} is told ` +
          'at its next progress report and the job ends cancelled when it stops'
        : `job ${job.jobId} had already ended ${r.state}: nothing changed`;
    return { text, structured: r };
  }, { idempotentHint: true }, JOB_FIELDS);

tool('hub_retry_job',
  'Queues a failed, timed-out or cancelled job this session assigned again, as a new attempt ' +
  '(its last error is kept).',
  object({ job_id: JOB_ID }, ['job_id']),
  async (args, ctx) => {
    const { job } = await ctx.client.jobs.retryJob({ jobId: args.job_id, agentId: ctx.identity.agentId });
    const r = renderJob(job);
    return { text: `job ${job.jobId} is ${r.state} again as attempt ${r.attempt.attempt}`, structured: r };
  }, {}, JOB_FIELDS);

tool('hub_claim_job',
  'Takes a job to work on, as its worker: the next one waiting for this session (assigned to its ' +
  'agent id, to a role it holds, or to a pool it matches; highest priority first, then oldest), ' +
  'or the given job_id. Answers the task and payload, and the attempt this session now holds; ' +
  'hub-mcp remembers the attempt, so the other worker tools need only the job id. While working, ' +
  'call hub_job_progress within every timeout_seconds; end with hub_complete_job or hub_fail_job. ' +
  'With no job waiting it says so.',
  object({ job_id: { ...JOB_ID, description: 'claim this job; default: the next one waiting for this session' },
    topic: { type: 'string', pattern: TOPIC, description: 'only jobs of this topic' } }),
  async (args, ctx) => {
    const req = { agentId: ctx.identity.agentId, presenceGeneration: requireGeneration(ctx),
      jobId: args.job_id || '', topic: args.topic || '' };
    const { job } = await ctx.client.jobs.claimJob(req);
    if (!job) return { text: 'no job is waiting for this session', structured: { claimed: false, job: null } };
    ctx.rememberAttempt(job.attempt);
    const r = renderJob(job);
    const payload = Object.keys(r.payload).length ? `\npayload: ${JSON.stringify(r.payload)}` : '';
    const text = `claimed job ${job.jobId} (attempt ${r.attempt.attempt} of ${r.max_attempts}, from ` +
      `${partyName(job.supervisor)}, priority ${r.priority}); report progress with hub_job_progress at ` +
      `least every ${r.timeout_seconds} s (deadline ${r.deadline}); end it with hub_complete_job or ` +
      `hub_fail_job.\ntask: ${job.task}${payload}`;
    return { text, structured: { claimed: true, job: r, attempt: attemptFields(job.attempt) } };
  }, {}, JOB_FIELDS);

tool('hub_job_progress',
  'Reports progress on a job this session claimed and keeps its attempt alive (the deadline moves ' +
  'to now + the job\'s timeout); each report replaces the previous one, which the supervisor sees ' +
  'in hub_job_status. Says whether the supervisor cancelled the job: if so, stop working on it ' +
  'and end it with hub_fail_job (reason "cancelled").',
  object({ job_id: JOB_ID,
    note: { type: 'string', maxLength: 2000, description: 'what is done and what is next, in words (progress.note)' },
    progress: { type: 'object', description: 'structured progress, e.g. {"done": 3, "total": 10} (at most 64 KiB as JSON)' },
    attempt: ATTEMPT }, ['job_id']),
  async (args, ctx) => {
    const attempt = await attemptOf(args, ctx);
    const r = await attemptWrite(attempt, ctx, () => ctx.client.jobs.heartbeatJob({ attempt,
      progress: withText(args.progress, 'note', args.note) }));
    const structured = { job_id: attempt.jobId, cancel_requested: r.cancelRequested, deadline: iso(r.deadline),
      attempt: attemptFields(attempt) };
    const text = r.cancelRequested
      ? `job ${attempt.jobId} was CANCELLED by its supervisor: stop working on it now and end it with ` +
        'hub_fail_job (reason "cancelled")'
      : `progress recorded for job ${attempt.jobId}; report again before ${structured.deadline}`;
    return { text, structured };
  }, {}, JOB_FIELDS);

tool('hub_complete_job',
  'Ends a job this session claimed with its result: the job succeeded, and its supervisor sees ' +
  'the result. Refused (ASSIGN_ATTEMPT_MISMATCH and the like) when this session\'s attempt is ' +
  'no longer the job\'s current one; the result is then kept as a late result.',
  object({ job_id: JOB_ID,
    summary: { type: 'string', maxLength: MAX_TEXT, description: 'the outcome in words (result.summary)' },
    result: { type: 'object', description: 'the structured result (at most 256 KiB as JSON)' },
    attempt: ATTEMPT }, ['job_id']),
  async (args, ctx) => {
    const attempt = await attemptOf(args, ctx);
    const { job } = await attemptWrite(attempt, ctx, () => ctx.client.jobs.completeJob({ attempt,
      result: withText(args.result, 'summary', args.summary) }));
    ctx.forgetAttempt(attempt.jobId);
    const r = renderJob(job);
    return { text: `job ${job.jobId} ${r.state}; its supervisor ${partyName(job.supervisor)} sees the result`,
      structured: r };
  }, { idempotentHint: true }, JOB_FIELDS);

tool('hub_fail_job',
  'Ends this session\'s attempt at a job it claimed with an error. With retryable true and ' +
  'attempts left the job is queued again for another attempt (by any eligible worker) after a ' +
  'backoff; otherwise it ends failed. Use reason "cancelled" after hub_job_progress reported a ' +
  'cancellation.',
  object({ job_id: JOB_ID,
    reason: { type: 'string', pattern: WORD, description: 'a short stable word for why, e.g. tests_failed, ' +
      'no_access, cancelled' },
    message: { type: 'string', maxLength: 20000, description: 'what went wrong, for the supervisor' },
    retryable: { type: 'boolean', default: false, description: 'true when another attempt could succeed ' +
      '(a flaky failure, something missing on this machine); false when the task itself cannot be done' },
    details: { type: 'object', description: 'structured details (at most 64 KiB as JSON)' },
    attempt: ATTEMPT }, ['job_id', 'reason']),
  async (args, ctx) => {
    const attempt = await attemptOf(args, ctx);
    const { job } = await attemptWrite(attempt, ctx, () => ctx.client.jobs.failJob({ attempt,
      error: { reason: args.reason, message: args.message || '', retryable: Boolean(args.retryable),
        details: toStruct(args.details || {}) } }));
    ctx.forgetAttempt(attempt.jobId);
    const r = renderJob(job);
    const text = r.state === 'queued'
      ? `job ${job.jobId} is queued again for attempt ${r.attempt.attempt} of ${r.max_attempts}` +
        (r.not_before ? ` (not before ${r.not_before})` : '')
      : `job ${job.jobId} ended ${r.state} (${args.reason})`;
    return { text, structured: r };
  }, {}, JOB_FIELDS);

module.exports = { TOOLS, FIELD_REASONS, MAX_QUESTION, MAX_TTL_S };
