'use strict';
// Whole agent turns through the real Codex (`codex exec`) and Gemini CLI
// (`gemini -p`), as claude_turn.test.js does for Claude Code: `hub-mcp
// install` writes the server entry and the hooks into a temporary HOME, the
// CLI runs against a scripted model endpoint in this process (Codex: the
// Responses API; Gemini: the Gemini API), the model calls hub-mcp's hub_send,
// and agent B (a second hub-mcp over the MCP SDK's Client) finds the message
// in its inbox. B sends one message before the turn (pending when the
// session starts) and one while the model is thinking about its first answer:
// the hook after the tool call (PostToolUse / AfterTool) must bring the second
// one to the model in the next request, framed the way the CLI frames a hook's
// additional context. Needs $HUB_AGENT_CLIS; skipped without it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { waitFor, tmpDir, PROJECT } = require('./harness');
const { skip, texts, installUser, runCli, recordingServer, turnFixture } = require('./turns');

const HELLO = 'hello from the turn';
const PENDING = 'please review PR 17 first\nthe second line stays out of the hook';
const LATER = 'the build is red, hold the merge';
const FINAL = 'Sent the hello.';
// install marks the hub server required (Codex waits for it before the
// first turn, up to startup_timeout_sec); a loaded test machine gets longer
// than install's 30 s.
const MCP_STARTUP_SEC = 60;

function sse(res, events) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}

// What differs between the two CLIs: how they are run, how their model API
// offers hub_send, returns its result and carries hook context, and how a
// scripted answer is streamed back.
const DIALECTS = {
  // Codex 0.171: POST /v1/responses (streamed); MCP tools come as a
  // namespace "mcp__hub"; a hook's additionalContext is a developer message.
  codex: {
    agentCli: 'AGENT_CLI_CODEX',
    toolEvent: 'PostToolUse',
    args: (url, prompt) => ['exec', '--skip-git-repo-check', '--dangerously-bypass-hook-trust',
      '-c', 'model_provider="hubturn"', '-c', 'model="gpt-test"', '-c', 'model_providers.hubturn.name="hubturn"',
      '-c', `model_providers.hubturn.base_url="${url}/v1"`, '-c', 'model_providers.hubturn.wire_api="responses"',
      '-c', 'mcp_servers.hub.default_tools_approval_mode="approve"',
      '-c', `mcp_servers.hub.startup_timeout_sec=${MCP_STARTUP_SEC}`, prompt],
    env: () => ({ OPENAI_API_KEY: 'dummy' }),
    isTurn: (req, body) => req.url.startsWith('/v1/responses') && Boolean(body) &&
      (body.tools || []).some((t) => t.name === 'mcp__hub' && (t.tools || []).some((x) => x.name === 'hub_send')),
    result(body) {
      const call = body.input.find((i) => i.type === 'function_call' && i.name === 'hub_send');
      const out = call && body.input.find((i) => i.type === 'function_call_output' && i.call_id === call.call_id);
      return out ? texts(out.output).join('\n') : null;
    },
    contexts: (body) => body.input.filter((i) => i.type === 'message' && i.role === 'developer')
      .map((i) => i.content.map((c) => c.text || '').join('')),
    answer(res, n, step) {
      const event = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const item = step.call
        ? { type: 'function_call', id: `fc_turn${n}`, call_id: `call_turn${n}`, namespace: 'mcp__hub', name: 'hub_send',
          arguments: JSON.stringify(step.call) }
        : { type: 'message', role: 'assistant', id: `msg_turn${n}`, content: [{ type: 'output_text', text: step.text }] };
      const usage = { input_tokens: 100, input_tokens_details: null, output_tokens: 10, output_tokens_details: null,
        total_tokens: 110 };
      sse(res, [event('response.created', { response: { id: `resp_turn${n}` } }),
        event('response.output_item.done', { item }),
        event('response.completed', { response: { id: `resp_turn${n}`, usage } })]);
    },
  },
  // Gemini CLI 0.61: POST /v1beta/models/M:streamGenerateContent?alt=sse;
  // MCP tools are mcp_hub_<tool>; a hook's additionalContext is a text part
  // <hook_context>…</hook_context>.
  gemini: {
    agentCli: 'AGENT_CLI_GEMINI',
    toolEvent: 'AfterTool',
    // -m: a named model skips the router's classification request; --skip-trust:
    // the temporary folder is not trusted (and an untrusted folder runs no hooks).
    args: (_, prompt) => ['--skip-trust', '--yolo', '-m', 'gemini-2.5-flash', '-p', prompt],
    env: (url) => ({ GEMINI_API_KEY: 'dummy', GOOGLE_GEMINI_BASE_URL: url }),
    isTurn: (req, body) => /:streamGenerateContent/.test(req.url) && Boolean(body) &&
      (body.tools || []).some((t) => (t.functionDeclarations || []).some((d) => d.name === 'mcp_hub_hub_send')),
    result(body) {
      for (const c of body.contents) {
        for (const p of c.parts || []) {
          if (p.functionResponse && p.functionResponse.name === 'mcp_hub_hub_send') return JSON.stringify(p.functionResponse.response);
        }
      }
      return null;
    },
    contexts: (body) => texts(body.contents).flatMap((x) => [...x.matchAll(/<hook_context>([^]*?)<\/hook_context>/g)]
      .map((m) => m[1])),
    answer(res, n, step) {
      const part = step.call ? { functionCall: { name: 'mcp_hub_hub_send', args: step.call } } : { text: step.text };
      const chunk = { candidates: [{ content: { role: 'model', parts: [part] }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 } };
      sse(res, [`data: ${JSON.stringify(chunk)}\r\n\r\n`]);
    },
  },
};

/**
 * The scripted model: a request that offers hub_send gets, before the tool
 * result is back, the hub_send call to `to` (after `beforeCall` resolved),
 * and after it the final text; anything else a short text. Records every
 * request.
 */
async function startModel(dialect, { to, beforeCall }) {
  let seq = 0;
  const server = await recordingServer(async (req, body, res) => {
    seq += 1;
    if (req.method !== 'POST' || !body) {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end('{}');
    }
    if (!dialect.isTurn(req, body)) return dialect.answer(res, seq, { text: 'ok' });
    const result = dialect.result(body);
    if (result !== null) {
      return dialect.answer(res, seq, { text: /"error"|isError/.test(result) ? `hub_send failed: ${result}` : FINAL });
    }
    await beforeCall().catch(() => {});
    return dialect.answer(res, seq, { call: { to, text: HELLO } });
  });
  return { ...server, turns: () => server.requests.filter((r) => r.body && dialect.isTurn(r, r.body)) };
}

// The numeric directory A's server made in its runtime root (named after the
// CLI process, which for both CLIs is not the process spawned here).
function channelDir(root) {
  const names = fs.existsSync(root) ? fs.readdirSync(root).filter((n) => /^\d+$/.test(n)) : [];
  return names.length === 1 ? path.join(root, names[0]) : null;
}

function eventTexts(dir) {
  const ev = path.join(dir, 'ev');
  try {
    return fs.readdirSync(ev).map((f) => fs.readFileSync(path.join(ev, f), 'utf8'));
  } catch (_) {
    return [];
  }
}

for (const [client, dialect] of Object.entries(DIALECTS)) {
  const A = `${client}-turn-a`;
  const B = `${client}-turn-b`;
  test(`one ${client} turn: the model calls hub_send, B gets it, the ${dialect.toolEvent} hook told the model what arrived`,
    { skip, timeout: 150000 }, async (t) => {
      const { hubd, hub, b, pendingId, close } = await turnFixture(`${client}-turn`, { a: A, b: B, text: PENDING });
      let model;
      try {

        // A's own runtime root: the hooks' ancestor walk must find A's server
        // through the CLI's process tree (and nothing of this process's).
        const runtimeDir = tmpDir(`${client}-turn-run`);
        let laterId = '';
        const beforeCall = async () => {
          const dir = await waitFor('the pending message at A\'s server', () => {
            const d = channelDir(runtimeDir);
            return d && fs.readFileSync(path.join(d, 'start.txt'), 'utf8').includes('1 pending message') ? d : null;
          });
          if (laterId) return;
          const later = await b.call('hub_send', { to: A, text: LATER, type: 'request', priority: 8 });
          laterId = later.structuredContent.message_id;
          await waitFor('the second message at A\'s server', () => eventTexts(dir).some((x) => x.includes(LATER)));
        };
        model = await startModel(dialect, { to: B, beforeCall });

        const home = tmpDir(`${client}-turn-home`);
        const project = tmpDir(`${client}-turn-project`);
        fs.writeFileSync(path.join(project, '.hub'), `${PROJECT}\n`);
        if (client === 'gemini') {
          // The user's own settings: the API key login (install keeps them).
          fs.mkdirSync(path.join(home, '.gemini'));
          fs.writeFileSync(path.join(home, '.gemini', 'settings.json'),
            JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } } }, null, 2) + '\n');
        }
        const install = await installUser(client, { home, cwd: project, hub: hubd.address });
        assert.equal(install.code, 0, install.out);
        assert.match(install.out, /: .*(hooks\.json|settings\.json) \(.*hooks \(SessionStart, /, install.out);

        const t0 = Date.now();
        // HUB_AGENT_ID and HUB_MCP_RUNTIME_DIR only in the CLI's environment:
        // Codex forwards them to the server because install listed them.
        const r = await runCli(client, dialect.args(model.url, `send hello to ${B}`), {
          home, cwd: project, timeoutMs: 120000,
          env: { HUB_AGENT_ID: A, HUB_MCP_RUNTIME_DIR: runtimeDir,
            HUB_MCP_MODULES: process.env.HUB_MCP_MODULES, ...dialect.env(model.url) },
        });
        const ms = Date.now() - t0;
        const calls = model.requests.map((x) => `${x.method} ${x.url}`).join('\n');
        const why = `${client} exited ${r.code}/${r.signal} after ${ms} ms\nstdout: ${r.stdout}\n` +
          `stderr: ${r.stderr.slice(-4000)}\nrequests:\n${calls}`;
        assert.equal(r.code, 0, why);
        assert.ok(r.stdout.includes(FINAL), why);

        // The model's hub_send ran through hub-mcp and came back as a success.
        const turns = model.turns();
        const last = turns[turns.length - 1].body;
        const result = dialect.result(last);
        // (Codex passes on structuredContent, Gemini the text.)
        assert.match(result || '', new RegExp(`"message_id"|sent \\S+ to ${B}: 1 recipient`), `${result}\n${why}`);
        assert.doesNotMatch(result, /"error"/);
        const inbox = await waitFor('the message at B', async () => {
          const x = await b.call('hub_inbox', {});
          return x.structuredContent.messages.find((m) => m.from === A) || null;
        });
        assert.equal(inbox.text, HELLO);
        const { agent } = await waitFor('A offline', async () => {
          const x = await hub.presence.getAgent({ agentId: A });
          return x.agent.status === 'AGENT_STATUS_OFFLINE' ? x : null;
        }, 15000);
        assert.deepEqual([agent.cli, agent.projectId], [dialect.agentCli, PROJECT]);

        // The tool hook brought the second message to the request after the
        // tool call, as hook context: the hub_send call and result, then it.
        const line = new RegExp(`^hub: new since your last look:\\n(?:.*\\n)*hub message: message ${laterId} ` +
          `from ${B} \\[request, priority 8, correlation \\S+\\]: ${LATER}\\n`);
        const carried = dialect.contexts(last).find((x) => line.test(x));
        assert.ok(carried, `the last request carries no hook context with "${LATER}": ` +
          JSON.stringify(dialect.contexts(last)));
        assert.ok(!dialect.contexts(turns[0].body).some((x) => x.includes(LATER)), 'not before it was sent');
        // The pending one reached the model too: its line (UserPromptSubmit /
        // BeforeAgent, or the tool hook) or the start context's count.
        const all = turns.flatMap((x) => dialect.contexts(x.body));
        const how = all.some((x) => x.includes(`hub message: message ${pendingId} from ${B} [handoff, priority 7]: ` +
          'please review PR 17 first\n')) ? 'its line' : all.some((x) => /1 pending message\(s\)/.test(x)) ? 'the start count' : '';
        assert.ok(how, `no request carries the pending message: ${JSON.stringify(all.filter((x) => x.startsWith('hub')))}\n${why}`);
        assert.ok(!all.some((x) => x.includes('the second line stays out')));
        t.diagnostic(`${client} turn: ${ms} ms, ${model.requests.length} requests (${turns.length} offering hub_send); ` +
          `the pending message reached the model as ${how}`);
      } finally {
        if (model) await model.close();
        await close();
      }
    });
}
