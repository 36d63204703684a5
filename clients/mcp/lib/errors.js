'use strict';
// Tool errors: every failure is an MCP tool result with isError: true whose
// text leads with hub's reason code (or the gRPC code when the hub sent
// none) and says what to do next.

// What to do, by reason, then by gRPC code name.
const ADVICE_BY_REASON = {
  HUB_UNAVAILABLE: 'hub-mcp keeps reconnecting; call again in a few seconds',
  STALE_PRESENCE_OWNER: 'another registration of this agent id superseded this session (a newer ' +
    'hub-mcp for the same pane or session); this one no longer speaks for the agent: restart ' +
    'the CLI session, or give it its own HUB_AGENT_ID',
  AGENT_DEREGISTERED: 'an operator deregistered this agent; restart the CLI session to register again',
  PRESENCE_STREAM_REPLACED: 'another process took over this agent\'s stream; restart the CLI session',
  NOT_REGISTERED: 'wait until hub_whoami shows the agent attached, then call again',
  SCOPE_REQUIRED: 'give project_id (no project was found for this session: add a .hub file ' +
    'or set HUB_PROJECT_ID)',
  LIMIT_EXCEEDED: 'the hub refused to hold more (see metadata.limit); shrink the request or ' +
    'acknowledge messages first',
  RATE_LIMITED: 'wait metadata.retry_after_ms and call again',
  STALE_EPOCH: 'the role moved on; read it again with hub_role_get before acting',
  HOLDER_MISMATCH: 'this agent is not the role\'s holder; read it with hub_role_get',
  ROLE_NOT_FOUND: 'the role has no row yet; hub_role_ensure or hub_role_candidacy creates one',
  AGENT_NOT_FOUND: 'check the agent id with hub_list_agents',
  MESSAGE_NOT_FOUND: 'give the trace_id hub_send returned, or check the message id',
  ACTIVATION_NOT_FOUND: 'no such activation arrived in this session; see hub_whoami',
  RESERVATION_CONFLICT: 'another agent holds an overlapping reservation (metadata: ' +
    'holder_agent_id, held_pattern, expires_at_ms): edit other paths, ask the holder ' +
    '(hub_send), or try again after it expires',
  RESERVATION_NOT_FOUND: 'the reservation ended (released, expired, or this session was gone); ' +
    'list yours with hub_reservations and reserve again if needed',
  ASSIGN_NOT_FOUND: 'check the job id (hub_list_jobs lists this project\'s jobs)',
  ASSIGN_ATTEMPT_MISMATCH: 'this session\'s attempt at the job is over: it was superseded (its ' +
    'worker went, it timed out, or it was retried) and another attempt is the job\'s current one. ' +
    'Stop working on the job; a result or error you sent is kept as a late result for the ' +
    'supervisor. hub_job_status shows the job now',
  ASSIGN_WORKER_MISMATCH: 'the job\'s current attempt is held by another agent, or by an earlier ' +
    'registration of this agent, not by this session: stop working on it; hub_job_status shows who ' +
    'holds it',
  JOB_NOT_RUNNING: 'the job has no running attempt: it ended, or it waits to be claimed; ' +
    'hub_job_status shows its state (hub_claim_job takes it when it is queued for you)',
  JOB_NOT_CLAIMABLE: 'the job is not waiting for this agent: another worker claimed it, it is not ' +
    'due yet, or it is for another worker; hub_job_status shows it, hub_claim_job without job_id ' +
    'takes the next one waiting for you',
  JOB_NOT_ENDED: 'only a failed, timed-out or cancelled job can be retried; hub_job_status shows its state',
  JOB_WORKER_INVALID: 'name the worker with exactly one of agent_id, role (with scope_id for a ' +
    'lead), role_key_wire or pool_capabilities',
  JOB_FIELD_INVALID: 'fix the argument named in the message (metadata.field) and call again',
};
const ADVICE_BY_CODE = {
  INVALID_ARGUMENT: 'fix the argument named in the message and call again',
  NOT_FOUND: 'check the id and call again',
  FAILED_PRECONDITION: 'the state changed; read it again (hub_whoami, hub_role_get) and retry',
  ABORTED: 'a concurrent change won; read again and retry',
  RESOURCE_EXHAUSTED: 'the hub refused to hold more; retry later or shrink the request',
  UNAVAILABLE: 'the hub is unreachable or busy; hub-mcp keeps reconnecting, call again shortly',
  DEADLINE_EXCEEDED: 'the hub did not answer in time; call again',
  UNAUTHENTICATED: 'the token is missing or wrong: check the variable named by --token-env',
  PERMISSION_DENIED: 'the token does not allow this for this agent or project',
};

/** A tool error that is not a hub call's (bad arguments, local state). */
class ToolError extends Error {
  constructor(reason, message, metadata = {}) {
    super(message);
    this.reason = reason;
    this.codeName = 'INVALID_ARGUMENT';
    this.metadata = metadata;
  }
}

/** The MCP tool result for a failure `error` (HubError, ToolError or other). */
function errorResult(error, hubAddress) {
  let reason = error.reason || '';
  let codeName = error.codeName || 'INTERNAL';
  let message = error.details !== undefined ? error.details : error.message;
  if (!reason && codeName === 'UNAVAILABLE') {
    reason = 'HUB_UNAVAILABLE';
    message = `hub unavailable at ${hubAddress}` + (message ? ` (${message})` : '');
  }
  if (!reason && codeName === 'DEADLINE_EXCEEDED') {
    message = `no answer from hub at ${hubAddress} in time` + (message ? ` (${message})` : '');
  }
  const head = reason || codeName;
  // hub's own messages lead with their reason (for generic clients): said once.
  if (message && message.startsWith(`${head}: `)) message = message.slice(head.length + 2);
  const advice = ADVICE_BY_REASON[reason] || ADVICE_BY_CODE[codeName] || 'see the message';
  const text = `${head}: ${message}. What to do: ${advice}.`;
  return {
    isError: true,
    content: [{ type: 'text', text }],
    structuredContent: {
      error: { reason: head, code: codeName, message, metadata: error.metadata || {} },
    },
  };
}

module.exports = { ToolError, errorResult };
