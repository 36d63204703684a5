'use strict';
// A whole agent turn through the real Claude Code (issue #17): `hub-mcp
// install` writes its config and hooks into a temporary HOME, `claude -p`
// runs against a scripted model endpoint in this process (Anthropic's
// Messages API on 127.0.0.1), the model calls hub-mcp's hub_send, and agent B
// (a second hub-mcp over the MCP SDK's Client) finds the message in its
// inbox. A message B sent before the turn is pending for the claude session:
// the hook's additional context about it must reach the model in a request.
// Needs $HUB_AGENT_CLIS (tools/setup.sh installs the CLIs); skipped without it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { Hubd, freshDbPath, HubClient, startMcp, attached, waitFor, tmpDir, PROJECT } = require('./harness');
const { skip, texts, installUser, runCli, anthropicModel, toolUses, toolResult, turnFixture } = require('./turns');

const A = 'claude-turn-a';
const B = 'claude-turn-b';
const SEND_TOOL = 'mcp__hub__hub_send';
const HELLO = 'hello from claude';
const PENDING = 'please review PR 17 first\nthe second line stays out of the hook';
const FINAL = 'Sent "hello from claude" to claude-turn-b.';

/**
 * The scripted model: Anthropic's Messages API, streamed (SSE) or not. A
 * request that offers the hub tools gets, in turn, a ToolSearch call that
 * loads hub_send (when Claude Code defers MCP tools behind ToolSearch), the
 * hub_send call, and after its tool_result the final text. Anything else
 * (no tools: a side request) gets a short text. `beforeAnswer` runs before
 * each answer to a request with tools. Records every request.
 */
function startModel({ beforeAnswer = async () => {} } = {}) {
  const script = (body) => {
    const names = (body.tools || []).map((t) => t.name);
    if (!names.length) return { text: 'ok' };
    const uses = toolUses(body);
    const send = uses.find((u) => u.name === SEND_TOOL);
    const sent = send && toolResult(body, send.id);
    if (sent) return { text: sent.is_error ? `hub_send failed: ${texts(sent.content).join(' ')}` : FINAL };
    const search = uses.find((u) => u.name === 'ToolSearch');
    const found = search && texts(toolResult(body, search.id)).some((x) => x.includes(SEND_TOOL));
    const tool = body.tools.find((x) => x.name === SEND_TOOL);
    if (found || (tool && !tool.defer_loading)) return { tool: { name: SEND_TOOL, input: { to: B, text: HELLO } } };
    if (search) return { text: 'ToolSearch did not find hub_send' };
    // Deferred tools are named in a system reminder; a server that is still
    // connecting is named too, and ToolSearch waits for it.
    const all = texts([body.system, body.messages]).join('\n');
    if (names.includes('ToolSearch') && all.includes(SEND_TOOL)) {
      return { tool: { name: 'ToolSearch', input: { query: `select:${SEND_TOOL}` } } };
    }
    if (names.includes('ToolSearch') && /still connecting[^]*?:\nhub\n/.test(all)) {
      return { tool: { name: 'ToolSearch', input: { query: '+hub send' } } };
    }
    return { text: 'no hub tools offered' };
  };
  return anthropicModel(script, beforeAnswer);
}

test('one claude -p turn: the model calls hub_send, B gets the message, the hook told the model what was pending',
  { skip, timeout: 150000 }, async (t) => {
    // A message from B pending for A before its session starts.
    const { hubd, hub, b, pendingId, close } = await turnFixture('claude-turn', { a: A, b: B, text: PENDING });
    let model;
    try {

      // Before answering, wait until A's server has the pending message
      // (its local channel says so): the hooks that run after that see it.
      let claudePid = 0;
      // claude's servers get their own runtime root. The hook walks up its
      // ancestors to the first with a server directory, and this process
      // (B's "CLI") is one of them: claude -p runs SessionStart before it
      // starts its MCP servers, so in a shared root that hook showed B's
      // context to A's model (docs/design/mcp.md, "Tested end to end").
      const runtimeDir = tmpDir('turn-run');
      const startFile = () => path.join(runtimeDir, String(claudePid), 'start.txt');
      model = await startModel({
        beforeAnswer: () => waitFor('the pending message at A\'s server', () =>
          claudePid && fs.readFileSync(startFile(), 'utf8').includes('1 pending message'), 60000),
      });

      const home = tmpDir('turn-home');
      const project = tmpDir('turn-project');
      fs.writeFileSync(path.join(project, '.hub'), `${PROJECT}\n`);
      const install = await installUser('claude', { home, cwd: project, hub: hubd.address });
      assert.equal(install.code, 0, install.out);
      assert.match(install.out, /created: .*\.claude\.json \(mcpServers\.hub\)/, install.out);

      const t0 = Date.now();
      const run = await runCli('claude', ['-p', `send hello to ${B}`, '--output-format', 'json',
        '--allowedTools', `${SEND_TOOL},ToolSearch`], {
        home, cwd: project, timeoutMs: 120000, onSpawn: (pid) => { claudePid = pid; },
        env: {
          ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'dummy',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1',
          DISABLE_ERROR_REPORTING: '1', HUB_AGENT_ID: A, HUB_MCP_RUNTIME_DIR: runtimeDir,
          HUB_MCP_MODULES: process.env.HUB_MCP_MODULES,
        },
      });
      const ms = Date.now() - t0;
      const calls = model.requests.map((r) => `${r.method} ${r.url}` +
        (r.body && r.body.tools ? ` tools=${r.body.tools.length}` : '')).join('\n');
      const why = `claude exited ${run.code}/${run.signal} after ${ms} ms\nstdout: ${run.stdout}\n` +
        `stderr: ${run.stderr}\nrequests:\n${calls}`;
      assert.equal(run.code, 0, why);
      const result = JSON.parse(run.stdout);
      assert.equal(result.is_error, false, why);
      assert.equal(result.result, FINAL, why);

      // The model's hub_send ran through hub-mcp and came back as a result.
      const main = model.requests.filter((r) => r.body && (r.body.tools || []).length);
      const last = main[main.length - 1].body;
      const send = toolUses(last).find((u) => u.name === SEND_TOOL);
      assert.ok(send, why);
      const res = toolResult(last, send.id);
      assert.ok(res && !res.is_error, JSON.stringify(res));
      assert.match(texts(res.content).join('\n'), /message_id|recipient/, JSON.stringify(res));

      // B has it, from A.
      const inbox = await waitFor('the message at B', async () => {
        const r = await b.call('hub_inbox', {});
        return r.structuredContent.messages.find((m) => m.from === A) || null;
      });
      assert.equal(inbox.text, HELLO);
      // A was the claude session's hub-mcp (project from the .hub file), and
      // it said goodbye when claude exited.
      const { agent } = await waitFor('A deregistered', async () => {
        const r = await hub.presence.getAgent({ agentId: A });
        return r.agent.status === 'AGENT_STATUS_OFFLINE' ? r : null;
      }, 15000);
      assert.deepEqual([agent.cli, agent.projectId], ['AGENT_CLI_CLAUDE', PROJECT]);

      // The hook's context about the pending message reached the model.
      const line = `hub message: message ${pendingId} from ${B} [handoff, priority 7]: please review PR 17 first`;
      const carrying = main.filter((r) => texts([r.body.system, r.body.messages]).some((x) => x.includes(line)));
      assert.ok(carrying.length > 0, `no request carries "${line}"\n${why}\n` +
        JSON.stringify(main.map((r) => r.body.messages), null, 1).slice(0, 20000));
      assert.ok(!JSON.stringify(main.map((r) => r.body.messages)).includes('the second line stays out'));
      // Claude Code labels it with the hook that gave it ("UserPromptSubmit
      // hook additional context: ..."). Which hook that is depends on how fast
      // the server attached: UserPromptSubmit normally, PostToolUse (after
      // the first tool call) when the push came later; see docs/design/mcp.md.
      const hookText = texts([carrying[0].body.system, carrying[0].body.messages]).find((x) => x.includes(line));
      const before = hookText.slice(0, hookText.indexOf(line));
      const hook = /(SessionStart|UserPromptSubmit|PostToolUse(?::[\w.-]+)?) hook additional context: hub: (?:(?! hook additional context: )[^])*$/.exec(before);
      assert.ok(hook, hookText);
      t.diagnostic(`claude turn: ${ms} ms, ${model.requests.length} requests (${main.length} with tools); ` +
        `the ${hook[1]} hook's context reached request ${main.indexOf(carrying[0]) + 1}`);
    } finally {
      if (model) await model.close();
      await close();
    }
  });

// Issue 44 part 2, through the real Claude Code: the session's hub-mcp is
// SIGKILLed while claude goes on; the role fails over to B. The model is told
// by the next hook that hub is unreachable and that whether it still holds
// the role is unknown; the next hub tool call makes Claude Code start hub-mcp
// again, which registers anew, and the next hook says the role is lost, at
// which epoch, and who holds it now.
test('a claude session whose hub-mcp was killed is told its role status is unknown, then that it lost the role',
  { skip, timeout: 200000 }, async (t) => {
    const A = 'claude-loss-a';
    const B2 = 'claude-loss-b';
    const WHOAMI = 'mcp__hub__hub_whoami';
    const hubd = await Hubd.start({ dbPath: freshDbPath('claude-loss'), args: ['--detach_grace=1s'] });
    const hub = new HubClient(hubd.address);
    const cto = { roleKey: { projectId: PROJECT, kind: 'ROLE_KIND_CTO' } };
    const getCto = async () => (await hub.roles.getRole(cto)).role;
    let b;
    let model;
    try {
      b = await startMcp({ hub: hubd.address, agentId: B2 });
      await attached(b);
      assert.equal((await b.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 1 })).isError, undefined);

      const runtimeDir = tmpDir('loss-run');
      let claudePid = 0;
      const serverDir = () => path.join(runtimeDir, String(claudePid));
      const seen = (body) => texts([body.system, body.messages]).join('\n');
      let heldEpoch = 0;
      let killedAt = 0;
      const steps = [];
      model = await anthropicModel(async (body) => {
        const uses = toolUses(body);
        const last = uses.length ? uses[uses.length - 1] : null;
        const step = !last ? 'start' : last.name === 'Bash' ? last.input.command : last.name;
        steps.push(step);
        if (step === 'start') {
          // A (this claude's hub-mcp) registered: make it the cto.
          await waitFor('A attached', async () => (await hub.presence.getAgent({ agentId: A })).agent.streamAttached, 60000);
          await hub.roles.upsertRoleCandidate({ ...cto, agentId: A, candidate: { priority: 10 },
            updateMask: { paths: ['priority'] } });
          await hub.roles.ensureRole({ ...cto, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL', causeId: 'loss-test' });
          const role = await waitFor('A holds cto', async () => {
            const r = await getCto();
            return r.state === 'ROLE_STATE_ACTIVE' && r.holderAgentId === A ? r : null;
          }, 60000);
          heldEpoch = role.epoch;
          // Its hub-mcp has it (the start context its hooks read says so).
          await waitFor('the role in A\'s start context', () => fs.readFileSync(path.join(serverDir(), 'start.txt'),
            'utf8').includes(`you are cto of ${PROJECT} at epoch ${heldEpoch}`), 60000);
          return { tool: { name: 'ToolSearch', input: { query: `select:${WHOAMI}` } } };
        }
        if (step === 'ToolSearch') return { tool: { name: WHOAMI, input: {} } };
        if (step === WHOAMI && !killedAt) {
          // hub-mcp dies; claude goes on. B takes the role after the grace.
          const pid = Number(fs.readFileSync(path.join(serverDir(), 'server.pid'), 'utf8'));
          process.kill(pid, 'SIGKILL');
          killedAt = Date.now();
          await waitFor('B holds cto', async () => {
            const r = await getCto();
            return r.state === 'ROLE_STATE_ACTIVE' && r.holderAgentId === B2;
          }, 60000);
          return { tool: { name: 'Bash', input: { command: 'echo after-kill', description: 'a tool call' } } };
        }
        // A hub tool call: Claude Code starts hub-mcp again.
        if (step === 'echo after-kill') return { tool: { name: WHOAMI, input: {} } };
        if (step === WHOAMI) {
          // Wait until the new server has heard from hub what became of the
          // role (its hooks say "unknown" until then), then make a tool call.
          await waitFor('the new server attached, with no state pending', () => !fs.existsSync(path.join(serverDir(),
            'state.txt')) && fs.readFileSync(path.join(serverDir(), 'start.txt'), 'utf8').includes('presence generation'),
          60000);
          return { tool: { name: 'Bash', input: { command: 'echo after-restart', description: 'a tool call' } } };
        }
        return { text: 'done' };
      });

      const home = tmpDir('loss-home');
      const project = tmpDir('loss-project');
      fs.writeFileSync(path.join(project, '.hub'), `${PROJECT}\n`);
      const install = await installUser('claude', { home, cwd: project, hub: hubd.address });
      assert.equal(install.code, 0, install.out);
      const run = await runCli('claude', ['-p', 'work as the cto', '--output-format', 'json',
        '--allowedTools', 'mcp__hub,ToolSearch,Bash'], {
        home, cwd: project, timeoutMs: 180000, onSpawn: (pid) => { claudePid = pid; },
        env: {
          ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'dummy',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1',
          DISABLE_ERROR_REPORTING: '1', HUB_AGENT_ID: A, HUB_MCP_RUNTIME_DIR: runtimeDir,
          HUB_MCP_MODULES: process.env.HUB_MCP_MODULES,
        },
      });
      const main = model.requests.filter((r) => r.body && (r.body.tools || []).length);
      const why = `claude exited ${run.code}/${run.signal}\nsteps: ${steps.join(' | ')}\nstdout: ${run.stdout}\n` +
        `stderr: ${run.stderr.slice(0, 4000)}`;
      assert.equal(run.code, 0, why);
      assert.equal(JSON.parse(run.stdout).result, 'done', why);
      const { role } = await hub.roles.getRole(cto);
      assert.deepEqual([role.holderAgentId, role.state], [B2, 'ROLE_STATE_ACTIVE']);

      // Each request's text; the one after a tool call carries its hook's context.
      const after = (command) => main.findIndex((r) => toolUses(r.body).some((u) => u.input && u.input.command === command));
      const killed = after('echo after-kill');
      const restarted = after('echo after-restart');
      assert.ok(killed > 0 && restarted > killed, why);
      const dump = main.map((r, i) => `--- request ${i}\n${seen(r.body).slice(-1500)}`).join('\n');
      // While hub-mcp was not running: hub unreachable, role status unknown.
      const unknown = `is not running (killed or crashed), so hub is unreachable from this session and your role ` +
        `status is unknown: when it stopped you held cto of ${PROJECT} at epoch ${heldEpoch} (fencing token ${heldEpoch})`;
      assert.ok(seen(main[killed].body).includes(unknown), `request ${killed} lacks "${unknown}"\n${dump}`);
      assert.ok(!main.slice(0, killed).some((r) => seen(r.body).includes(unknown)), dump);
      // After hub-mcp started again: the role is lost, at its epoch, and B holds it.
      const lost = new RegExp(`hub role: you are no longer cto of ${PROJECT} \\(epoch ${heldEpoch} ended while hub-mcp ` +
        `of this session was not running\\); ${B2} holds it now at epoch ${role.epoch}; stop acting for it`);
      const told = main.findIndex((r) => lost.test(seen(r.body)));
      assert.ok(told > killed && told <= restarted, `no request after the restart says ${lost}\n${dump}`);
      // and what announced the role first, before the kill.
      assert.ok(main.slice(0, killed).some((r) => seen(r.body).includes(
        `you are now cto of ${PROJECT} at epoch ${heldEpoch}`)), dump);
      t.diagnostic(`claude role loss: ${main.length} requests; told unknown at ${killed}, lost at ${told}; ` +
        `steps ${steps.join(' | ')}`);
    } finally {
      if (model) await model.close();
      if (b) await b.close();
      hub.close();
      await hubd.stop();
    }
  });
