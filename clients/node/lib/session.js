'use strict';
// PresenceSession: keeps one agent present on a hub and delivers what the hub
// pushes to it.
//
//   register (RegisterAgent) -> attach (PresenceService.Attach, hello) ->
//   heartbeat frames every heartbeatFraction of the lease TTL -> on any
//   break: reconnect, re-attaching with the same registration, as soon as
//   the channel has reconnected (or, when a reachable hub ended the stream,
//   after an exponential backoff with jitter); when the hub restarted
//   (STALE_HUB_INSTANCE, STORE_FINGERPRINT_MISMATCH) or forgot the agent
//   (AGENT_NOT_FOUND, AGENT_OFFLINE), register again first, at once, unless
//   the agent was meanwhile registered by someone else.
//
// When another registration of the same agent id supersedes this one
// (STALE_PRESENCE_OWNER), another stream took over this registration
// (PRESENCE_STREAM_REPLACED) or the agent was deregistered
// (AGENT_DEREGISTERED), the session stops for good and emits
// `authorityLost`: it never registers again to fight back.
//
// Events (EventEmitter):
//   'registered'  (RegisterAgentResponse)
//   'attached'    (PresenceAttached)
//   'heartbeat'   (PresenceLeaseAck)
//   'message'     (MessageDelivery, ack: () => Promise<MessageAckResult>)
//                 at-least-once: unacknowledged messages come again after a
//                 reconnect.
//   'roleActivation'        (RoleActivation) before it is acknowledged
//   'roleActivated'         ({activation, role, epoch}) the ACK was accepted;
//                           roleEpoch(wire) now returns epoch
//   'roleActivationFailed'  ({activation, error: HubError})
//   'roleActivationDeclined' (RoleActivation) acceptActivation said no
//   'roleActivationCancel'  (RoleActivationCancel)
//   'roleProbe'   (RoleProbe) answered ready=true
//   'roleChange'  (RoleChange)
//   'roleLost'    ({roleKeyWire, epoch, reason}) a held role's authority ended
//   'reservationEnded' (ReservationChange) a reservation of this agent ended
//                 without its release: forced, expired or holder gone
//   'fencing'     (FencingNotice) the hub is about to end the stream
//   'disconnected' ({error: HubError|null, retryInMs, waitingForHub}) the
//                 stream ended; a retry follows after retryInMs or, with
//                 waitingForHub, as soon as the channel has reconnected
//   'hubRestarted' ({previousHubInstanceId, hubInstanceId|null, reason})
//   'authorityLost' ({reason, error, currentPresenceGeneration})
//   'failed'      (HubError) a non-retryable failure (e.g. INVALID_ARGUMENT
//                 registration); the session stopped
//   'stopped'     () after stop(), authorityLost or failed
//   'state'       (state, previousState)
// No 'error' event is ever emitted, so an unhandled one cannot crash the
// process.
const { EventEmitter } = require('events');
const grpc = require('@grpc/grpc-js');
const { HubError, fromErrorStatus, reasonName } = require('./errors');
const { duration, durationMs, toStruct } = require('./convert');

const ACK_SCHEMA = 'tfx.role-activation-ack.v1';

const DEFAULTS = {
  heartbeatTtlMs: 30000,
  heartbeatFraction: 1 / 3,
  heartbeatIntervalMs: 0,  // 0: heartbeatFraction of the granted lease TTL
  frameTimeoutMs: 10000,   // how long a frame's answer may take
  backoffInitialMs: 250,
  backoffMaxMs: 15000,
  backoffMultiplier: 2,
  backoffJitter: 0.2,      // +-20 %
  acceptActivation: null,  // async (RoleActivation) => boolean; default: accept
  random: Math.random,
};

// What a stream end or failed call means for the session.
const LOST = new Set(['STALE_PRESENCE_OWNER', 'PRESENCE_STREAM_REPLACED', 'AGENT_DEREGISTERED']);
const HUB_CHANGED = new Set(['STALE_HUB_INSTANCE', 'STORE_FINGERPRINT_MISMATCH']);
const AGENT_GONE = new Set(['AGENT_NOT_FOUND', 'AGENT_OFFLINE']);
const FATAL_CODES = new Set([
  grpc.status.INVALID_ARGUMENT, grpc.status.PERMISSION_DENIED,
  grpc.status.UNAUTHENTICATED, grpc.status.UNIMPLEMENTED,
]);

function classify(error) {
  if (!error) return 'retry';  // the hub closed the stream (OK): reconnect
  if (LOST.has(error.reason)) return 'lost';
  if (HUB_CHANGED.has(error.reason)) return 'hubChanged';
  if (AGENT_GONE.has(error.reason)) return 'reregister';
  if (FATAL_CODES.has(error.code)) return 'fatal';
  if (error.code === grpc.status.RESOURCE_EXHAUSTED && error.reason === 'LIMIT_EXCEEDED') {
    return 'fatal';
  }
  return 'retry';
}

class PresenceSession extends EventEmitter {
  /**
   * @param {import('./client').HubClient} client
   * @param {object} options agentId and cli (e.g. 'AGENT_CLI_CLAUDE') are
   *   required; capabilities, topics, metadata (plain object), projectId,
   *   sessionId, hostId, pid (default process.pid), transportLocators are
   *   sent with RegisterAgent; the rest tunes the session (DEFAULTS).
   */
  constructor(client, options) {
    super();
    if (!options || !options.agentId || !options.cli) {
      throw new TypeError('PresenceSession needs options.agentId and options.cli');
    }
    this._client = client;
    this._opts = { ...DEFAULTS, ...options };
    this._state = 'idle';
    this._generation = 0;
    this._hubInstanceId = null;
    this._storeFingerprint = null;
    this._leaseTtlMs = this._opts.heartbeatTtlMs;
    this._needsRegister = true;
    this._verifyOwner = false;  // check GetAgent before registering again
    this._stopped = false;
    this._call = null;
    this._attached = false;
    this._frameId = 0;
    this._waiters = new Map();  // frame_id -> {resolve, reject, timer}
    this._heartbeatTimer = null;
    this._sleep = null;         // {timer, resolve} of the backoff wait
    this._roles = new Map();    // role_key_wire -> held role
    this._startWaiters = [];
    this._loop = null;
  }

  get agentId() { return this._opts.agentId; }
  /** 'idle' | 'registering' | 'attaching' | 'attached' | 'backoff' | 'lost' | 'failed' | 'stopped' */
  get state() { return this._state; }
  get presenceGeneration() { return this._generation; }
  get hubInstanceId() { return this._hubInstanceId; }
  get storeFingerprint() { return this._storeFingerprint; }
  get attached() { return this._attached; }

  /**
   * The fencing token of a role this agent holds: the epoch its activation
   * was acknowledged for, or undefined when it holds no such role. Without
   * an argument: the epoch of the only held role (undefined if none or
   * several).
   */
  roleEpoch(roleKeyWire) {
    if (roleKeyWire === undefined) {
      if (this._roles.size !== 1) return undefined;
      return this._roles.values().next().value.epoch;
    }
    const held = this._roles.get(roleKeyWire);
    return held ? held.epoch : undefined;
  }

  /** The roles held now: [{roleKeyWire, roleKey, epoch, activationId, role}]. */
  get roles() {
    return [...this._roles.values()].map((r) => ({ ...r }));
  }

  /**
   * Starts the session. Resolves once the first stream is attached; rejects
   * with a HubError if the session fails or loses its authority first.
   * Reconnection never rejects it: the session keeps trying.
   */
  start() {
    if (this._loop === null) {
      this._loop = this._run();
    }
    if (this._attached) return Promise.resolve();
    if (this._isFinal()) return Promise.reject(this._finalError || new HubError({
      code: grpc.status.CANCELLED, message: 'presence session stopped' }));
    return new Promise((resolve, reject) => this._startWaiters.push({ resolve, reject }));
  }

  /**
   * Stops the session: half-closes the stream (the hub starts the agent's
   * detach grace) or, with {deregister: true}, also marks the agent offline
   * at once: a goodbye frame on the attached stream (the hub deregisters the
   * agent, fenced by this registration, and hands its roles on with no
   * grace, then ends the stream OK), else, or if the goodbye did not end OK,
   * Deregister.
   */
  async stop({ deregister = false } = {}) {
    if (this._stopped && this._state === 'stopped') return;
    const wasFinal = this._isFinal();
    this._stopped = true;
    this._wakeSleep();
    const call = this._call;
    let saidGoodbye = false;
    if (call) {
      const ended = new Promise((resolve) => {
        call.once('status', (s) => resolve(s));
        call.once('error', () => resolve(null));
        setTimeout(() => resolve(null), 2000).unref();
      });
      const goodbye = deregister && !wasFinal && this._attached;
      try {
        if (goodbye) call.write({ frameId: this._nextFrameId(), goodbye: {} });
        call.end();
      } catch (_) { /* already closed */ }
      const status = await ended;
      saidGoodbye = goodbye && status !== null && status.code === grpc.status.OK;
      if (this._call === call) call.cancel();
    }
    if (deregister && !wasFinal && !saidGoodbye && this._generation > 0) {
      await this._client.presence.deregister({
        agentId: this.agentId,
        presenceGeneration: this._generation,
      }).catch(() => {});
    }
    if (this._loop) await this._loop;
    if (!wasFinal) this._finish('stopped', null);
  }

  /**
   * Acknowledges delivered messages. Over the presence stream when attached,
   * otherwise with MessageService.Ack fenced by this registration.
   */
  async ackMessages(messageIds) {
    if (this._attached) {
      return this._request({ messageAck: { messageIds } });
    }
    const response = await this._client.messages.ack({
      agentId: this.agentId,
      messageIds,
      presenceGeneration: this._generation,
    });
    return response.result;
  }

  /** Sends a heartbeat frame now; resolves with its PresenceLeaseAck. */
  heartbeat() {
    return this._request({ heartbeat: {} });
  }

  // ---- the loop ------------------------------------------------------------

  async _run() {
    let attempt = 0;
    let registeredSinceAttach = false;
    while (!this._stopped) {
      let outcome;
      try {
        if (this._needsRegister) await this._register();
        outcome = await this._attachOnce();
      } catch (error) {
        outcome = { attached: false, error };
      }
      if (this._stopped) break;
      const error = outcome.error;
      if (error && error.lostAuthority) {
        this._loseAuthority(error.reason, error, error.currentPresenceGeneration);
        break;
      }
      const kind = classify(error);
      if (kind === 'lost') {
        this._loseAuthority(error.reason, error,
          outcome.fencing ? outcome.fencing.currentPresenceGeneration : undefined);
        break;
      }
      if (kind === 'fatal') {
        this._finish('failed', error);
        break;
      }
      if (kind === 'hubChanged') {
        this.emit('hubRestarted', {
          previousHubInstanceId: this._hubInstanceId,
          hubInstanceId: outcome.fencing ? outcome.fencing.hubInstanceId || null : null,
          reason: error.reason,
        });
        this._hubInstanceId = null;
        this._storeFingerprint = null;
      }
      if (kind === 'hubChanged' || kind === 'reregister') {
        this._needsRegister = true;
        this._verifyOwner = true;
      }
      if (outcome.attached) {
        attempt = 0;
        registeredSinceAttach = false;
      }
      this._setState('backoff');
      if ((kind === 'hubChanged' || kind === 'reregister') && !registeredSinceAttach) {
        // The hub answered, so it is up: the first registration after a
        // loss goes out at once (one that does not lead to an attach is
        // paced by the backoff below next time).
        registeredSinceAttach = true;
        this.emit('disconnected', { error: error || null, retryInMs: 0 });
        continue;
      }
      if (this._client.connectivity(true) === 'down') {
        // The connection is gone: wait for the channel to reconnect (its own
        // backoff, up to max_reconnect_backoff_ms, paces the attempts) and
        // try at once. Sleeping a growing backoff instead kept agents away
        // for seconds after the hub was back; the session's backoff is for
        // a hub that is reachable and refuses.
        this.emit('disconnected', { error: error || null, retryInMs: 0, waitingForHub: true });
        await this._waitForChannel();
        continue;
      }
      const delay = this._backoff(attempt);
      attempt += 1;
      this.emit('disconnected', { error: error || null, retryInMs: delay });
      await this._wait(delay);
    }
  }

  // Resolves once the client's channel is ready (or closed), or the session
  // stops (stop() wakes it like a backoff wait).
  _waitForChannel() {
    return new Promise((resolve) => {
      const sleep = { timer: null, resolve };
      this._sleep = sleep;
      const check = (state) => {
        if (this._sleep !== sleep) return;  // stopped meanwhile
        if (state !== 'down') {
          this._sleep = null;
          resolve();
          return;
        }
        this._client.waitForConnected(1000).then(check);
      };
      check('down');
    });
  }

  _backoff(attempt) {
    const o = this._opts;
    const base = Math.min(o.backoffMaxMs, o.backoffInitialMs * Math.pow(o.backoffMultiplier, attempt));
    const jitter = 1 + o.backoffJitter * (2 * o.random() - 1);
    return Math.max(0, Math.round(base * jitter));
  }

  _wait(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this._sleep = null; resolve(); }, ms);
      this._sleep = { timer, resolve };
    });
  }

  _wakeSleep() {
    if (this._sleep) {
      clearTimeout(this._sleep.timer);
      const { resolve } = this._sleep;
      this._sleep = null;
      resolve();
    }
  }

  async _register() {
    this._setState('registering');
    if (this._verifyOwner && this._generation > 0) {
      // Before registering again, make sure nobody else registered the agent
      // meanwhile: a newer generation means this session was superseded.
      let agent = null;
      try {
        ({ agent } = await this._client.presence.getAgent({ agentId: this.agentId }));
      } catch (error) {
        if (error.reason !== 'AGENT_NOT_FOUND') throw error;
      }
      if (agent && agent.presenceGeneration > this._generation) {
        const lost = new HubError({
          code: grpc.status.FAILED_PRECONDITION,
          reason: 'STALE_PRESENCE_OWNER',
          domain: 'hub.v1',
          message: `agent ${this.agentId} was registered again (generation ` +
            `${agent.presenceGeneration} > ${this._generation})`,
          metadata: { presence_generation: String(agent.presenceGeneration) },
        });
        lost.lostAuthority = true;
        lost.currentPresenceGeneration = agent.presenceGeneration;
        throw lost;
      }
    }
    const o = this._opts;
    const request = {
      agentId: o.agentId,
      cli: o.cli,
      pid: o.pid === undefined ? process.pid : o.pid,
      capabilities: o.capabilities || [],
      topics: o.topics || [],
      heartbeatTtl: duration(o.heartbeatTtlMs),
    };
    if (o.metadata) request.metadata = toStruct(o.metadata);
    for (const f of ['projectId', 'sessionId', 'hostId', 'transportLocatorsJson']) {
      if (o[f] !== undefined) request[f] = o[f];
    }
    if (o.transportLocators) request.transportLocators = o.transportLocators;
    const response = await this._client.presence.registerAgent(request);
    if (this._stopped) return;
    this._generation = response.presenceGeneration;
    this._hubInstanceId = response.hubInstanceId;
    this._storeFingerprint = response.storeFingerprint;
    this._leaseTtlMs = durationMs(response.heartbeatTtl) || o.heartbeatTtlMs;
    this._needsRegister = false;
    this._verifyOwner = false;
    // A new registration holds no role the previous one held: the hub fences
    // those by epoch and will activate this registration anew.
    this._dropRoles('reregistered');
    this.emit('registered', response);
  }

  // One stream, from hello to its end. Resolves with
  // {attached, error: HubError|null, fencing: FencingNotice|null}.
  _attachOnce() {
    if (this._stopped) return Promise.resolve({ attached: false, error: null });
    this._setState('attaching');
    return new Promise((resolve) => {
      const call = this._client.attach();
      this._call = call;
      let done = false;
      let fencing = null;
      let attached = false;
      const finish = (error) => {
        if (done) return;
        done = true;
        if (this._call === call) this._call = null;
        this._attached = false;
        this._stopHeartbeats();
        const ended = error || new HubError({
          code: grpc.status.UNAVAILABLE, message: 'the presence stream ended' });
        for (const waiter of this._waiters.values()) {
          clearTimeout(waiter.timer);
          waiter.reject(ended);
        }
        this._waiters.clear();
        resolve({ attached, error, fencing });
      };
      call.on('data', (frame) => {
        if (done) return;
        switch (frame.frame) {
          case 'attached':
            attached = true;
            this._onAttached(frame.attached);
            break;
          case 'event':
            if (frame.event.event === 'fencing') {
              fencing = frame.event.fencing;
              this.emit('fencing', fencing);
            } else {
              this._onEvent(frame.event);
            }
            break;
          case 'frameError':
            this._answer(frame.frameId, null, fromErrorStatus(frame.frameError));
            break;
          default:
            // leaseAck, activationAckResult, messageAckResult: answers.
            this._answer(frame.frameId, frame[frame.frame], null);
        }
      });
      call.on('error', (err) => {
        const error = this._client.toHubError(err);
        if (fencing && !error.reason) error.reason = reasonName(fencing.reason);
        finish(error);
      });
      call.on('status', (status) => {
        if (status.code === grpc.status.OK) finish(null);
      });
      const hello = {
        agentId: this.agentId,
        presenceGeneration: this._generation,
        leaseTtl: duration(this._leaseTtlMs),
      };
      if (this._hubInstanceId) hello.hubInstanceId = this._hubInstanceId;
      if (this._storeFingerprint) hello.storeFingerprint = this._storeFingerprint;
      call.write({ frameId: this._nextFrameId(), hello });
    });
  }

  _onAttached(attached) {
    this._attached = true;
    this._hubInstanceId = attached.hubInstanceId;
    this._storeFingerprint = attached.storeFingerprint;
    this._leaseTtlMs = durationMs(attached.leaseTtl) || this._leaseTtlMs;
    this._setState('attached');
    this._scheduleHeartbeat();
    this.emit('attached', attached);
    const waiters = this._startWaiters;
    this._startWaiters = [];
    for (const w of waiters) w.resolve();
  }

  _onEvent(event) {
    switch (event.event) {
      case 'roleActivation':
        this._onActivation(event.roleActivation);
        break;
      case 'roleActivationCancel': {
        const cancel = event.roleActivationCancel;
        this.emit('roleActivationCancel', cancel);
        const held = this._roles.get(cancel.roleKeyWire);
        if (held && held.activationId === cancel.activationId) {
          this._roles.delete(cancel.roleKeyWire);
          this.emit('roleLost', { roleKeyWire: held.roleKeyWire, epoch: held.epoch,
            reason: 'activation_cancelled' });
        }
        break;
      }
      case 'roleProbe':
        this.emit('roleProbe', event.roleProbe);
        this._send({ probeReply: { probeId: event.roleProbe.probeId, ready: true } });
        break;
      case 'message': {
        const delivery = event.message;
        const id = delivery.message ? delivery.message.messageId : '';
        this.emit('message', delivery, () => this.ackMessages([id]));
        break;
      }
      case 'roleChange': {
        const change = event.roleChange;
        this.emit('roleChange', change);
        const role = change.role;
        const held = role ? this._roles.get(role.roleKeyWire) : undefined;
        if (held && (role.epoch > held.epoch || role.holderAgentId !== this.agentId ||
            change.kind === 'ROLE_CHANGE_KIND_REMOVED')) {
          this._roles.delete(held.roleKeyWire);
          this.emit('roleLost', { roleKeyWire: held.roleKeyWire, epoch: held.epoch,
            reason: 'role_changed' });
        }
        break;
      }
      case 'reservationEnded':
        this.emit('reservationEnded', event.reservationEnded);
        break;
      default:
        break;  // a kind this client does not know: ignored (presence.proto)
    }
  }

  async _onActivation(activation) {
    this.emit('roleActivation', activation);
    let accept = true;
    if (this._opts.acceptActivation) {
      try {
        accept = await this._opts.acceptActivation(activation);
      } catch (_) {
        accept = false;
      }
    }
    if (!accept) {
      this.emit('roleActivationDeclined', activation);
      return;
    }
    const ack = {
      schema: ACK_SCHEMA,
      activationId: activation.activationId,
      roleKeyWire: activation.roleKeyWire,
      epoch: activation.epoch,
      activationSeq: activation.activationSeq,
      holderAgentId: activation.holderAgentId,
      reachable: true,
      charterAck: {
        roleKeyWire: activation.roleKeyWire,
        epoch: activation.epoch,
        charterVersion: activation.charterVersion,
      },
    };
    try {
      const result = await this._request({ activationAck: ack });
      const role = result.role || null;
      const epoch = role && role.epoch ? role.epoch : activation.epoch;
      const previous = this._roles.get(activation.roleKeyWire);
      if (previous && previous.epoch < epoch) {
        this.emit('roleLost', { roleKeyWire: previous.roleKeyWire, epoch: previous.epoch,
          reason: 'superseded_epoch' });
      }
      this._roles.set(activation.roleKeyWire, {
        roleKeyWire: activation.roleKeyWire,
        roleKey: activation.roleKey,
        epoch,
        activationId: activation.activationId,
        role,
      });
      this.emit('roleActivated', { activation, role, epoch });
    } catch (error) {
      this.emit('roleActivationFailed', { activation, error });
    }
  }

  // ---- frames ----------------------------------------------------------------

  _nextFrameId() {
    this._frameId += 1;
    return this._frameId;
  }

  _send(frame) {
    const call = this._call;
    if (!call || !this._attached) return false;
    call.write({ frameId: this._nextFrameId(), ...frame });
    return true;
  }

  // Sends a frame and resolves with the hub's answer to it (or rejects with
  // its frame_error, the stream's end, or a timeout that also drops the
  // stream: a hub that stops answering is treated as gone).
  _request(frame) {
    const call = this._call;
    if (!call || !this._attached) {
      return Promise.reject(new HubError({
        code: grpc.status.UNAVAILABLE, message: 'the presence stream is not attached' }));
    }
    const frameId = this._nextFrameId();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._waiters.delete(frameId);
        reject(new HubError({ code: grpc.status.DEADLINE_EXCEEDED,
          message: `no answer to frame ${frameId} within ${this._opts.frameTimeoutMs} ms` }));
        if (this._call === call) call.cancel();
      }, this._opts.frameTimeoutMs);
      this._waiters.set(frameId, { resolve, reject, timer });
      call.write({ frameId, ...frame });
    });
  }

  _answer(frameId, value, error) {
    const waiter = this._waiters.get(frameId);
    if (!waiter) return;
    this._waiters.delete(frameId);
    clearTimeout(waiter.timer);
    if (error) waiter.reject(error);
    else waiter.resolve(value);
  }

  _scheduleHeartbeat() {
    this._stopHeartbeats();
    const interval = this._opts.heartbeatIntervalMs ||
      Math.max(1000, Math.floor(this._leaseTtlMs * this._opts.heartbeatFraction));
    this._heartbeatTimer = setTimeout(async () => {
      this._heartbeatTimer = null;
      if (!this._attached) return;
      try {
        const ack = await this.heartbeat();
        this.emit('heartbeat', ack);
      } catch (_) {
        // A frame_error keeps the stream; a fencing end or a timeout ends it
        // and the loop reconnects.
      }
      if (this._attached) this._scheduleHeartbeat();
    }, interval);
  }

  _stopHeartbeats() {
    if (this._heartbeatTimer) {
      clearTimeout(this._heartbeatTimer);
      this._heartbeatTimer = null;
    }
  }

  // ---- ends ------------------------------------------------------------------

  _dropRoles(reason) {
    for (const held of this._roles.values()) {
      this.emit('roleLost', { roleKeyWire: held.roleKeyWire, epoch: held.epoch, reason });
    }
    this._roles.clear();
  }

  _loseAuthority(reason, error, currentPresenceGeneration) {
    this._stopped = true;
    this._dropRoles('authority_lost');
    this._finish('lost', error, () => this.emit('authorityLost', {
      reason,
      error,
      currentPresenceGeneration: currentPresenceGeneration || undefined,
    }));
  }

  _isFinal() {
    return this._state === 'lost' || this._state === 'failed' || this._state === 'stopped';
  }

  _finish(state, error, announce) {
    this._stopped = true;
    this._stopHeartbeats();
    this._finalError = error;
    this._setState(state);
    if (announce) announce();
    if (state === 'failed') this.emit('failed', error);
    const waiters = this._startWaiters;
    this._startWaiters = [];
    const reason = error || new HubError({
      code: grpc.status.CANCELLED, message: 'presence session stopped' });
    for (const w of waiters) w.reject(reason);
    this.emit('stopped');
  }

  _setState(state) {
    if (state === this._state) return;
    const previous = this._state;
    this._state = state;
    this.emit('state', state, previous);
  }
}

module.exports = { PresenceSession, classify, DEFAULTS };
