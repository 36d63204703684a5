'use strict';
// The hub-mcp server: one process per CLI session, over stdio. It is the agent
// for hub: it registers, holds the presence stream (PresenceSession, which
// reconnects) for as long as the session lives, keeps what the hub pushes
// (bounded) for the tools, the hooks and MCP notifications, and deregisters
// when the session ends normally (stdin closed, SIGTERM, SIGINT) so that a
// role it held moves on at once. A crash leaves the hub's detach grace to do
// that.
const Ajv = require('ajv');
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { CallToolRequestSchema, ListToolsRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
const { HubClient } = require('../../node/lib/client');
const { PresenceSession } = require('../../node/lib/session');
const { resolveIdentity, tmuxLocator, startedForHealthCheck } = require('./identity');
const { LocalChannel } = require('./local_channel');
const { ReservationNotes, DEFAULT_POLL_MS, endedText } = require('./reservation_notes');
const { TOOLS, FIELD_REASONS } = require('./tools');
const { roleName, firstLine } = require('./render');
const { ToolError, errorResult } = require('./errors');

const VERSION = require('../package.json').version;
const MAX_PENDING_IDS = 10000;  // message ids pushed and not yet acknowledged
const MAX_RECENT = 200;         // recent push events kept for hub_whoami
const MAX_SENT = 1000;          // messages sent, for hub_message_status
const MAX_ACTIVATIONS = 50;
const MAX_CLAIMED_JOBS = 1000;  // the attempts this session claimed, by job id

// A Map that forgets its oldest entries past `max`.
function boundedSet(map, key, value, max) {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value);
}

class HubMcpServer {
  /**
   * @param {object} o hub (address), token, identity flags (client, agentId,
   *   project, host, session, noTmux), topics, heartbeatTtlMs, runtimeDir,
   *   cliPid, env, cwd.
   */
  constructor(o) {
    this.options = o;
    this.hubAddress = o.hub;
    this.identity = resolveIdentity(o, o.env || process.env, o.cwd || process.cwd());
    for (const w of this.identity.warnings) process.stderr.write(`hub-mcp: ${w}\n`);
    this.client = new HubClient(this.hubAddress, { token: o.token });
    this.pending = new Map();      // message id -> true
    this.recent = [];              // {at, kind, text}
    this.sent = new Map();         // message id -> {traceId, to}
    this.activations = new Map();  // activation id -> {activation, status, epoch, error}
    this.withdrawn = new Set();    // role wires this session declines
    this.manualRoles = new Map();  // wire -> {epoch, roleKey} acked by hub_role_ack_activation
    // job id -> the JobAttempt this session last claimed of it, which the
    // worker tools write for (until the job is ended or the attempt refused).
    this.claimedJobs = new Map();
    // Roles a previous server of this CLI process held when it stopped
    // ({wire, name, epoch, agent_id}), until hub says what became of them.
    this.inherited = [];
    this._unreachable = false;     // the stream broke, or the hub never answered
    // Role news in the order it happened: a loss is announced (with who
    // holds the role now, which takes a GetRole) before a later activation.
    this._roleNews = Promise.resolve();
    this.channel = new LocalChannel({ root: o.runtimeDir, cliPid: o.cliPid });
    this.session = this._makeSession();
    this.reservationNotes = new ReservationNotes({ client: this.client, session: this.session,
      identity: this.identity, channel: this.channel,
      pollMs: o.reservationPollMs || DEFAULT_POLL_MS,
      onVanished: (text) => this._announce('reservation lost', text),
      onKnown: () => this._refreshStart() });
    this.mcp = this._makeMcp();
    // Started by the CLI's `mcp list` / `mcp get`: answer the handshake, and
    // register nothing (docs/design/mcp.md, "Health checks").
    this.healthCheck = o.healthCheck !== undefined ? o.healthCheck
      : startedForHealthCheck(o.cliPid || process.ppid);
    this._stopping = null;
    // How long the goodbye (Deregister) may take at the end before the
    // process exits without it (the detach grace then ends the presence).
    this.goodbyeTimeoutMs = o.goodbyeTimeoutMs || 3000;
  }

  _makeSession() {
    const id = this.identity;
    const ttlMs = this.options.heartbeatTtlMs || 600000;
    const options = {
      agentId: id.agentId, cli: id.cli, hostId: id.hostId,
      capabilities: ['role:cto:candidate', 'role:lead:candidate', 'mcp'],
      topics: this.options.topics || [],
      metadata: { client: 'hub-mcp', version: VERSION, cli: id.client,
        agent_id_source: id.agentIdSource },
      heartbeatTtlMs: ttlMs,
      acceptActivation: (a) => !this.withdrawn.has(a.roleKeyWire),
    };
    if (id.projectId) options.projectId = id.projectId;
    if (id.sessionId) options.sessionId = id.sessionId;
    const session = new PresenceSession(this.client, options);
    if (id.tmux) {
      // A locator must expire within the lease of the registration that
      // carries it, and the session registers again after a hub restart:
      // build it fresh each time it is read.
      Object.defineProperty(session._opts, 'transportLocators', {
        get: () => [tmuxLocator(id.tmux, id.hostId, ttlMs)], enumerable: true });
    }
    session.on('state', () => this._refreshStart());
    session.on('attached', () => {
      this._unreachable = false;
      this._refreshStart();
      this._checkInherited();
    });
    session.on('disconnected', () => {
      this._unreachable = true;
      this._refreshStart();
    });
    session.on('message', (delivery) => this._onMessage(delivery));
    session.on('roleActivation', (a) => this._activation(a, 'received'));
    session.on('roleActivated', ({ activation, epoch }) => {
      this._activation(activation, 'acked', { epoch });
      this._roleNewsThen(() => this._announce('role', `you are now ${roleName(activation.roleKey)} at ` +
        `epoch ${epoch}; fencing token ${epoch} (acknowledged by hub-mcp on receipt)`));
    });
    session.on('roleActivationDeclined', (a) => {
      this._activation(a, 'declined');
      this._announce('role', `declined an activation as ${roleName(a.roleKey)} at epoch ${a.epoch} ` +
        '(not a candidate any more); hub_role_ack_activation takes it');
    });
    session.on('roleActivationFailed', ({ activation, error }) => {
      this._activation(activation, 'failed', { error: error.reason || error.codeName });
      this._announce('role', `activation as ${roleName(activation.roleKey)} at epoch ` +
        `${activation.epoch} was refused: ${error.reason || error.codeName}`);
    });
    // Whatever ended it (fenced, failed over, released, the presence
    // replaced): the role is announced lost with who holds it now.
    session.on('roleLost', ({ roleKeyWire, epoch, reason }) => {
      const held = this._wireName(roleKeyWire);
      this.manualRoles.delete(roleKeyWire);
      this._refreshStart();
      this._roleNewsThen(async () => this._announce('role', `you are no longer ${held} (epoch ${epoch} ` +
        `ended: ${reason}); ${await this._holderNow(roleKeyWire, epoch)}; stop acting for it`));
    });
    session.on('roleChange', (change) => {
      const r = change.role;
      if (!r || r.holderAgentId === id.agentId || !r.holderAgentId) return;
      if (r.state === 'ROLE_STATE_ACTIVE' && change.previousState !== 'ROLE_STATE_ACTIVE') {
        this._announce('role', `${roleName(r.roleKey)} is now held by ${r.holderAgentId} at epoch ${r.epoch}`);
      }
    });
    session.on('reservationEnded', (change) => {
      const text = endedText(change);
      if (!text || !this.reservationNotes.ended(change.reservation.reservationId)) return;
      this._announce('reservation lost', text);
      this.reservationNotes.refresh();
    });
    session.on('authorityLost', ({ reason }) => {
      this._announce('presence', `hub-mcp lost the agent ${id.agentId} (${reason}): another ` +
        'registration of the same id took over; this session no longer speaks for it');
    });
    session.on('failed', (error) => {
      this._announce('presence', `hub-mcp stopped: the hub refused the registration ` +
        `(${error.reason || error.codeName}: ${error.details})`);
    });
    return session;
  }

  _roleNewsThen(task) {
    this._roleNews = this._roleNews.then(task).catch(() => {});
    return this._roleNews;
  }

  // Who holds role `wire` now, as a phrase, for an agent whose `epoch` of it
  // ended; `role` when already read.
  async _holderNow(wire, epoch, role) {
    if (!role) {
      try {
        ({ role } = await this.client.roles.getRole({ roleKeyWire: wire }, { deadlineMs: 5000 }));
      } catch (e) {
        return `who holds it now is unknown (${e.reason || e.codeName || 'no answer'}; hub_role_get asks)`;
      }
    }
    const state = String(role.state).replace('ROLE_STATE_', '').toLowerCase();
    if (role.state === 'ROLE_STATE_ACTIVE' && role.holderAgentId) {
      if (role.holderAgentId !== this.identity.agentId) return `${role.holderAgentId} holds it now at epoch ${role.epoch}`;
      if (role.epoch !== epoch) {
        return `you hold it again at epoch ${role.epoch} since a new election (fencing token ${role.epoch}, ` +
          `not ${epoch})`;
      }
    }
    if (role.holderAgentId && role.holderAgentId !== this.identity.agentId) {
      return `${role.holderAgentId} is being activated for it (${state}, epoch ${role.epoch})`;
    }
    return `no agent holds it now (${state}, epoch ${role.epoch})`;
  }

  // After an attach: what became of the roles a previous server of this CLI
  // process held (it was killed, crashed or stopped; this registration
  // replaced its presence, so hub has fenced them by now).
  _checkInherited() {
    if (this.inherited.length === 0 || this._checking) return;
    this._checking = true;
    this._roleNewsThen(async () => {
      for (const r of [...this.inherited]) {
        let role;
        try {
          ({ role } = await this.client.roles.getRole({ roleKeyWire: r.wire }, { deadlineMs: 5000 }));
        } catch (_) {
          continue;  // the next attach asks again; the hooks say it is unknown meanwhile
        }
        this.inherited = this.inherited.filter((x) => x !== r);
        // The state line goes with the news that replaces it, never after.
        this.channel.setState(this._stateText(this._mayHold()));
        const still = role.state === 'ROLE_STATE_ACTIVE' && role.holderAgentId === r.agent_id && role.epoch === r.epoch;
        if (still && r.agent_id === this.identity.agentId) {
          this.manualRoles.set(r.wire, { roleKey: role.roleKey, epoch: role.epoch, activationId: role.activationId });
          this._announce('role', `you still hold ${r.name} at epoch ${r.epoch} (held before hub-mcp of this ` +
            `session restarted); fencing token ${r.epoch}`);
        } else {
          this._announce('role', `you are no longer ${r.name} (epoch ${r.epoch} ended while hub-mcp of this ` +
            `session was not running); ${await this._holderNow(r.wire, r.epoch, role)}; stop acting for it`);
        }
      }
    }).finally(() => {
      this._checking = false;
      this._refreshStart();
    });
  }

  // What a hook says about starting hub-mcp again.
  _restartHint() {
    return this.identity.client === 'claude' ? 'the next hub_* tool call starts it again'
      : 'restarting the CLI\'s MCP servers (or the session) starts it again';
  }

  _rolesPhrase(roles) {
    return roles.map((r) => `${r.name} at epoch ${r.epoch} (fencing token ${r.epoch})`).join(', ');
  }

  // The roles this session may hold: held now, and inherited ones not yet
  // checked ({wire, name, epoch, agent_id}).
  _mayHold() {
    const now = this.heldRoles().map((r) => ({ wire: r.role_key_wire, name: r.name, epoch: r.epoch,
      agent_id: this.identity.agentId }));
    return [...now, ...this.inherited.filter((i) => !now.some((r) => r.wire === i.wire))];
  }

  // What the hooks show once this server is not running (down.txt).
  _downText(roles) {
    const head = 'hub: hub-mcp, this session\'s link to hub, is not running (killed or crashed), so hub is ' +
      'unreachable from this session and your role status is unknown';
    if (roles.length === 0) return `${head} (it held no role when it stopped); ${this._restartHint()}.\n`;
    return `${head}: when it stopped you held ${this._rolesPhrase(roles)}, which another agent may hold ` +
      `now: do not act for it; ${this._restartHint()}, and hub_whoami then says which roles you hold.\n`;
  }

  // The state every hook shows while this server runs (state.txt).
  _stateText(roles) {
    const lines = [];
    if (this.inherited.length > 0) {
      lines.push(`hub: hub-mcp of this session started again; whether you still hold ` +
        `${this._rolesPhrase(this.inherited)} (held when the previous one stopped) is unknown until hub ` +
        'answers: do not act for it.');
    }
    const s = this.session;
    if (this._unreachable && !s.attached && !['lost', 'failed', 'stopped'].includes(s.state)) {
      const held = roles.filter((r) => !this.inherited.includes(r));
      lines.push(`hub: hub at ${this.hubAddress} is unreachable (hub-mcp keeps reconnecting), so your role ` +
        `status is unknown${held.length ? `: you held ${this._rolesPhrase(held)} when hub was last ` +
          'reachable, which another agent may hold once hub\'s detach grace has passed' : ''}.`);
    }
    return lines.length ? lines.join('\n') + '\n' : '';
  }

  _wireName(wire) {
    const a = [...this.activations.values()].find((e) => e.activation.roleKeyWire === wire);
    return a ? roleName(a.activation.roleKey) : `role ${wire}`;
  }

  _onMessage(delivery) {
    const m = delivery.message;
    if (!m) return;
    if (this.pending.has(m.messageId)) return;  // a redelivery: announced already
    boundedSet(this.pending, m.messageId, true, MAX_PENDING_IDS);
    const type = String(m.type).replace('MESSAGE_TYPE_', '').toLowerCase();
    const announce = () => this._announce('message', `message ${m.messageId} from ${m.fromAgentId} ` +
      `[${type}, priority ${m.priority}${m.correlationId && type === 'request'
        ? `, correlation ${m.correlationId}` : ''}]: ${firstLine(m)}`);
    // While hub is asked what became of a previous server's roles, a message
    // pushed on the new attach waits for that news: the model hears first
    // whether it still holds a role, then what it was sent.
    if (this.inherited.length > 0 || this._checking) this._roleNewsThen(async () => announce());
    else announce();
  }

  _activation(activation, status, extra = {}) {
    boundedSet(this.activations, activation.activationId,
      { activation, status, ...extra }, MAX_ACTIVATIONS);
    this._refreshStart();
  }

  // Keeps a push event for hub_whoami, the hook and an MCP notification.
  _announce(kind, text) {
    this.recent.push({ at: new Date().toISOString(), kind, text });
    if (this.recent.length > MAX_RECENT) this.recent.splice(0, this.recent.length - MAX_RECENT);
    this.channel.addEvent(`hub ${kind}: ${text}`, { keep: kind === 'role' || kind === 'presence' });
    this._refreshStart();
    if (this._initialized) {
      this.mcp.sendLoggingMessage({ level: 'notice', logger: 'hub', data: `${kind}: ${text}` })
        .catch(() => {});
    }
  }

  // ---- what tools read -------------------------------------------------------
  heldRoles() {
    const roles = this.session.roles.map((r) => ({ wire: r.roleKeyWire, key: r.roleKey, epoch: r.epoch,
      activationId: r.activationId }));
    for (const [wire, r] of this.manualRoles) {
      if (!roles.some((x) => x.wire === wire)) roles.push({ wire, key: r.roleKey, epoch: r.epoch, activationId: r.activationId });
    }
    return roles.map((r) => ({
      name: roleName(r.key), role: r.key && r.key.kind === 'ROLE_KIND_LEAD' ? 'lead' : 'cto',
      project_id: r.key && r.key.projectId, scope_id: (r.key && r.key.scopeId) || null,
      role_key_wire: r.wire, epoch: r.epoch, fencing_token: r.epoch, activation_id: r.activationId,
    }));
  }

  activationList() {
    return [...this.activations.values()].map((e) => ({
      activation_id: e.activation.activationId, role: roleName(e.activation.roleKey),
      role_key_wire: e.activation.roleKeyWire, epoch: e.activation.epoch, status: e.status,
      error: e.error || null,
    }));
  }

  pendingCount() { return this.pending.size; }
  forgetPending(ids) { for (const id of ids || []) this.pending.delete(id); this._refreshStart(); }
  rememberSent(messageId, traceId, to) { boundedSet(this.sent, messageId, { traceId, to }, MAX_SENT); }
  sentMessage(messageId) { return this.sent.get(messageId); }
  setWithdrawn(wire, withdrawn) {
    if (withdrawn) this.withdrawn.add(wire);
    else this.withdrawn.delete(wire);
  }
  rememberAttempt(attempt) { boundedSet(this.claimedJobs, attempt.jobId, { ...attempt }, MAX_CLAIMED_JOBS); }
  claimedAttempt(jobId) { return this.claimedJobs.get(jobId); }
  forgetAttempt(jobId) { this.claimedJobs.delete(jobId); }
  unackedActivation(activationId) {
    const list = [...this.activations.values()].filter((e) => e.status !== 'acked');
    if (activationId) return list.find((e) => e.activation.activationId === activationId) || null;
    return list.length ? list[list.length - 1] : null;
  }
  activationAcked(activation, epoch) {
    this.withdrawn.delete(activation.roleKeyWire);
    this.manualRoles.set(activation.roleKeyWire, { roleKey: activation.roleKey, epoch,
      activationId: activation.activationId });
    this._activation(activation, 'acked', { epoch });
  }

  // The SessionStart context: who am I, roles held, pending count; nothing
  // while the hub is not reachable (the hook then prints nothing).
  _startContext() {
    const s = this.session;
    if (!s.attached) return '';
    const id = this.identity;
    const roles = this.heldRoles();
    const lines = [
      `hub: you are agent ${id.agentId} on hub ${this.hubAddress} (presence generation ` +
        `${s.presenceGeneration}); project ${id.projectId || 'none'}.`,
      roles.length === 0 ? 'hub: you hold no role.'
        : roles.map((r) => `hub: you are ${r.name} at epoch ${r.epoch}; fencing token ${r.fencing_token}.`).join('\n'),
      `hub: ${this.pending.size} pending message(s) pushed to you; read them with hub_inbox, ` +
        'acknowledge with hub_ack.',
    ];
    return lines.join('\n') + '\n';
  }

  // Rewrites what the hooks read: the start context, the state, the roles
  // held and what to show once this server is gone.
  _refreshStart() {
    if (this._refreshQueued) return;
    this._refreshQueued = true;
    setImmediate(() => {
      this._refreshQueued = false;
      if (this._stopping) return;
      const roles = this._mayHold();
      this.channel.setHeld({ agent_id: this.identity.agentId, hub: this.hubAddress,
        roles: roles.map((r) => ({ wire: r.wire, name: r.name, epoch: r.epoch, agent_id: r.agent_id })),
        reservations: [...this.reservationNotes.known.values()] },
      this._downText(roles));
      this.channel.setState(this._stateText(roles));
      this.channel.setStartContext(this._startContext());
    });
  }

  // ---- MCP -----------------------------------------------------------------------
  _makeMcp() {
    const mcp = new Server({ name: 'hub', version: VERSION },
      { capabilities: { tools: {}, logging: {} },
        instructions: 'hub coordinates the agents of a project: hub_whoami says who you are and ' +
          'which roles you hold (with the epoch: your fencing token); hub_inbox lists messages for ' +
          'you, hub_ack acknowledges them; hub_send / hub_ask / hub_reply talk to agents, topics ' +
          'and roles ("cto", "lead:scp_…"); hub_assign hands a job to another agent (hub_job_status ' +
          'follows it), and hub_claim_job takes a job assigned to you (hub_job_progress, ' +
          'hub_complete_job, hub_fail_job report on it).' });
    const ajv = new Ajv({ allErrors: false, strict: false });
    const validators = new Map(TOOLS.map((t) => [t.name, ajv.compile(t.inputSchema)]));
    mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: TOOLS.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema,
        annotations: t.annotations })),
    }));
    mcp.setRequestHandler(CallToolRequestSchema, async (request) => this._call(request.params, validators));
    mcp.oninitialized = () => { this._initialized = true; };
    return mcp;
  }

  async _call(params, validators) {
    const t = TOOLS.find((x) => x.name === params.name);
    if (!t) return errorResult(new ToolError('TOOL_UNKNOWN', `no tool ${params.name}`), this.hubAddress);
    const args = params.arguments || {};
    const validate = validators.get(t.name);
    if (!validate(args)) {
      const e = validate.errors[0];
      const field = e.params.missingProperty || e.params.additionalProperty ||
        e.instancePath.split('/')[1] || '';
      const reason = t.fieldReasons[field] || FIELD_REASONS[field] || 'REQUEST_INVALID';
      const what = e.params.additionalProperty ? 'is not an argument of this tool' : e.message;
      return errorResult(new ToolError(reason, `${field || 'arguments'} ${what}`), this.hubAddress);
    }
    try {
      const { text, structured } = await t.handler(args, this);
      return { content: [{ type: 'text', text }], structuredContent: structured };
    } catch (error) {
      return errorResult(error, this.hubAddress);
    }
  }

  /** Starts the local channel, the MCP transport, then the presence session. */
  async start() {
    const transport = new StdioServerTransport();
    transport.onclose = () => this.stop('stdin closed');
    process.stdin.on('end', () => this.stop('stdin closed'));
    if (this.healthCheck) {
      process.stderr.write('hub-mcp: started by a health check (the CLI\'s mcp command): ' +
        'serving MCP without registering an agent\n');
      await this.mcp.connect(transport);
      return;
    }
    this.channel.open();
    const previous = this.channel.previous;
    if (previous && previous.agent_id === this.identity.agentId && previous.hub === this.hubAddress &&
        Array.isArray(previous.roles)) {
      this.inherited = previous.roles.filter((r) => r && r.wire && r.epoch);
      if (Array.isArray(previous.reservations)) this.reservationNotes.inherit(previous.reservations);
    }
    this._refreshStart();
    this.reservationNotes.start();
    await this.mcp.connect(transport);
    this.session.start().catch(() => {});  // reconnects by itself; failures are announced
  }

  /** Says goodbye (Deregister), then exits. Idempotent. */
  stop(why) {
    if (this._stopping) return this._stopping;
    process.stderr.write(`hub-mcp: stopping (${why})\n`);
    this._stopping = (async () => {
      if (this.healthCheck) process.exit(0);
      this.reservationNotes.stop();
      const roles = this._mayHold();
      this.channel.close(`hub: hub-mcp, this session's link to hub, stopped (${why}) and said goodbye to hub, ` +
        `so hub is unreachable from this session${roles.length ? ` and the roles it held are given up: ` +
          `${this._rolesPhrase(roles)}, now stale; do not act for them` : ''}; ${this._restartHint()}.\n`);
      const timeout = new Promise((resolve) => setTimeout(resolve, this.goodbyeTimeoutMs).unref());
      await Promise.race([this.session.stop({ deregister: true }).catch(() => {}), timeout]);
      try { this.client.close(); } catch (_) { /* closed */ }
      process.exit(0);
    })();
    return this._stopping;
  }
}

module.exports = { HubMcpServer, VERSION };
