// The hub console: plain JavaScript, no framework, no build step.
//
// It loads each view's snapshot once (/api/fleet, /api/roles, /api/messages,
// /api/reservations, /api/jobs, /api/events),
// then follows one Server-Sent Events stream (/api/stream) of changes after
// the snapshots' seq, updating only the rows that changed. The first load
// draws the fleet from its first rows and counts (/api/fleet?first=N), opens
// the stream, and only then fetches the whole fleet and the roles. Everything the
// hub sends is data: it reaches the page through textContent and attribute
// values only, never as HTML.
'use strict';

(() => {
  const state = {
    session: null,
    agents: new Map(),     // agent_id -> row data
    fleetRows: [],         // ids of the agents the filter keeps, in table order
    fleetWindow: null,     // [first, last) of fleetRows in the DOM
    fleetDirty: false,
    fleetRefilter: false,
    roles: new Map(),      // wire -> role data
    roleCards: new Map(),  // wire -> <div>, once the roles view was shown
    rolesDrawn: false,
    eventSeqs: new Set(),
    messages: new Map(),   // id -> message data
    messageRows: new Map(),  // id -> <tr>
    reservations: new Map(),  // reservation id -> row data
    waiters: new Map(),  // waiter id -> row data (a reserve waiting in its queue)
    conflictsRefused: 0,
    jobs: new Map(),  // job id -> the job as last read (each change is the whole job)
    skewMs: 0,             // server clock - browser clock
    stream: null,
    view: 'fleet',
    // While the first load's whole fleet and roles are on their way: the
    // counts of the partial fleet, and each agent's and role's last change
    // the stream brought meanwhile ({seq, row}), applied over the snapshots
    // when they arrive.
    partial: null,
    loads: 0,  // loadViews calls: a late snapshot of an earlier one is dropped
    afterOpen: null,  // what to do once the stream is open (loadRest)
  };
  const MAX_EVENTS = 500;
  const VIEWS = ['fleet', 'roles', 'messages', 'reservations', 'jobs', 'events'];
  const $ = (id) => document.getElementById(id);

  // el('td', {class: 'x', text: 'y'}, child...): children are nodes or
  // strings (which become text nodes).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('data-')) e.setAttribute(k, String(v));
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  async function api(path, { method = 'GET', body } = {}) {
    const headers = {};
    if (method !== 'GET') {
      headers['Content-Type'] = 'application/json';
      if (state.session) headers['X-Console-CSRF'] = state.session.csrf;
    }
    const response = await fetch(path, {
      method, headers, credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const err = new Error((data && data.message) || `HTTP ${response.status}`);
      err.status = response.status;
      err.reason = data && data.reason;
      err.metadata = (data && data.metadata) || {};
      throw err;
    }
    return data;
  }

  // ---- formatting

  function serverNow() { return Date.now() + state.skewMs; }

  function ago(ms) {
    if (!ms) return '—';
    const s = Math.round((serverNow() - ms) / 1000);
    if (s < 1) return 'just now';
    if (s < 120) return `${s}s ago`;
    if (s < 7200) return `${Math.round(s / 60)}m ago`;
    return `${Math.round(s / 3600)}h ago`;
  }

  function left(ms) {
    if (!ms) return '—';
    const s = Math.round((ms - serverNow()) / 1000);
    if (s <= 0) return 'expired';
    if (s < 120) return `${s}s`;
    if (s < 7200) return `${Math.floor(s / 60)}m`;
    return `${Math.floor(s / 3600)}h`;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function when(ms) { return ms ? new Date(ms).toLocaleTimeString() : '—'; }

  // The key inside rk2.<base64url(canonical JSON)>; null when it is not one.
  function wireKey(wire) {
    try {
      let b64 = wire.slice(4).replace(/-/g, '+').replace(/_/g, '/');
      while (b64.length % 4) b64 += '=';
      return JSON.parse(atob(b64));
    } catch (e) {
      return null;
    }
  }

  // "cto" or "lead/<scope>".
  function roleName(wire, role) {
    if (role) return role.kind === 'lead' ? `lead/${role.scope_id}` : role.kind;
    const key = wireKey(wire);
    if (!key) return wire;
    return key.role_kind === 'lead' ? `lead/${key.scope_id}` : String(key.role_kind);
  }

  // "prj_… cto".
  function roleTitle(wire) {
    const r = state.roles.get(wire);
    const key = r ? { project_id: r.project_id } : wireKey(wire);
    return key ? `${key.project_id} ${roleName(wire, r)}` : wire;
  }

  // ---- fleet
  //
  // One table, sorted by project then agent id, of which only the rows in
  // view (and a margin) exist in the DOM: a fleet of 10,000 agents costs
  // the page a few dozen rows, however it changes.

  const ROW_PX = 28;
  const MARGIN_ROWS = 20;
  const FLEET_COLUMNS = ['project', 'agent', 'status', 'CLI', 'attached', 'last seen',
    'lease left', 'roles held', 'pending'];

  function fleetCells(a) {
    return [
      ['project', a.project_id || '(no project)'],
      ['agent', a.agent_id],
      [`status status-${a.status}`, a.status],
      ['cli', a.cli],
      ['attached', a.attached ? 'yes' : 'no'],
      ['last-seen', ago(a.last_seen_ms)],
      ['lease', a.status === 'offline' ? '—' : left(a.lease_expires_ms)],
      ['roles', (a.roles || []).map((w) => roleName(w, state.roles.get(w))).join(', ')],
      ['pending', a.pending < 0 ? '?' : a.pending],
    ];
  }

  function agentRow(a) {
    return el('tr', { 'data-agent-id': a.agent_id, 'data-project': a.project_id || '' },
      ...fleetCells(a).map(([c, t]) => el('td', { class: c, text: t, title: t })));
  }

  function agentMatches(a) {
    const q = $('fleet-filter').value.trim().toLowerCase();
    const status = $('fleet-status').value;
    if (status && a.status !== status) return false;
    if (!q) return true;
    const roles = (a.roles || []).map((w) => roleName(w, state.roles.get(w))).join(' ');
    return [a.agent_id, a.project_id || '', a.cli, roles].join(' ').toLowerCase().includes(q);
  }

  function fleetOrder(a, b) {
    const pa = a.project_id || '';
    const pb = b.project_id || '';
    if (pa !== pb) return pa < pb ? -1 : 1;
    return a.agent_id < b.agent_id ? -1 : a.agent_id > b.agent_id ? 1 : 0;
  }

  // The rows the filter keeps, in order; rebuilt at most once a frame.
  function refilterFleet() {
    // A partial fleet keeps its first rows; the filter runs over every
    // agent once they are all here.
    if (!state.partial) {
      state.fleetRows = [...state.agents.values()].filter(agentMatches).sort(fleetOrder)
        .map((a) => a.agent_id);
    }
    drawFleet(true);
  }

  let fleetFrame = 0;
  function scheduleFleet(refilter) {
    state.fleetRefilter = state.fleetRefilter || refilter;
    if (fleetFrame) return;
    fleetFrame = requestAnimationFrame(() => {
      fleetFrame = 0;
      const again = state.fleetRefilter;
      state.fleetRefilter = false;
      if (again) refilterFleet();
      else drawFleet(false);
    });
  }

  // Draws the rows in view between two spacers; `force` redraws them all.
  function drawFleet(force) {
    const box = $('fleet');
    const rows = state.fleetRows;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_PX) - MARGIN_ROWS);
    const count = Math.ceil(box.clientHeight / ROW_PX) + 2 * MARGIN_ROWS;
    const last = Math.min(rows.length, first + count);
    const body = $('fleet-rows');
    if (!force && state.fleetWindow && state.fleetWindow[0] === first &&
        state.fleetWindow[1] === last && !state.fleetDirty) {
      return;
    }
    state.fleetWindow = [first, last];
    state.fleetDirty = false;
    const spacer = (n) => {
      const td = el('td', { colSpan: FLEET_COLUMNS.length });
      td.style.height = `${n * ROW_PX}px`;
      return el('tr', { class: 'spacer' }, td);
    };
    // A partial fleet is as tall as the whole one will be.
    const total = state.partial ? state.partial.counts.agents : rows.length;
    body.replaceChildren(spacer(first),
      ...rows.slice(first, last).map((id) => agentRow(state.agents.get(id))),
      spacer(Math.max(0, total - last)));
    countFleet();
  }

  function applyAgent(a, seq) {
    const known = state.agents.get(a.agent_id);
    if (state.partial) {
      // Kept for the whole fleet; drawn now only if it is among the rows
      // already drawn (the others come with the whole fleet).
      state.partial.agents.set(a.agent_id, { seq, row: a });
      if (!known) return;
      state.agents.set(a.agent_id, a);
      state.fleetDirty = true;
      scheduleFleet(false);
      return;
    }
    state.agents.set(a.agent_id, a);
    // A new agent, another project or a filter's answer that changed moves
    // rows; anything else redraws the rows in view.
    const moved = !known || (known.project_id || '') !== (a.project_id || '') ||
      agentMatches(known) !== agentMatches(a);
    if (!moved) state.fleetDirty = true;
    scheduleFleet(moved);
  }

  function countFleet() {
    if (state.partial) {
      const c = state.partial.counts;
      $('fleet-count').textContent = `${c.agents} agents, ${c.online} online (loading)`;
      return;
    }
    let online = 0;
    for (const a of state.agents.values()) if (a.status === 'online') online += 1;
    $('fleet-count').textContent = `${state.agents.size} agents, ${online} online` +
      (state.fleetRows.length !== state.agents.size ? `, ${state.fleetRows.length} shown` : '');
  }

  function filterFleet() {
    $('fleet').scrollTop = 0;
    scheduleFleet(true);
  }

  // The whole fleet, or its first rows (snapshot.partial: they arrive in
  // the table's order, and the whole fleet follows). `changes`: what the
  // stream brought after an earlier partial snapshot, applied when newer
  // than this one.
  function renderFleet(snapshot, changes) {
    state.agents.clear();
    for (const a of snapshot.agents) state.agents.set(a.agent_id, a);
    for (const { seq, row } of (changes || new Map()).values()) {
      if (seq > snapshot.seq) state.agents.set(row.agent_id, row);
    }
    if (state.partial) state.fleetRows = snapshot.agents.map((a) => a.agent_id);
    refilterFleet();
  }

  // ---- roles

  function fact(label, value, cls) {
    return el('span', { class: cls }, el('b', { text: label }),
      el('span', { class: 'v', text: value }));
  }

  function roleCard(r) {
    const name = roleName(r.wire, r);
    const card = el('div', { class: 'role', 'data-wire': r.wire, 'data-project': r.project_id });
    const title = el('h3', {}, `${r.project_id} · ${name} `,
      el('span', { class: `state state-${r.state}`, text: r.state }));
    card.append(title);
    card.append(el('div', { class: 'facts' },
      fact('holder', r.holder || '—', 'holder'),
      fact('epoch', r.epoch, 'epoch'),
      fact('activation seq', r.activation_seq, 'activation-seq'),
      fact('blocked', r.blocked_reason || '—', 'blocked'),
      fact('last', `${r.last_reason} ${when(r.last_transition_ms)}`, 'last'),
      fact('waiting for a holder', r.waiting < 0 ? '?' : r.waiting,
        r.waiting > 0 ? 'waiting backlog-waiting' : 'waiting'),
      fact('unacked', r.backlog < 0 ? '?' : r.backlog, 'backlog'),
      fact('version', r.version, 'version')));
    const candidates = el('table', { class: 'candidates' },
      el('thead', {}, el('tr', {}, ...['candidate', 'priority', 'source', 'reachability',
        'failures', 'last probe'].map((h) => el('th', { text: h })))),
      el('tbody', {}, ...(r.candidates || []).map((c) => el('tr', { 'data-agent-id': c.agent_id },
        el('td', { class: 'agent', text: c.agent_id }),
        el('td', { text: c.priority }),
        el('td', { text: c.source }),
        el('td', { class: 'reachability', text: c.reachability }),
        el('td', { text: c.failures }),
        el('td', { text: c.last_probe_code ? `${c.last_probe_code} ${when(c.last_probe_ms)}` : '—' })))));
    card.append(candidates);
    const timeline = el('ol', { class: 'timeline', reversed: true },
      ...[...(r.history || [])].reverse().map((h) => el('li', { 'data-version': h.version,
        text: `${when(h.at_ms)} v${h.version} ${h.state}` +
          ` holder=${h.holder || '—'} epoch=${h.epoch} seq=${h.activation_seq}` +
          ` reason=${h.reason}${h.blocked_reason ? ` blocked=${h.blocked_reason}` : ''}` })));
    card.append(el('details', { open: true }, el('summary', { text: 'transitions' }), timeline));
    if (state.session && state.session.may_act) {
      const button = el('button', { type: 'button', class: 'ensure', text: 'Force election…' });
      button.addEventListener('click', () => ensure(r.wire, name, r.project_id));
      card.append(button);
      if (r.kind === 'lead') {
        const close = el('button', { type: 'button', class: 'close-scope', text: 'Close scope…' });
        close.addEventListener('click', () => closeScope(r.wire, name, r.project_id));
        card.append(' ', close);
      }
    }
    card.hidden = !roleMatches(r);
    return card;
  }

  function roleMatches(r) {
    const q = $('roles-filter').value.trim().toLowerCase();
    if (!q) return true;
    return [r.wire, r.project_id, roleName(r.wire, r), r.holder || '', r.state]
      .join(' ').toLowerCase().includes(q);
  }

  function applyRole(r, seq) {
    if (state.partial) state.partial.roles.set(r.wire, { seq, row: r });
    if (!state.rolesDrawn) {
      // Kept as data until the roles view is first shown.
      if (r.removed) state.roles.delete(r.wire);
      else if (!state.roles.has(r.wire) || state.roles.get(r.wire).version <= r.version) {
        state.roles.set(r.wire, r);
      }
      countRoles();
      return;
    }
    const old = state.roleCards.get(r.wire);
    if (r.removed) {
      state.roles.delete(r.wire);
      if (old) old.remove();
      state.roleCards.delete(r.wire);
      countRoles();
      return;
    }
    const known = state.roles.get(r.wire);
    if (known && known.version > r.version) return;  // an older render
    state.roles.set(r.wire, r);
    const card = roleCard(r);
    if (old) {
      old.replaceWith(card);
    } else {
      const container = $('roles');
      const key = `${r.project_id} ${r.wire}`;
      const after = [...container.children].find(
        (c) => `${c.dataset.project} ${c.dataset.wire}` > key);
      container.insertBefore(card, after || null);
    }
    state.roleCards.set(r.wire, card);
    countRoles();
  }

  function countRoles() {
    if (state.partial) {
      const c = state.partial.counts;
      $('roles-count').textContent = `${c.roles} roles, ${c.roles_active} active (loading)`;
      return;
    }
    let active = 0;
    for (const r of state.roles.values()) if (r.state === 'active') active += 1;
    $('roles-count').textContent = `${state.roles.size} roles, ${active} active`;
  }

  // `changes` as for renderFleet.
  function renderRoles(snapshot, changes) {
    state.roles.clear();
    for (const r of snapshot.roles) state.roles.set(r.wire, r);
    for (const { seq, row } of (changes || new Map()).values()) {
      if (seq <= snapshot.seq) continue;
      if (row.removed) state.roles.delete(row.wire);
      else state.roles.set(row.wire, row);
    }
    $('roles').replaceChildren();
    state.roleCards.clear();
    state.rolesDrawn = false;
    // The cards are built when the view is first shown, then kept live.
    if (state.view === 'roles') drawRoles();
    countRoles();
  }

  function drawRoles() {
    const frag = document.createDocumentFragment();
    const sorted = [...state.roles.values()].sort((a, b) =>
      (`${a.project_id} ${a.wire}` < `${b.project_id} ${b.wire}` ? -1 : 1));
    for (const r of sorted) {
      const card = roleCard(r);
      state.roleCards.set(r.wire, card);
      frag.append(card);
    }
    $('roles').replaceChildren(frag);
    state.rolesDrawn = true;
  }

  async function ensure(wire, name, project) {
    if (!window.confirm(`Force an election for ${project} ${name}? ` +
      'The hub runs EnsureRole (trigger manual) as it would for an operator.')) return;
    const result = $('action-result');
    try {
      const r = await api('/api/roles/ensure', { method: 'POST', body: { wire } });
      result.className = 'notice';
      result.textContent = `EnsureRole ${project} ${name}: ${r.disposition}` +
        ` (state ${r.state}, holder ${r.holder || '—'}, epoch ${r.epoch})`;
    } catch (e) {
      result.className = 'error';
      result.textContent = `EnsureRole ${project} ${name} refused: ${e.message}`;
    }
  }

  async function closeScope(wire, name, project) {
    const reason = window.prompt(`Close ${project} ${name} for good? Its role, candidates and ` +
      'waiting messages go (the messages to dead letters), and the scope never reopens. Reason:');
    if (reason === null) return;
    const result = $('action-result');
    try {
      const r = await api('/api/roles/close', { method: 'POST', body: { wire, reason } });
      result.className = 'notice';
      result.textContent = `CloseRoleScope ${project} ${name}: ` +
        (r.already_closed ? 'already closed' : 'closed') + ` by ${r.closed_by}` +
        ` (reason: ${r.reason || '—'}; ${r.candidates_removed} candidate(s) removed,` +
        ` ${r.dead_lettered} message(s) dead-lettered)`;
    } catch (e) {
      result.className = 'error';
      result.textContent = `CloseRoleScope ${project} ${name} refused: ${e.message}`;
    }
  }

  // ---- messages

  function recipientsText(m) {
    if (!m.recipients.length) return m.role_wire ? 'none yet (role backlog)' : 'none';
    return m.recipients.map((r) => `${r.agent_id}: ${r.state}`).join(', ');
  }

  function messageRow(m) {
    const trace = el('button', { type: 'button', class: 'trace', text: 'trace' });
    trace.addEventListener('click', () => showTrace(m.trace_id));
    const to = m.role_wire ? `${roleTitle(m.role_wire)} (role)` : m.to;
    return el('tr', { 'data-message-id': m.id },
      el('td', { text: when(m.created_at_ms) }),
      el('td', { class: 'agent', text: m.from }),
      el('td', { class: 'agent to', text: to }),
      el('td', { text: m.type }),
      el('td', { text: m.priority }),
      el('td', { class: 'payload', text: m.payload + (m.payload_truncated ? ' …' : '') }),
      el('td', { class: 'recipients', text: recipientsText(m) }),
      el('td', { class: `status recipient-${m.status}`, text: m.status }),
      el('td', {}, trace));
  }

  function deadLetterRow(d) {
    const action = el('td', {});
    if (state.session && state.session.may_act) {
      const button = el('button', { type: 'button', class: 'redrive', text: 'Re-drive…' });
      button.addEventListener('click', () => redrive(d));
      action.append(button);
    }
    return el('tr', { 'data-message-id': d.id },
      el('td', { text: when(d.failed_at_ms) }),
      el('td', { class: 'reason', text: d.reason }),
      el('td', { class: 'agent', text: d.from || '—' }),
      el('td', { class: 'agent', text: d.to || '—' }),
      el('td', { text: d.topic || '—' }),
      el('td', { text: d.last_error || '—' }),
      action);
  }

  function deadLetterRowOf(id) {
    return $('dead-letters').tBodies[0].querySelector(`tr[data-message-id="${CSS.escape(id)}"]`);
  }

  function applyDeadLetter(d) {
    const body = $('dead-letters').tBodies[0];
    const old = deadLetterRowOf(d.id);
    const row = deadLetterRow(d);
    if (old) old.replaceWith(row);
    else body.insertBefore(row, body.firstChild);
  }

  // RedriveDeadLetter, after a confirmation; the row goes when the stream
  // brings the message back queued.
  async function redrive(d) {
    if (!window.confirm(`Re-drive message ${d.id} (${d.reason}) from ${d.from || '—'} to ` +
      `${d.to || '—'}? It is queued again, with a new expiry, for every recipient that had ` +
      'not acknowledged it (a role message: its holder, or the role\'s backlog).')) return;
    const result = $('dead-letter-result');
    try {
      const r = await api('/api/dead-letters/redrive', { method: 'POST', body: { id: d.id } });
      result.className = 'notice';
      result.textContent = `RedriveDeadLetter ${d.id}: ${r.status}, queued for ` +
        (r.recipients.length ? r.recipients.join(', ') : 'the role\'s backlog') +
        (r.pushed.length ? ` (pushed to ${r.pushed.join(', ')})` : '');
    } catch (e) {
      result.className = 'error';
      // The metadata says which limit refused it (and whose inbox is full).
      const md = Object.entries(e.metadata || {}).map(([k, v]) => `${k}=${v}`).join(' ');
      result.textContent = `RedriveDeadLetter ${d.id} refused: ${e.reason || ''} ${e.message}` +
        (md ? ` (${md})` : '');
    }
  }

  function applyMessage(m) {
    state.messages.set(m.id, m);
    const row = messageRow(m);
    const old = state.messageRows.get(m.id);
    const body = $('messages').tBodies[0];
    if (old) old.replaceWith(row);
    else body.insertBefore(row, body.firstChild);
    state.messageRows.set(m.id, row);
    if (m.dead_letter) {
      applyDeadLetter({ id: m.id, from: m.from, to: m.to, topic: m.topic, ...m.dead_letter });
    } else {
      const dead = deadLetterRowOf(m.id);  // re-driven: no dead letter now
      if (dead) dead.remove();
    }
  }

  function renderMessages(snapshot) {
    $('messages').tBodies[0].replaceChildren();
    $('dead-letters').tBodies[0].replaceChildren();
    state.messages.clear();
    state.messageRows.clear();
    for (const m of [...snapshot.messages].reverse()) applyMessage(m);
    for (const d of [...snapshot.dead_letters].reverse()) applyDeadLetter(d);
  }

  // ---- reservations

  function reservationMatches(r) {
    const q = $('reservations-filter').value.trim().toLowerCase();
    if (!q) return true;
    return [r.project_id, r.holder, r.reason, ...r.patterns].join(' ').toLowerCase().includes(q);
  }

  function reservationRow(r) {
    const action = el('td', {});
    if (state.session && state.session.may_act) {
      const button = el('button', { type: 'button', class: 'release', text: 'Release…' });
      button.addEventListener('click', () => releaseReservation(r));
      action.append(button);
    }
    const row = el('tr', { 'data-reservation-id': r.id },
      el('td', { text: r.project_id }),
      el('td', { class: 'agent holder', text: r.holder }),
      el('td', { class: 'patterns', text: r.patterns.join(' ') }),
      el('td', { class: 'mode', text: r.mode }),
      el('td', { class: 'token', text: r.token }),
      el('td', { class: 'expires', 'data-expires': r.expires_at_ms, text: left(r.expires_at_ms) }),
      el('td', { class: 'reason', text: r.reason || '—' }),
      el('td', { text: when(r.created_at_ms) }),
      action);
    row.hidden = !reservationMatches(r);
    return row;
  }

  function countReservations() {
    $('reservations-count').textContent = `${state.reservations.size} live reservations` +
      (state.conflictsRefused ? `; ${state.conflictsRefused} conflicting reserve(s) refused by this hub` : '');
  }

  // A change is the reservation as it is now, or its end (removed).
  function applyReservation(r) {
    const body = $('reservations').tBodies[0];
    const old = body.querySelector(`tr[data-reservation-id="${CSS.escape(r.id)}"]`);
    if (r.removed) {
      state.reservations.delete(r.id);
      if (old) old.remove();
    } else {
      state.reservations.set(r.id, r);
      const row = reservationRow(r);
      if (old) {
        old.replaceWith(row);
      } else {
        const after = [...body.rows].find((tr) => {
          const o = state.reservations.get(tr.dataset.reservationId);
          return o && `${o.project_id} ${o.patterns[0]}` > `${r.project_id} ${r.patterns[0]}`;
        });
        body.insertBefore(row, after || null);
      }
    }
    refreshWaitsFor(r.id);
    countReservations();
  }

  // "<id> (<holder>: <patterns>)" for each reservation (or waiter ahead)
  // the waiter's last attempt met.
  function waitsFor(w) {
    return (w.waits_for || []).map((id) => {
      const r = state.reservations.get(id);
      if (r) return `${id} (${r.holder}: ${r.patterns.join(' ')})`;
      const o = state.waiters.get(id);
      if (o) return `${id} (${o.agent}: ${o.patterns.join(' ')}, waiting)`;
      return id;
    }).join('; ');
  }

  // Rows naming `id` in their "waits for" text are rendered again.
  function refreshWaitsFor(id) {
    for (const tr of $('reservation-waits').tBodies[0].rows) {
      const w = state.waiters.get(tr.dataset.waiterId);
      if (w && (w.waits_for || []).includes(id)) tr.replaceWith(waiterRow(w));
    }
  }

  function waiterRow(w) {
    const row = el('tr', { 'data-waiter-id': w.id },
      el('td', { text: w.project_id }),
      el('td', { class: 'agent', text: w.agent }),
      el('td', { class: 'patterns', text: w.patterns.join(' ') }),
      el('td', { class: 'mode', text: w.mode }),
      el('td', { class: 'waits-for', text: waitsFor(w) }),
      el('td', { class: 'since', text: when(w.since_ms) }),
      el('td', { class: 'deadline', 'data-deadline': w.deadline_ms, text: left(w.deadline_ms) }));
    row.hidden = !reservationMatches({ project_id: w.project_id, holder: w.agent, reason: '',
      patterns: w.patterns });
    return row;
  }

  function countWaiters() {
    $('reservation-waits-count').textContent = state.waiters.size
      ? `${state.waiters.size} reserve(s) waiting` : 'no reserve waiting';
  }

  // A waiter joined its queue, or left it (its wait ended, or it was granted).
  function applyWaiter(w) {
    const body = $('reservation-waits').tBodies[0];
    const old = body.querySelector(`tr[data-waiter-id="${CSS.escape(w.id)}"]`);
    if (w.removed || w.deadline_ms <= serverNow()) {
      state.waiters.delete(w.id);
      if (old) old.remove();
    } else {
      state.waiters.set(w.id, w);
      const row = waiterRow(w);
      if (old) {
        old.replaceWith(row);
      } else {
        // Oldest first within a project: the order the queue serves them.
        const after = [...body.rows].find((tr) => {
          const o = state.waiters.get(tr.dataset.waiterId);
          return o && (o.project_id > w.project_id ||
            (o.project_id === w.project_id && o.since_ms > w.since_ms));
        });
        body.insertBefore(row, after || null);
      }
    }
    countWaiters();
  }

  function renderReservations(snapshot) {
    state.reservations.clear();
    $('reservations').tBodies[0].replaceChildren();
    state.conflictsRefused = snapshot.conflicts_refused;
    for (const r of snapshot.reservations) applyReservation(r);
    countReservations();
    state.waiters.clear();
    $('reservation-waits').tBodies[0].replaceChildren();
    for (const w of snapshot.waiters || []) applyWaiter(w);
    countWaiters();
  }

  // ForceReleaseReservation, after a confirmation; the row goes when the
  // stream brings the release.
  async function releaseReservation(r) {
    if (!window.confirm(`Release ${r.holder}'s reservation of ${r.patterns.join(' ')} in ` +
      `${r.project_id} (token ${r.token})? Its holder is not asked; its next fenced write ` +
      'with this token is refused.')) return;
    const result = $('reservation-result');
    try {
      const done = await api('/api/reservations/release', { method: 'POST', body: { id: r.id } });
      result.className = 'notice';
      result.textContent = `ForceReleaseReservation ${done.id}: released ${done.holder}'s ` +
        `${done.patterns.join(' ')} (token ${done.token}) as ${done.released_by}`;
    } catch (e) {
      result.className = 'error';
      result.textContent = `ForceReleaseReservation ${r.id} refused: ${e.reason || ''} ${e.message}`;
    }
  }

  // Roles whose messages wait for a holder, from the roles view's rows.
  function renderBacklog() {
    const waiting = [...state.roles.values()].filter((r) => r.waiting > 0);
    $('backlog').replaceChildren(...(waiting.length ? waiting.map((r) =>
      el('li', { 'data-wire': r.wire, text: `${r.project_id} ${roleName(r.wire, r)}: ` +
        `${r.waiting} message(s), ${r.state}${r.blocked_reason ? `, blocked: ${r.blocked_reason}` : ''}` }))
      : [el('li', { text: 'none' })]));
  }

  async function showTrace(traceId) {
    const panel = $('trace');
    panel.hidden = false;
    $('trace-title').textContent = `Trace ${traceId}`;
    try {
      const t = await api(`/api/trace?trace_id=${encodeURIComponent(traceId)}`);
      $('trace-list').replaceChildren(...t.messages.map((m) => el('li', {
        'data-message-id': m.id,
        text: `${when(m.created_at_ms)} ${m.type} ${m.from} → ${m.to}: ${recipientsText(m)} ` +
          `(${m.status}) ${m.payload}` })));
    } catch (e) {
      $('trace-list').replaceChildren(el('li', { class: 'error', text: e.message }));
    }
  }

  // ---- jobs
  //
  // Four tables drawn from one map of jobs: the queue (blocked and queued)
  // by project, priority (highest first) and age; the jobs a worker holds
  // (running, offered, waiting on a human) with the worker, the attempt and
  // its deadline; the failures (failed, timed out, cancelled) with their
  // error, newest first; and the late results of superseded attempts. A
  // change is the whole job: it moves the job to the table of its state.

  const JOB_WAITING = new Set(['blocked', 'queued']);
  const JOB_LIVE = new Set(['offered', 'running', 'waiting_human']);
  const JOB_FAILED = new Set(['failed', 'timed_out', 'cancelled']);

  function jobWorker(j) {
    if (j.worker_kind === 'role') return `role ${roleTitle(j.worker_role)}`;
    if (j.worker_kind === 'pool') {
      const of = [...(j.pool_capabilities || []), j.pool_topic ? `topic ${j.pool_topic}` : '']
        .filter(Boolean).join(' ');
      return `pool ${of || '(any agent)'}`;
    }
    return j.worker_agent;
  }

  function jobSupervisor(j) {
    return j.supervisor_role ? `role ${roleTitle(j.supervisor_role)}` : j.supervisor;
  }

  function jobMatches(j) {
    const q = $('jobs-filter').value.trim().toLowerCase();
    if (!q) return true;
    return [j.project_id, j.job_id, j.task, jobWorker(j), jobSupervisor(j), j.attempt_worker || '',
      j.state, j.error ? j.error.reason : ''].join(' ').toLowerCase().includes(q);
  }

  function jobRow(j, ...cells) {
    const row = el('tr', { 'data-job-id': j.job_id, 'data-project': j.project_id }, ...cells);
    row.hidden = !jobMatches(j);
    return row;
  }

  function queueRow(j) {
    const waiting = j.state === 'queued' && j.not_before_ms && j.not_before_ms > serverNow()
      ? `queued, not before ${when(j.not_before_ms)}` : j.state;
    const state = j.state === 'blocked' && j.depends_on.length
      ? `blocked on ${j.depends_on.join(', ')}` : waiting;
    return jobRow(j,
      el('td', { text: j.project_id }),
      el('td', { class: 'priority', text: j.priority }),
      el('td', { class: 'job-id', text: j.job_id }),
      el('td', { class: 'task', text: j.task }),
      el('td', { class: `state job-${j.state}`, text: state }),
      el('td', { class: 'age', 'data-since': j.created_at_ms, text: ago(j.created_at_ms) }),
      el('td', { class: 'agent target', text: jobWorker(j) }),
      el('td', { class: 'agent supervisor', text: jobSupervisor(j) }));
  }

  function runningRow(j) {
    return jobRow(j,
      el('td', { text: j.project_id }),
      el('td', { class: 'job-id', text: j.job_id }),
      el('td', { class: 'task', text: j.task }),
      el('td', { class: 'agent worker', text: `${j.attempt_worker || '—'}` +
        (j.attempt_generation ? ` (generation ${j.attempt_generation})` : '') }),
      el('td', { class: 'attempt', text: `${j.attempt} of ${j.max_attempts}` }),
      el('td', { class: 'deadline', 'data-deadline': j.deadline_ms || 0, text: left(j.deadline_ms) }),
      el('td', { class: 'progress', text: j.progress || '—' }),
      el('td', { class: 'cancel', text: j.cancel_requested ? 'requested' : '—' }));
  }

  function failedRow(j) {
    const e = j.error || {};
    return jobRow(j,
      el('td', { text: when(j.completed_at_ms || j.updated_at_ms) }),
      el('td', { text: j.project_id }),
      el('td', { class: 'job-id', text: j.job_id }),
      el('td', { class: 'task', text: j.task }),
      el('td', { class: `state job-${j.state}`, text: j.state }),
      el('td', { class: 'reason', text: e.reason || '—' }),
      el('td', { class: 'error-message', text: e.message || '—' }),
      el('td', { class: 'attempt', text: `${j.attempt} of ${j.max_attempts}` }));
  }

  function lateRow(j, l) {
    const what = l.error ? `error ${l.error.reason}${l.error.message ? `: ${l.error.message}` : ''}`
      : `result ${l.result}`;
    const row = jobRow(j,
      el('td', { text: when(l.reported_at_ms) }),
      el('td', { text: j.project_id }),
      el('td', { class: 'job-id', text: j.job_id }),
      el('td', { class: 'attempt', text: l.attempt }),
      el('td', { class: 'agent', text: l.agent_id }),
      el('td', { class: 'late', text: what }),
      el('td', { class: `state job-${j.state}`, text: `${j.state} (attempt ${j.attempt})` }));
    row.dataset.attempt = l.attempt;
    return row;
  }

  const byProject = (a, b) => (a.project_id < b.project_id ? -1 : a.project_id > b.project_id ? 1 : 0);

  function drawJobs() {
    const all = [...state.jobs.values()];
    const queue = all.filter((j) => JOB_WAITING.has(j.state)).sort((a, b) =>
      byProject(a, b) || b.priority - a.priority || a.created_at_ms - b.created_at_ms);
    const running = all.filter((j) => JOB_LIVE.has(j.state)).sort((a, b) =>
      byProject(a, b) || (a.deadline_ms || 0) - (b.deadline_ms || 0));
    const failed = all.filter((j) => JOB_FAILED.has(j.state))
      .sort((a, b) => b.updated_at_ms - a.updated_at_ms);
    const late = all.flatMap((j) => (j.late_results || []).map((l) => [j, l]))
      .sort(([, a], [, b]) => b.reported_at_ms - a.reported_at_ms);
    $('jobs-queue').tBodies[0].replaceChildren(...queue.map(queueRow));
    $('jobs-running').tBodies[0].replaceChildren(...running.map(runningRow));
    $('jobs-failed').tBodies[0].replaceChildren(...failed.map(failedRow));
    $('jobs-late').tBodies[0].replaceChildren(...late.map(([j, l]) => lateRow(j, l)));
    const blocked = queue.filter((j) => j.state === 'blocked').length;
    $('jobs-count').textContent = `${queue.length - blocked} queued, ${blocked} blocked, ` +
      `${running.length} running, ${failed.length} failed, timed out or cancelled, ` +
      `${late.length} late result(s)`;
  }

  let jobsFrame = 0;
  function scheduleJobs() {
    if (jobsFrame) return;
    jobsFrame = requestAnimationFrame(() => {
      jobsFrame = 0;
      drawJobs();
    });
  }

  function applyJob(j) {
    const known = state.jobs.get(j.job_id);
    // A render read before the one already shown (the snapshot's).
    if (known && known.updated_at_ms > j.updated_at_ms) return;
    state.jobs.set(j.job_id, j);
    scheduleJobs();
  }

  function renderJobs(snapshot) {
    state.jobs.clear();
    for (const j of snapshot.jobs) state.jobs.set(j.job_id, j);
    drawJobs();
  }

  // ---- events

  function applyEvent(e, seq) {
    if (state.eventSeqs.has(seq)) return;
    state.eventSeqs.add(seq);
    const fields = Object.entries(e.fields || {}).map(([k, v]) =>
      (k === 'role' && v.startsWith('rk2.') ? `role=${roleTitle(v)}` : `${k}=${v}`)).join(' ');
    const li = el('li', { class: `level-${e.level}`, 'data-event': e.event, 'data-seq': seq,
      text: `${when(e.at_ms)} ${e.event} ${fields}` });
    const list = $('events');
    list.insertBefore(li, list.firstChild);
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  // ---- live stream

  function setLive(on) {
    const live = $('live');
    live.className = on ? 'on' : 'off';
    live.textContent = on ? 'live' : 'reconnecting';
  }

  function openStream(after) {
    if (state.stream) state.stream.close();
    const stream = new EventSource(`/api/stream?after=${after}`);
    state.stream = stream;
    const handle = (apply) => (m) => {
      try {
        apply(JSON.parse(m.data), Number(m.lastEventId));
      } catch (err) {
        console.error('console: bad change', err);
      }
    };
    stream.addEventListener('agent', handle((a, seq) => applyAgent(a, seq)));
    stream.addEventListener('role', handle((r, seq) => { applyRole(r, seq); renderBacklog(); }));
    stream.addEventListener('message', handle((m) => applyMessage(m)));
    stream.addEventListener('reservation', handle((r) => applyReservation(r)));
    stream.addEventListener('reservation_wait', handle((w) => applyWaiter(w)));
    stream.addEventListener('job', handle((j) => applyJob(j)));
    stream.addEventListener('event', handle((e, seq) => applyEvent(e, seq)));
    // The hub dropped changes this page had not read: load the views again.
    stream.addEventListener('reset', () => { loadViews(requestViews(false)); });
    stream.onopen = () => {
      setLive(true);
      // A first load's whole fleet and roles, asked for once the stream is
      // open (so that they do not hold it up).
      const rest = state.afterOpen;
      state.afterOpen = null;
      if (rest) rest();
      if (performance.getEntriesByName('console-live').length === 0) {
        performance.measure('console-live', 'console-load');
      }
    };
    stream.onerror = async () => {
      setLive(false);
      if (stream.readyState === EventSource.CLOSED) {
        // Refused (logged out, session expired): back to the login form.
        try { await api('/api/session'); setTimeout(() => openStream(after), 1000); } catch (e) {
          showLogin();
        }
      }
    };
  }

  // Asks for the snapshots. A first load (`partial`) asks for the fleet's
  // first rows (as many as a screen shows, and a margin) and its counts
  // instead of the whole fleet, and for no roles: both follow once the
  // stream is open.
  function requestViews(partial) {
    // Timed for the benchmark (performance.getEntriesByType('measure')).
    if (performance.getEntriesByName('console-load').length === 0) {
      performance.mark('console-load');
    }
    const first = Math.min(1000, Math.ceil(window.innerHeight / ROW_PX) + 2 * MARGIN_ROWS);
    const views = Promise.all([api(partial ? `/api/fleet?first=${first}` : '/api/fleet'),
      partial ? null : api('/api/roles'), api('/api/messages'), api('/api/events'),
      api('/api/reservations'), api('/api/jobs')]);
    return views;
  }

  async function loadViews(views) {
    const load = ++state.loads;
    const [fleet, roles, messages, events, reservations, jobs] = await views;
    if (load !== state.loads) return;
    if (performance.getEntriesByName('console-snapshots').length === 0) {
      performance.measure('console-snapshots', 'console-load');
      performance.mark('console-fetched');
    }
    state.skewMs = fleet.server_time_ms - Date.now();
    // The stream connects while the snapshots are drawn (its changes are
    // handled after this function returns, on the rows drawn here): every
    // change after the oldest snapshot; newer ones apply idempotently.
    state.afterOpen = roles ? null : () => loadRest(load);
    openStream(Math.min(fleet.seq, roles ? roles.seq : fleet.seq, messages.seq, events.seq,
      reservations.seq, jobs.seq));
    // A first load: the whole fleet (when this is only its first rows) and
    // the roles follow.
    state.partial = roles ? null : { counts: fleet.counts, agents: new Map(), roles: new Map() };
    if (roles) {
      renderRoles(roles);
    } else {
      state.roles.clear();
      $('roles').replaceChildren();
      state.roleCards.clear();
      state.rolesDrawn = false;
      countRoles();
    }
    renderBacklog();
    renderFleet(fleet);
    renderMessages(messages);
    renderReservations(reservations);
    renderJobs(jobs);
    $('events').replaceChildren();
    state.eventSeqs.clear();
    for (const e of events.events) applyEvent(e, e.seq);
    if (performance.getEntriesByName('console-render').length === 0) {
      performance.measure('console-render', 'console-fetched');
    }
  }

  // The whole fleet and the roles, after a partial first load: each drawn
  // with the changes the stream brought since (the newer of the two wins).
  async function loadRest(load) {
    let fleet;
    let roles;
    try {
      [fleet, roles] = await Promise.all([api('/api/fleet'), api('/api/roles')]);
    } catch (e) {
      if (load !== state.loads) return;
      if (e.status === 401) { showLogin(); return; }
      console.error('console: the whole fleet failed to load; loading every view again', e);
      setTimeout(() => { if (load === state.loads) loadViews(requestViews(false)); }, 1000);
      return;
    }
    if (load !== state.loads || !state.partial) return;
    const changes = state.partial;
    state.partial = null;
    renderRoles(roles, changes.roles);
    renderBacklog();
    renderFleet(fleet, changes.agents);
    if (performance.getEntriesByName('console-whole').length === 0) {
      performance.measure('console-whole', 'console-load');
    }
  }

  // ---- views and session

  function show(view) {
    state.view = view;
    for (const b of document.querySelectorAll('#tabs button')) {
      b.classList.toggle('active', b.dataset.view === view);
    }
    for (const v of VIEWS) $(`${v}-view`).hidden = v !== view;
    if (view === 'roles' && !state.rolesDrawn && state.session && !state.partial) drawRoles();
    if (view === 'fleet') {
      // Drawn while hidden, it had no height: draw the rows in view now.
      state.fleetDirty = true;
      scheduleFleet(false);
    }
  }

  function showLogin() {
    if (state.stream) state.stream.close();
    state.stream = null;
    state.session = null;
    $('tabs').hidden = true;
    $('logout').hidden = true;
    $('whoami').textContent = '';
    for (const v of VIEWS) $(`${v}-view`).hidden = true;
    $('login-view').hidden = false;
    $('token').focus();
  }

  async function showApp(session) {
    state.session = session;
    $('login-view').hidden = true;
    $('tabs').hidden = false;
    $('logout').hidden = !session.tokens_required;
    const scope = session.all_projects ? 'all projects' : session.projects.join(', ');
    $('whoami').textContent = `${session.principal} (${session.kind}; ${scope})`;
    show(state.view);
    await loadViews(requestViews(true));
  }

  async function start() {
    for (const b of document.querySelectorAll('#tabs button')) {
      b.addEventListener('click', () => show(b.dataset.view));
    }
    $('fleet-head').replaceChildren(el('tr', {}, ...FLEET_COLUMNS.map((h) => el('th', { text: h }))));
    $('fleet-filter').addEventListener('input', filterFleet);
    $('fleet-status').addEventListener('change', filterFleet);
    $('roles-filter').addEventListener('input', () => {
      for (const [w, card] of state.roleCards) card.hidden = !roleMatches(state.roles.get(w));
    });
    $('reservations-filter').addEventListener('input', () => {
      for (const tr of $('reservations').tBodies[0].rows) {
        tr.hidden = !reservationMatches(state.reservations.get(tr.dataset.reservationId));
      }
      for (const tr of $('reservation-waits').tBodies[0].rows) {
        const w = state.waiters.get(tr.dataset.waiterId);
        tr.hidden = !reservationMatches({ project_id: w.project_id, holder: w.agent, reason: '',
          patterns: w.patterns });
      }
    });
    $('jobs-filter').addEventListener('input', () => {
      for (const id of ['jobs-queue', 'jobs-running', 'jobs-failed', 'jobs-late']) {
        for (const tr of $(id).tBodies[0].rows) {
          tr.hidden = !jobMatches(state.jobs.get(tr.dataset.jobId));
        }
      }
    });
    $('login').addEventListener('submit', async (e) => {
      e.preventDefault();
      const token = $('token').value;
      $('token').value = '';
      try {
        $('login-error').textContent = '';
        await showApp(await api('/api/login', { method: 'POST', body: { token } }));
      } catch (err) {
        $('login-error').textContent = `Login refused: ${err.message}`;
      }
    });
    $('logout').addEventListener('click', async () => {
      try { await api('/api/logout', { method: 'POST', body: {} }); } finally { showLogin(); }
    });
    // Times and leases count down between changes (text only, no reload):
    // only the rows in view exist, and only cells whose text changed are
    // touched.
    setInterval(() => {
      if (state.view === 'jobs') {
        for (const td of $('jobs-queue').querySelectorAll('td.age')) {
          setText(td, ago(Number(td.dataset.since)));
        }
        for (const td of $('jobs-running').querySelectorAll('td.deadline')) {
          setText(td, left(Number(td.dataset.deadline)));
        }
        return;
      }
      if (state.view === 'reservations') {
        for (const td of $('reservations').querySelectorAll('td.expires')) {
          setText(td, left(Number(td.dataset.expires)));
        }
        // A waiter past its deadline whose end never came (its hub died).
        for (const w of [...state.waiters.values()]) {
          if (w.deadline_ms <= serverNow()) applyWaiter({ ...w, removed: true });
        }
        for (const td of $('reservation-waits').querySelectorAll('td.deadline')) {
          setText(td, left(Number(td.dataset.deadline)));
        }
        return;
      }
      if (state.view !== 'fleet') return;
      for (const tr of $('fleet-rows').rows) {
        const a = state.agents.get(tr.dataset.agentId);
        if (!a) continue;
        setText(tr.cells[5], ago(a.last_seen_ms));
        setText(tr.cells[6], a.status === 'offline' ? '—' : left(a.lease_expires_ms));
      }
    }, 1000);
    $('fleet').addEventListener('scroll', () => scheduleFleet(false));
    window.addEventListener('resize', () => scheduleFleet(false));
    try {
      await showApp(await api('/api/session'));
    } catch (e) {
      if (e.status === 401) showLogin();
      else $('whoami').textContent = `console unavailable: ${e.message}`;
    }
  }

  document.addEventListener('DOMContentLoaded', start);
})();
