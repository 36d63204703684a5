'use strict';
// What the hooks say about this session's own path reservations
// (docs/design/mcp.md, "Reservations in the hook context"): one line per
// reservation that ends soon or that another agent waits for, and one event
// (endedText) when one ended without this agent's release.
//
// The server lists its agent's live reservations in its project (one
// ListReservations, which also says who waits for each) when the session
// attaches, after each hub_reserve / hub_release, and every pollMs while
// attached, and leaves one record per reservation in the local channel's
// res.txt. The hook decides with the clock when it runs whether a record is
// shown (it ends within its threshold, or someone waits for it) and prints
// the time left, so the server needs no timer for a reservation entering
// its last minute.
//
// A reservation that ends while the session is attached arrives as an event
// on the presence stream (endedText). One that ends while it is not (the
// stream broke, or hub-mcp was not running: a previous server of the same
// CLI process left the ones it knew in held.json) is found by the first
// listing after the attach: known before, not listed now, neither released
// by this session nor told already (vanishedText).

const DEFAULT_POLL_MS = 5000;
const MAX_PATTERNS_SHOWN = 3;
const MAX_WAITERS_SHOWN = 3;
const MAX_TEXT = 400;
const MAX_NOTES = 100;  // records in res.txt

// A reservation is "about to end" within min(60 s, a tenth of its TTL),
// the TTL counted from its creation to its current expiry.
function thresholdMs(createdMs, expiresMs) {
  return Math.min(60000, Math.max(0, expiresMs - createdMs) / 10);
}

function ms(ts) {
  if (!ts) return 0;
  return Number(ts.seconds || 0) * 1000 + Math.floor(Number(ts.nanos || 0) / 1e6);
}

function clip(text, max) {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

// "src docs (+2 more) (exclusive, <id>, fencing token 7)": a reservation as
// the hooks name it.
function describe(r) {
  const patterns = r.patterns.slice(0, MAX_PATTERNS_SHOWN).join(' ') +
    (r.patterns.length > MAX_PATTERNS_SHOWN ? ` (+${r.patterns.length - MAX_PATTERNS_SHOWN} more)` : '');
  const mode = r.mode === 'RESERVATION_MODE_SHARED' ? 'shared' : 'exclusive';
  return `${patterns} (${mode}, ${r.reservationId}, fencing token ${r.token})`;
}

const ENDED_HOW = {
  RESERVATION_CHANGE_KIND_FORCE_RELEASED: 'was force-released by an operator',
  RESERVATION_CHANGE_KIND_EXPIRED: 'expired (its TTL passed unrenewed)',
  RESERVATION_CHANGE_KIND_HOLDER_GONE: 'ended with the presence that reserved it',
};

/**
 * The hook line for a reservation of this agent's that ended without its
 * release (a presence stream's reservation_ended event), or null for a
 * change that is not such an end.
 */
function endedText(change) {
  const how = change && change.reservation && ENDED_HOW[change.kind];
  if (!how) return null;
  return clip(`${describe(change.reservation)} ${how}; stop editing those paths ` +
    '(hub_reserve claims them again)', MAX_TEXT);
}

/**
 * The hook line for a reservation this session knew that ended while it was
 * not attached to hub (`how`: "hub-mcp of this session was not running" or
 * "this session was not attached to hub").
 */
function vanishedText(text, how) {
  return clip(`${text} ended while ${how} (it expired, was force-released, or ended with the ` +
    'presence that reserved it); stop editing those paths (hub_reserve claims them again)', MAX_TEXT);
}

/**
 * The record the hook reads for one listed reservation:
 * {showFromS, untilS, waited, text}; the hook appends "N s left".
 */
function noteOf(r) {
  const created = ms(r.createdAt);
  const expires = ms(r.expiresAt);
  const count = Number(r.waiterCount || 0);
  let waits = '';
  if (count > 0) {
    const agents = (r.waitingAgentIds || []).slice(0, MAX_WAITERS_SHOWN);
    const others = count - agents.length;
    waits = `; waited for by ${agents.join(', ')}${others > 0 ? ` and ${others} more waiting reserve(s)` : ''}` +
      ' (release it when done)';
  }
  const text = clip(`${describe(r)}${waits}`, MAX_TEXT);
  return {
    showFromS: Math.floor((expires - thresholdMs(created, expires)) / 1000),
    untilS: Math.floor(expires / 1000),
    waited: count > 0,
    text,
  };
}

// The records worth the hook's time: those waited for, and those whose
// threshold starts before the poll after next (a later one is written by a
// later poll), waited-for first, then by expiry; at most MAX_NOTES.
function due(notes, nowMs, pollMs) {
  const horizonS = Math.floor((nowMs + 2 * pollMs) / 1000);
  return notes.filter((n) => n.waited || n.showFromS <= horizonS)
    .sort((a, b) => (b.waited - a.waited) || (a.untilS - b.untilS))
    .slice(0, MAX_NOTES);
}

class ReservationNotes {
  /**
   * @param {object} o client (HubClient), session (PresenceSession),
   *   identity ({agentId, projectId}), channel (LocalChannel), pollMs.
   */
  /**
   * @param {object} o client (HubClient), session (PresenceSession),
   *   identity ({agentId, projectId}), channel (LocalChannel), pollMs;
   *   onVanished(text) (a known reservation ended while not attached) and
   *   onKnown() (the set of known reservations changed).
   */
  constructor({ client, session, identity, channel, pollMs = DEFAULT_POLL_MS,
    onVanished = () => {}, onKnown = () => {} }) {
    this.client = client;
    this.session = session;
    this.identity = identity;
    this.channel = channel;
    this.pollMs = pollMs;
    this.onVanished = onVanished;
    this.onKnown = onKnown;
    this._timer = null;
    this._running = null;
    this._again = false;
    // id -> {id, text}: the reservations of the last listing, and those a
    // previous server knew (inherit) until a listing says what became of them.
    this.known = new Map();
    this._inherited = new Set();
    this._told = new Set();     // ids whose end was told (an event or a listing)
    this._diffNext = false;     // the next listing follows an attach
  }

  /** What a previous server of this CLI process knew ([{id, text}]). */
  inherit(records) {
    for (const r of records || []) {
      if (r && typeof r.id === 'string' && typeof r.text === 'string' && !this.known.has(r.id)) {
        this.known.set(r.id, { id: r.id, text: r.text });
        this._inherited.add(r.id);
      }
    }
  }

  /**
   * This session released `id`, or its end arrived as an event: a later
   * listing does not tell of it. Returns false when its end was told
   * already (so the caller does not tell it twice).
   */
  ended(id) {
    this.known.delete(id);
    this._inherited.delete(id);
    if (this._told.has(id)) return false;
    this._told.add(id);
    return true;
  }

  start() {
    if (!this.identity.projectId) return;
    this.session.on('attached', () => {
      this._diffNext = true;
      this.refresh();
    });
    this.session.on('state', () => { if (!this.session.attached) this.channel.setReservationNotes([]); });
    this._timer = setInterval(() => this.refresh(), this.pollMs);
    this._timer.unref();
  }

  stop() {
    if (this._timer) clearInterval(this._timer);
    this._timer = null;
  }

  /** Lists this agent's reservations again (coalesced: one call at a time). */
  refresh() {
    if (!this.identity.projectId) return Promise.resolve();
    if (this._running) {
      this._again = true;
      return this._running;
    }
    this._running = (async () => {
      do {
        this._again = false;
        await this._once();
      } while (this._again);
      this._running = null;
    })();
    return this._running;
  }

  async _once() {
    if (!this.session.attached) {
      this.channel.setReservationNotes([]);
      return;
    }
    try {
      const diff = this._diffNext;
      const notes = [];
      const listed = new Map();
      let pageToken = '';
      do {
        const r = await this.client.reservations.listReservations({ projectId: this.identity.projectId,
          agentId: this.identity.agentId, pageSize: 1000, pageToken });
        for (const x of r.reservations) {
          notes.push(noteOf(x));
          listed.set(x.reservationId, { id: x.reservationId, text: describe(x) });
        }
        pageToken = r.nextPageToken;
      } while (pageToken && notes.length < 10000);
      this.channel.setReservationNotes(due(notes, Date.now(), this.pollMs));
      if (diff) {
        this._diffNext = false;
        for (const [id, r] of this.known) {
          if (listed.has(id) || this._told.has(id)) continue;
          this._told.add(id);
          this.onVanished(vanishedText(r.text, this._inherited.has(id)
            ? 'hub-mcp of this session was not running' : 'this session was not attached to hub'));
        }
        this._inherited.clear();
      }
      // Between attaches, a reservation that left the listing ended while
      // attached: its event tells of it (or told already).
      const before = [...this.known.keys()].join(' ');
      for (const id of this.known.keys()) if (!listed.has(id) && !this._inherited.has(id)) this.known.delete(id);
      for (const [id, r] of listed) this.known.set(id, r);
      if ([...this.known.keys()].join(' ') !== before) this.onKnown();
    } catch (_) {
      // The hub is unreachable or refused: keep what was known (its expiries
      // stay true); the next attach or poll lists again.
    }
  }
}

module.exports = { ReservationNotes, noteOf, endedText, vanishedText, due, thresholdMs, DEFAULT_POLL_MS,
  MAX_NOTES };
