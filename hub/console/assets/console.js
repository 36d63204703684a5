// The hub console: plain JavaScript, no framework, no build step.
//
// It loads each view's snapshot once (/api/fleet, /api/roles, /api/events),
// then follows one Server-Sent Events stream (/api/stream) of changes after
// the snapshots' seq, updating only the rows that changed. Everything the
// hub sends is data: it reaches the page through textContent and attribute
// values only, never as HTML.
'use strict';

(() => {
  const state = {
    session: null,
    agents: new Map(),     // agent_id -> row data
    agentRows: new Map(),  // agent_id -> <tr>
    roles: new Map(),      // wire -> role data
    roleCards: new Map(),  // wire -> <div>
    eventSeqs: new Set(),
    messages: new Map(),   // id -> message data
    messageRows: new Map(),  // id -> <tr>
    skewMs: 0,             // server clock - browser clock
    stream: null,
    view: 'fleet',
  };
  const MAX_EVENTS = 500;
  const VIEWS = ['fleet', 'roles', 'messages', 'events'];
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
    return s <= 0 ? 'expired' : `${s}s`;
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

  function fleetTable(project) {
    let table = document.querySelector(`table[data-project="${CSS.escape(project)}"]`);
    if (table) return table.tBodies[0];
    table = el('table', { 'data-project': project },
      el('thead', {}, el('tr', {},
        ...['agent', 'status', 'CLI', 'attached', 'last seen', 'lease left', 'roles held',
          'pending'].map((h) => el('th', { text: h })))),
      el('tbody'));
    const section = el('div', { class: 'project', 'data-project': project },
      el('h2', { class: 'project', text: project === '' ? '(no project)' : project }), table);
    // Projects in name order.
    const container = $('fleet');
    const after = [...container.children].find((c) => c.dataset.project > project);
    container.insertBefore(section, after || null);
    return table.tBodies[0];
  }

  function fillAgentRow(tr, a) {
    const cells = [
      ['agent', a.agent_id],
      [`status status-${a.status}`, a.status],
      ['cli', a.cli],
      ['attached', a.attached ? 'yes' : 'no'],
      ['last-seen', ago(a.last_seen_ms)],
      ['lease', a.status === 'offline' ? '—' : left(a.lease_expires_ms)],
      ['roles', (a.roles || []).map((w) => roleName(w, state.roles.get(w))).join(', ')],
      ['pending', a.pending < 0 ? '?' : a.pending],
    ];
    if (tr.cells.length !== cells.length) {
      tr.replaceChildren(...cells.map(([c, t]) => el('td', { class: c, text: t })));
    } else {
      cells.forEach(([c, t], i) => {
        const td = tr.cells[i];
        td.className = c;
        td.textContent = String(t);
      });
    }
  }

  function agentMatches(a) {
    const q = $('fleet-filter').value.trim().toLowerCase();
    const status = $('fleet-status').value;
    if (status && a.status !== status) return false;
    if (!q) return true;
    const roles = (a.roles || []).map((w) => roleName(w, state.roles.get(w))).join(' ');
    return [a.agent_id, a.project_id || '', a.cli, roles].join(' ').toLowerCase().includes(q);
  }

  function applyAgent(a) {
    state.agents.set(a.agent_id, a);
    let tr = state.agentRows.get(a.agent_id);
    const project = a.project_id || '';
    if (tr && tr.dataset.project !== project) {
      tr.remove();
      tr = null;
    }
    if (!tr) {
      tr = el('tr', { 'data-agent-id': a.agent_id, 'data-project': project });
      const body = fleetTable(project);
      const after = [...body.rows].find((r) => r.dataset.agentId > a.agent_id);
      body.insertBefore(tr, after || null);
      state.agentRows.set(a.agent_id, tr);
    }
    fillAgentRow(tr, a);
    tr.hidden = !agentMatches(a);
    countFleet();
  }

  function countFleet() {
    let online = 0;
    for (const a of state.agents.values()) if (a.status === 'online') online += 1;
    $('fleet-count').textContent = `${state.agents.size} agents, ${online} online`;
  }

  function filterFleet() {
    for (const [id, tr] of state.agentRows) tr.hidden = !agentMatches(state.agents.get(id));
  }

  function renderFleet(snapshot) {
    $('fleet').replaceChildren();
    state.agents.clear();
    state.agentRows.clear();
    // One pass per project into fragments: 10,000 rows in one layout.
    const byProject = new Map();
    for (const a of snapshot.agents) {
      const p = a.project_id || '';
      if (!byProject.has(p)) byProject.set(p, []);
      byProject.get(p).push(a);
    }
    for (const p of [...byProject.keys()].sort()) {
      const body = fleetTable(p);
      const frag = document.createDocumentFragment();
      for (const a of byProject.get(p)) {
        state.agents.set(a.agent_id, a);
        const tr = el('tr', { 'data-agent-id': a.agent_id, 'data-project': p });
        fillAgentRow(tr, a);
        tr.hidden = !agentMatches(a);
        state.agentRows.set(a.agent_id, tr);
        frag.append(tr);
      }
      body.append(frag);
    }
    countFleet();
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

  function applyRole(r) {
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
    let active = 0;
    for (const r of state.roles.values()) if (r.state === 'active') active += 1;
    $('roles-count').textContent = `${state.roles.size} roles, ${active} active`;
  }

  function renderRoles(snapshot) {
    $('roles').replaceChildren();
    state.roles.clear();
    state.roleCards.clear();
    const frag = document.createDocumentFragment();
    const sorted = [...snapshot.roles].sort((a, b) =>
      (`${a.project_id} ${a.wire}` < `${b.project_id} ${b.wire}` ? -1 : 1));
    for (const r of sorted) {
      state.roles.set(r.wire, r);
      const card = roleCard(r);
      state.roleCards.set(r.wire, card);
      frag.append(card);
    }
    $('roles').append(frag);
    countRoles();
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
    return el('tr', { 'data-message-id': d.id },
      el('td', { text: when(d.failed_at_ms) }),
      el('td', { class: 'reason', text: d.reason }),
      el('td', { class: 'agent', text: d.from || '—' }),
      el('td', { class: 'agent', text: d.to || '—' }),
      el('td', { text: d.topic || '—' }),
      el('td', { text: d.last_error || '—' }));
  }

  function applyDeadLetter(d) {
    const body = $('dead-letters').tBodies[0];
    const old = body.querySelector(`tr[data-message-id="${CSS.escape(d.id)}"]`);
    const row = deadLetterRow(d);
    if (old) old.replaceWith(row);
    else body.insertBefore(row, body.firstChild);
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
    stream.addEventListener('agent', handle((a) => applyAgent(a)));
    stream.addEventListener('role', handle((r) => { applyRole(r); renderBacklog(); }));
    stream.addEventListener('message', handle((m) => applyMessage(m)));
    stream.addEventListener('event', handle((e, seq) => applyEvent(e, seq)));
    // The hub dropped changes this page had not read: load the views again.
    stream.addEventListener('reset', () => { loadViews(); });
    stream.onopen = () => setLive(true);
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

  async function loadViews() {
    const [fleet, roles, messages, events] = await Promise.all(
      [api('/api/fleet'), api('/api/roles'), api('/api/messages'), api('/api/events')]);
    state.skewMs = fleet.server_time_ms - Date.now();
    renderRoles(roles);
    renderBacklog();
    renderFleet(fleet);
    renderMessages(messages);
    $('events').replaceChildren();
    state.eventSeqs.clear();
    for (const e of events.events) applyEvent(e, e.seq);
    // Every change after the oldest snapshot; newer ones apply idempotently.
    openStream(Math.min(fleet.seq, roles.seq, messages.seq, events.seq));
  }

  // ---- views and session

  function show(view) {
    state.view = view;
    for (const b of document.querySelectorAll('#tabs button')) {
      b.classList.toggle('active', b.dataset.view === view);
    }
    for (const v of VIEWS) $(`${v}-view`).hidden = v !== view;
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
    await loadViews();
  }

  async function start() {
    for (const b of document.querySelectorAll('#tabs button')) {
      b.addEventListener('click', () => show(b.dataset.view));
    }
    $('fleet-filter').addEventListener('input', filterFleet);
    $('fleet-status').addEventListener('change', filterFleet);
    $('roles-filter').addEventListener('input', () => {
      for (const [w, card] of state.roleCards) card.hidden = !roleMatches(state.roles.get(w));
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
    // Times and leases count down between changes (text only, no reload).
    setInterval(() => {
      if (state.view !== 'fleet') return;
      for (const [id, tr] of state.agentRows) {
        if (tr.hidden) continue;
        const a = state.agents.get(id);
        tr.cells[4].textContent = ago(a.last_seen_ms);
        tr.cells[5].textContent = a.status === 'offline' ? '—' : left(a.lease_expires_ms);
      }
    }, 1000);
    try {
      await showApp(await api('/api/session'));
    } catch (e) {
      if (e.status === 401) showLogin();
      else $('whoami').textContent = `console unavailable: ${e.message}`;
    }
  }

  document.addEventListener('DOMContentLoaded', start);
})();
