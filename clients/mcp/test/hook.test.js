'use strict';
// The hook of each CLI: its JSON from what the running server left, nothing
// when the server is gone, and never a failure.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { Hubd, freshDbPath, HubClient, startMcp, waitFor, attached, exited, runHook, tmpDir, PROJECT, RUNTIME_DIR } =
  require('./harness');
const { LocalChannel } = require('../lib/local_channel');

let hubd;
let hub;

test.before(async () => {
  hubd = await Hubd.start({ dbPath: freshDbPath('hook') });
  hub = new HubClient(hubd.address);
});
test.after(async () => {
  hub.close();
  await hubd.stop();
});

function context(r, event) {
  assert.deepEqual([r.code, r.stderr], [0, '']);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(out), ['hookSpecificOutput']);
  assert.equal(out.hookSpecificOutput.hookEventName, event);
  assert.equal(typeof out.hookSpecificOutput.additionalContext, 'string');
  return out.hookSpecificOutput.additionalContext;
}

test('with 100 pending messages the hooks say who, what and how many; then the server is gone', async () => {
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-hook' });
  await attached(m);
  for (let i = 0; i < 100; i++) {
    await hub.messages.publish({ fromAgentId: 'sender-x', to: 'mcp-hook', type: 'MESSAGE_TYPE_HANDOFF',
      priority: 3, payload: { fields: { text: { stringValue: `task ${i} "quoted"\\ok\nmore` } } } });
  }
  await waitFor('100 pushed', async () => (await m.call('hub_whoami')).structuredContent.pending_messages === 100);
  // The start context is rewritten after the last push: wait for it.
  const start = await waitFor('the start context', async () => {
    const r = await runHook('SessionStart');
    return r.stdout.includes('100 pending') ? r : null;
  });
  const ctx = context(start, 'SessionStart');
  assert.match(ctx, /^hub: you are agent mcp-hook on hub /);
  assert.match(ctx, /you hold no role\./);
  assert.match(ctx, /100 pending message\(s\)/);
  // SessionStart took the events so far: a prompt now has nothing new.
  const quiet = await runHook('UserPromptSubmit');
  assert.deepEqual([quiet.code, quiet.stdout], [0, '']);

  await hub.messages.publish({ fromAgentId: 'sender-y', to: 'mcp-hook', priority: 9,
    payload: { fields: { text: { stringValue: 'urgent: stop the deploy\nsecond line' } } } });
  const next = await waitFor('the new message', async () => {
    const r = await runHook('PostToolUse');
    return r.stdout ? r : null;
  });
  const line = context(next, 'PostToolUse');
  assert.match(line, /^hub: new since your last look:\n/);
  assert.match(line, /hub message: message \S+ from sender-y \[event, priority 9\]: urgent: stop the deploy\n$/);
  assert.ok(!line.includes('second line'));

  // A burst of 120: the hook shows the last 50 and says how many it left out.
  for (let i = 0; i < 120; i++) {
    await hub.messages.publish({ fromAgentId: 'sender-z', to: 'mcp-hook', payload: { fields: { text: { stringValue: `b${i}` } } } });
  }
  await waitFor('221 pushed', async () => (await m.call('hub_whoami')).structuredContent.pending_messages === 221);
  const burst = context(await runHook('UserPromptSubmit'), 'UserPromptSubmit');
  assert.match(burst, /\(70 earlier events not shown; hub_inbox lists every message\)/);
  assert.equal((burst.match(/hub message: /g) || []).length, 50);
  assert.match(burst, /: b119\n$/);

  // A role: the next hook says it, with its epoch as the fencing token.
  await m.call('hub_role_candidacy', { role: 'cto', candidate: true });
  await m.call('hub_role_ensure', { role: 'cto' });
  const held = await waitFor('cto held', async () => (await m.call('hub_whoami')).structuredContent.roles[0]);
  const roleLine = await waitFor('the role event', async () => {
    const r = await runHook('UserPromptSubmit');
    return r.stdout.includes('you are now cto') ? context(r, 'UserPromptSubmit') : null;
  });
  assert.ok(roleLine.includes(`hub role: you are now cto of ${PROJECT} at epoch ${held.epoch}; fencing token ${held.epoch}`), roleLine);
  const again = await waitFor('the start context with the role', async () => {
    const r = await runHook('SessionStart');
    return r.stdout.includes('you are cto') ? context(r, 'SessionStart') : null;
  });
  assert.ok(again.includes(`hub: you are cto of ${PROJECT} at epoch ${held.epoch}; fencing token ${held.epoch}.`), again);

  // The server is killed while its CLI goes on: every hook says hub is
  // unreachable from this session and the role's status is unknown.
  const gone = exited(m);
  process.kill(m.pid, 'SIGKILL');
  await gone;
  const down = `hub: hub-mcp, this session's link to hub, is not running (killed or crashed), so hub is ` +
    'unreachable from this session and your role status is unknown: when it stopped you held ' +
    `cto of ${PROJECT} at epoch ${held.epoch} (fencing token ${held.epoch}), which another agent may hold now: ` +
    'do not act for it; the next hub_* tool call starts it again, and hub_whoami then says which roles you hold.\n';
  for (const event of ['SessionStart', 'UserPromptSubmit', 'PostToolUse']) {
    assert.equal(context(await runHook(event), event), down, event);
  }

  // The CLI starts the server again (same agent, same CLI process): its new
  // registration replaces the killed one's presence, which ends the role at
  // that epoch; the hooks say so, then what the new election gave.
  const again2 = await startMcp({ hub: hubd.address, agentId: 'mcp-hook' });
  try {
    let seen = '';
    await waitFor('the loss of the old epoch in a hook', async () => {
      const r = await runHook('PostToolUse');
      if (r.stdout) seen += context(r, 'PostToolUse');
      return seen.includes('you are no longer') && seen.includes('you are now cto');
    });
    assert.match(seen, new RegExp(`hub role: you are no longer cto of ${PROJECT} \\(epoch ${held.epoch} ended while ` +
      'hub-mcp of this session was not running\\); (you hold it again at epoch (\\d+) since a new election ' +
      '\\(fencing token \\2, not \\d+\\)|no agent holds it now \\([a-z_]+, epoch \\d+\\)); stop acting for it\n'), seen);
    const lost = seen.indexOf('you are no longer');
    const now = seen.indexOf('you are now cto');
    assert.ok(lost < now, seen);
    const who = (await again2.call('hub_whoami')).structuredContent;
    assert.deepEqual(who.unchecked_roles, []);
    assert.ok(who.roles[0].epoch > held.epoch, JSON.stringify(who));
    assert.ok(seen.includes(`you are now cto of ${PROJECT} at epoch ${who.roles[0].epoch}`), seen);
  } finally {
    const bye = exited(again2);
    await again2.close();
    await bye;
  }
  // It stopped normally (stdin closed): said goodbye, gave the role up (the
  // events it had not shown yet follow).
  const stopped = context(await runHook('UserPromptSubmit'), 'UserPromptSubmit');
  assert.match(stopped, new RegExp('^hub: hub-mcp, this session\'s link to hub, stopped \\(stdin closed\\) and said ' +
    `goodbye to hub, so hub is unreachable from this session and the roles it held are given up: cto of ${PROJECT} ` +
    'at epoch \\d+ \\(fencing token \\d+\\), now stale; do not act for them; the next hub_\\* tool call starts it again.\n'), stopped);
});

test('a server whose hub is down: every hook says hub is unreachable and the role status unknown', async () => {
  const m = await startMcp({ hub: '127.0.0.1:1', agentId: 'mcp-hook-down' });
  try {
    await waitFor('the local channel', async () => (await m.call('hub_whoami')).structuredContent.state === 'backoff');
    const line = 'hub: hub at 127.0.0.1:1 is unreachable (hub-mcp keeps reconnecting), so your role status is unknown.\n';
    for (const event of ['SessionStart', 'UserPromptSubmit', 'PostToolUse']) {
      assert.equal(await waitFor('the state', async () => {
        const r = await runHook(event);
        return r.stdout && context(r, event);
      }), line, event);
    }
  } finally {
    await m.close();
  }
});

test('a hook of another session (a claude nested in this one) shows nothing of this one', async () => {
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-hook-outer',
    env: { CLAUDE_CODE_SESSION_ID: 'outer-session' } });
  try {
    await attached(m);
    await hub.messages.publish({ fromAgentId: 'sender-n', to: 'mcp-hook-outer',
      payload: { fields: { text: { stringValue: 'for the outer session' } } } });
    // The server left the event for the outer session's next hook.
    const ev = path.join(RUNTIME_DIR, String(process.pid), 'ev');
    await waitFor('the event file', () => fs.existsSync(ev) && fs.readdirSync(ev).length > 0);
    const nested = await runHook('UserPromptSubmit', {}, 'inner-session');
    assert.deepEqual([nested.code, nested.stdout], [0, '']);
    // and it claimed nothing: the outer session's next look still has it.
    const outer = await runHook('UserPromptSubmit', {}, 'outer-session');
    assert.match(context(outer, 'UserPromptSubmit'), /for the outer session/);
  } finally {
    await m.close();
  }
});

// docs/design/mcp.md, "Reservations in the hook context": a line per
// reservation of this agent that another agent waits for or that ends within
// min(60 s, a tenth of its TTL); at most three, then how many more.
test('the hooks name the reservations of mine someone waits for or that end soon, and no other', async () => {
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-res-holder', args: ['--reservation-poll=1'] });
  // The waiter is another session with its own hook directory.
  const w = await startMcp({ hub: hubd.address, agentId: 'mcp-res-waiter',
    env: { HUB_MCP_RUNTIME_DIR: tmpDir('hook-res-waiter') } });
  try {
    await attached(m);
    await attached(w);
    const reserve = async (patterns, ttl) => {
      const r = await m.call('hub_reserve', { patterns, ttl_seconds: ttl });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      return r.structuredContent;
    };
    const held = [];
    for (const name of ['a', 'b', 'c', 'd', 'e']) held.push(await reserve([`long/${name}.cc`], 3600));
    const other = await reserve(['elsewhere'], 3600);

    // Another agent waits for long/ (all five of them).
    const waiting = hub.reservations.reserve({ projectId: PROJECT, agentId: 'mcp-res-waiter',
      patterns: ['long'], mode: 'RESERVATION_MODE_EXCLUSIVE', ttl: { seconds: 60 }, wait: { seconds: 120 } });
    const waited = await waitFor('the waited-for lines', async () => {
      const r = await runHook('PostToolUse');
      return r.stdout.includes('waited for by') ? context(r, 'PostToolUse') : null;
    });
    const lines = waited.split('\n').filter((l) => l.startsWith('hub reservation: '));
    assert.equal(lines.length, 4, waited);
    for (const [i, line] of lines.slice(0, 3).entries()) {
      const r = held[i];
      const m1 = new RegExp(`^hub reservation: long/${'abc'[i]}\\.cc \\(exclusive, ${r.reservation_id}, fencing token ` +
        `${r.token}\\); waited for by mcp-res-waiter \\(release it when done\\); it ends in (\\d+) s$`).exec(line);
      assert.ok(m1, line);
      assert.ok(Number(m1[1]) > 3000 && Number(m1[1]) <= 3600, line);
    }
    assert.equal(lines[3], 'hub reservation: and 2 more of yours end soon or are waited for (hub_reservations lists them)');
    assert.ok(!waited.includes('elsewhere'), waited);
    // hub_reservations says who waits, too.
    const listed = (await m.call('hub_reservations', {})).structuredContent.reservations;
    const byId = new Map(listed.map((r) => [r.reservation_id, r]));
    assert.deepEqual([byId.get(held[0].reservation_id).waiter_count, byId.get(held[0].reservation_id).waiting_agent_ids],
      [1, ['mcp-res-waiter']]);
    assert.equal(byId.get(other.reservation_id).waiter_count, 0);

    // Released, the paths go to the waiter; nobody waits for anything of mine.
    for (const r of held) await m.call('hub_release', { reservation_id: r.reservation_id });
    const granted = await waiting;
    assert.equal(granted.reservation.agentId, 'mcp-res-waiter');
    await waitFor('no waited-for line', async () => !(await runHook('UserPromptSubmit')).stdout.includes('waited for by'));

    // Ends in 40 s: shown in its last 4 s (a tenth of its TTL), with the
    // time left; the hour-long one is not mentioned.
    const soon = await reserve(['soon/x.cc'], 40);
    const ending = await waitFor('the ending line', async () => {
      const r = await runHook('UserPromptSubmit');
      return r.stdout.includes('soon/x.cc') ? context(r, 'UserPromptSubmit') : null;
    }, 60000);
    const m2 = new RegExp(`^hub reservation: soon/x\\.cc \\(exclusive, ${soon.reservation_id}, fencing token ${soon.token}\\); ` +
      'it ends in (\\d) s\n$').exec(ending);
    assert.ok(m2, ending);
    assert.ok(Number(m2[1]) >= 1 && Number(m2[1]) <= 4, ending);
    // Once it has ended, the hooks say so once, then nothing of it.
    const expired = await waitFor('the expiry line', async () => {
      const r = await runHook('PostToolUse');
      return r.stdout.includes('expired') ? context(r, 'PostToolUse') : null;
    }, 120000);
    assert.equal(expired, 'hub: new since your last look:\n' +
      `hub reservation lost: soon/x.cc (exclusive, ${soon.reservation_id}, fencing token ${soon.token}) ` +
      'expired (its TTL passed unrenewed); stop editing those paths (hub_reserve claims them again)\n');
    await waitFor('the ended reservation gone from the hooks', async () =>
      !(await runHook('PostToolUse')).stdout.includes('soon/x.cc'), 60000);
    const quiet = await runHook('UserPromptSubmit');
    assert.deepEqual([quiet.code, quiet.stdout], [0, '']);
  } finally {
    await w.close();
    await m.close();
  }
});

test('a reservation of mine force-released by an operator is named once in the next hook output', async () => {
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-res-forced' });
  try {
    await attached(m);
    const r = await m.call('hub_reserve', { patterns: ['forced/a.cc', 'forced/b/'], ttl_seconds: 3600 });
    assert.equal(r.isError, undefined, JSON.stringify(r));
    const held = r.structuredContent;
    await hub.reservations.forceReleaseReservation({ reservationId: held.reservation_id });
    const told = await waitFor('the force-release line', async () => {
      const h = await runHook('PostToolUse');
      return h.stdout.includes('force-released') ? context(h, 'PostToolUse') : null;
    });
    assert.equal(told, 'hub: new since your last look:\n' +
      `hub reservation lost: forced/a.cc forced/b (exclusive, ${held.reservation_id}, fencing token ${held.token}) ` +
      'was force-released by an operator; stop editing those paths (hub_reserve claims them again)\n');
    // Shown once; the MCP client got it as a notice too.
    const after = await runHook('UserPromptSubmit');
    assert.ok(!after.stdout.includes('force-released'), after.stdout);
    await waitFor('the MCP notice', async () => m.notifications.some((n) =>
      String(n.params && n.params.data).startsWith(`reservation lost: forced/a.cc forced/b (exclusive, ${held.reservation_id}`)));
  } finally {
    await m.close();
  }
});

// hub-mcp is killed while its CLI goes on, and its reservation ends
// meanwhile (here force-released; as well it could expire, or end with the
// presence once the detach grace has passed). The server the CLI starts
// again reads what the killed one knew and tells of the end once.
test('a reservation that ended while hub-mcp was not running is named once by the restarted server', async () => {
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-res-away' });
  let again = null;
  try {
    await attached(m);
    const r = await m.call('hub_reserve', { patterns: ['away/a.cc'], ttl_seconds: 3600 });
    assert.equal(r.isError, undefined, JSON.stringify(r));
    const held = r.structuredContent;
    const heldFile = path.join(RUNTIME_DIR, String(process.pid), 'held.json');
    await waitFor('the reservation recorded for a later server', async () =>
      JSON.parse(fs.readFileSync(heldFile, 'utf8')).reservations.some((x) => x.id === held.reservation_id));
    const gone = exited(m);
    process.kill(m.pid, 'SIGKILL');
    await gone;
    await hub.reservations.forceReleaseReservation({ reservationId: held.reservation_id });

    again = await startMcp({ hub: hubd.address, agentId: 'mcp-res-away' });
    const told = await waitFor('the line about the reservation', async () => {
      const h = await runHook('PostToolUse');
      return h.stdout.includes(held.reservation_id) ? context(h, 'PostToolUse') : null;
    });
    assert.equal(told, 'hub: new since your last look:\n' +
      `hub reservation lost: away/a.cc (exclusive, ${held.reservation_id}, fencing token ${held.token}) ended ` +
      'while hub-mcp of this session was not running (it expired, was force-released, or ended with the ' +
      'presence that reserved it); stop editing those paths (hub_reserve claims them again)\n');
    const after = await runHook('UserPromptSubmit');
    assert.ok(!after.stdout.includes(held.reservation_id), after.stdout);
  } finally {
    await m.close();
    if (again) await again.close();
  }
});

// The server writes an event file, then (a turn of its event loop later) the
// start context that counts it; a session-start hook in between must show
// that event rather than drop it with the ones its context counts. A message
// can also come before the session counts as attached (empty context).
test('the session-start hook shows the events its context does not count yet, and drops the others', async () => {
  const root = tmpDir('hook-seq');
  const channel = new LocalChannel({ root, cliPid: process.pid });
  assert.ok(channel.open());
  const env = { HUB_MCP_RUNTIME_DIR: root };
  try {
    channel.addEvent('hub message: one');
    channel.setStartContext('hub: start, 1 pending\n');
    channel.addEvent('hub message: two');
    assert.equal(context(await runHook('SessionStart', env), 'SessionStart'),
      'hub: start, 1 pending\nhub: new since your last look:\nhub message: two\n');
    channel.addEvent('hub message: three');
    channel.setStartContext('hub: start, 3 pending\n');
    assert.equal(context(await runHook('SessionStart', env), 'SessionStart'), 'hub: start, 3 pending\n');
    const quiet = await runHook('UserPromptSubmit', env);
    assert.deepEqual([quiet.code, quiet.stdout], [0, '']);
    // Not attached (yet): an empty context counts nothing, so nothing is dropped.
    channel.addEvent('hub message: four');
    channel.setStartContext('');
    assert.equal(context(await runHook('SessionStart', env), 'SessionStart'),
      'hub: new since your last look:\nhub message: four\n');
  } finally {
    channel.close();
  }
});

// The inputs Codex 0.171 and Gemini CLI 0.61 sent their hooks (recorded from
// `codex exec` and `gemini -p` runs): the hook reads only session_id.
const INPUTS = {
  codex: (event, sid) => ({ session_id: sid, turn_id: '01a2316c-6acf-7ff0-b7fa-684a262fe7d7',
    transcript_path: '/tmp/home/.codex/sessions/2026/12/01/rollout.jsonl', cwd: '/tmp/proj', hook_event_name: event,
    model: 'gpt-test', permission_mode: 'bypassPermissions', ...(event === 'SessionStart' ? { source: 'startup' } : {}),
    ...(event === 'UserPromptSubmit' ? { prompt: 'say "hi"' } : {}) }),
  gemini: (event, sid) => ({ session_id: sid, transcript_path: '/tmp/home/.gemini/tmp/proj/chats/session.jsonl',
    cwd: '/tmp/proj', hook_event_name: event, timestamp: '2026-12-01T11:46:28.490Z',
    ...(event === 'SessionStart' ? { source: 'startup' } : {}), ...(event === 'BeforeAgent' ? { prompt: 'say hi' } : {}) }),
};

for (const [client, [start, prompt, tool], other] of [
  ['codex', ['SessionStart', 'UserPromptSubmit', 'PostToolUse'], 'AfterTool'],
  ['gemini', ['SessionStart', 'BeforeAgent', 'AfterTool'], 'PostToolUse'],
]) {
  test(`${client}: ${start}, ${prompt} and ${tool} print ${client}'s hook output`, async () => {
    const agentId = `mcp-hook-${client}`;
    const m = await startMcp({ hub: hubd.address, agentId, cli: client });
    const hook = (event) => runHook(event, {}, 'any', { client, input: INPUTS[client](event, `${client}-session`) });
    try {
      await attached(m);
      const send = (text) => hub.messages.publish({ fromAgentId: 'sender-c', to: agentId, priority: 6,
        payload: { fields: { text: { stringValue: text } } } });
      await send('before the session\nsecond line');
      const begun = await waitFor('the start context', async () => {
        const r = await hook(start);
        return r.stdout.includes('1 pending') ? r : null;
      });
      assert.match(context(begun, start), new RegExp(`^hub: you are agent ${agentId} on hub `));
      for (const [event, text] of [[prompt, 'on a prompt'], [tool, 'after a tool']]) {
        await send(`${text} "quoted"`);
        const r = await waitFor(`the message ${text}`, async () => {
          const x = await hook(event);
          return x.stdout ? x : null;
        });
        assert.match(context(r, event), new RegExp(`^hub: new since your last look:\nhub message: message \\S+ ` +
          `from sender-c \\[event, priority 6\\]: ${text} "quoted"\n$`));
      }
      // Another CLI's event name is not this CLI's hook: nothing, and nothing claimed.
      await send('still waiting');
      await waitFor('the event file', () => fs.readdirSync(path.join(RUNTIME_DIR, String(process.pid), 'ev')).length > 0);
      const wrong = await hook(other);
      assert.deepEqual([wrong.code, wrong.stdout, wrong.stderr], [0, '', '']);
      assert.match(context(await hook(prompt), prompt), /still waiting/);
    } finally {
      const down = exited(m);
      await m.close();
      await down;
    }
    // Stopped: the hooks say so (hub unreachable from here) rather than nothing.
    assert.match(context(await hook(start), start), /^hub: hub-mcp, this session's link to hub, stopped \(stdin closed\)/);
  });
}

test('no server at all, or an unknown event or client: nothing, exit 0, quickly', async () => {
  const env = { HUB_MCP_RUNTIME_DIR: '/nonexistent/hub-mcp' };
  for (const [client, event] of [['claude', 'SessionStart'], ['claude', 'UserPromptSubmit'], ['claude', 'Bogus'],
    ['codex', 'PostToolUse'], ['gemini', 'BeforeAgent'], ['vim', 'SessionStart']]) {
    const r = await runHook(event, env, 'test', { client });
    assert.deepEqual([r.code, r.stdout, r.stderr], [0, '', ''], `${client} ${event}`);
  }
});
