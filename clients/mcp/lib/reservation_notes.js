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
  constructor({ client, session, identity, channel, pollMs = DEFAULT_POLL_MS }) {
    this.client = client;
    this.session = session;
    this.identity = identity;
    this.channel = channel;
    this.pollMs = pollMs;
    this._timer = null;
    this._running = null;
    this._again = false;
  }

  start() {
    if (!this.identity.projectId) return;
    this.session.on('attached', () => this.refresh());
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
      const notes = [];
      let pageToken = '';
      do {
        const r = await this.client.reservations.listReservations({ projectId: this.identity.projectId,
          agentId: this.identity.agentId, pageSize: 1000, pageToken });
        for (const x of r.reservations) notes.push(noteOf(x));
        pageToken = r.nextPageToken;
      } while (pageToken && notes.length < 10000);
      this.channel.setReservationNotes(due(notes, Date.now(), this.pollMs));
    } catch (_) {
      // The hub is unreachable or refused: keep what was known (its expiries
      // stay true); the next attach or poll lists again.
    }
  }
}

module.exports = { ReservationNotes, noteOf, endedText, due, thresholdMs, DEFAULT_POLL_MS, MAX_NOTES };
