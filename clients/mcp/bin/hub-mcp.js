#!/usr/bin/env node
'use strict';
// hub-mcp's Node.js entry (bin/hub-mcp, the sh launcher, runs it with
// NODE_PATH set; `hook` is handled by the launcher itself).
const USAGE = `usage:
  hub-mcp [serve] [--client=claude|codex|gemini|other] [--hub=ADDR] [--token-env=VAR]
          [--agent-id=ID] [--project=prj_…] [--topics=a,b] [--heartbeat-ttl=SECONDS] [--no-tmux]
          [--reservation-poll=SECONDS] [--goodbye-timeout=SECONDS]
  hub-mcp hook --client=claude|codex --event=SessionStart|UserPromptSubmit|PostToolUse
  hub-mcp hook --client=gemini --event=SessionStart|BeforeAgent|AfterTool
  hub-mcp install|uninstall --client=claude|codex|gemini [--scope=user|project] [--hub=ADDR]
          [--token-env=VAR]
The hub address is --hub, else $HUB_ADDR, else 127.0.0.1:27889.`;

function parse(argv) {
  const flags = {};
  const positional = [];
  for (const a of argv) {
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(a);
    if (m) flags[m[1]] = m[2] === undefined ? true : m[2];
    else positional.push(a);
  }
  return { flags, positional };
}

function serveOptions(flags) {
  const tokenEnv = flags['token-env'] || 'HUB_TOKEN';
  const ttl = flags['heartbeat-ttl'] ? Number(flags['heartbeat-ttl']) : 600;
  if (!(ttl >= 10 && ttl <= 7200)) throw new Error('--heartbeat-ttl must be 10 .. 7200 seconds');
  const poll = flags['reservation-poll'] ? Number(flags['reservation-poll']) : 5;
  if (!(poll >= 1 && poll <= 300)) throw new Error('--reservation-poll must be 1 .. 300 seconds');
  const goodbye = flags['goodbye-timeout'] ? Number(flags['goodbye-timeout']) : 3;
  if (!(goodbye >= 1 && goodbye <= 60)) throw new Error('--goodbye-timeout must be 1 .. 60 seconds');
  return {
    hub: flags.hub || process.env.HUB_ADDR || '127.0.0.1:27889',
    token: process.env[tokenEnv] || '',
    client: flags.client,
    agentId: flags['agent-id'],
    project: flags.project,
    host: flags.host,
    session: flags.session,
    noTmux: Boolean(flags['no-tmux']),
    topics: flags.topics ? String(flags.topics).split(',').filter(Boolean) : [],
    heartbeatTtlMs: ttl * 1000,
    reservationPollMs: poll * 1000,
    goodbyeTimeoutMs: goodbye * 1000,
    runtimeDir: flags['runtime-dir'],
  };
}

async function main() {
  const { flags, positional } = parse(process.argv.slice(2));
  const command = positional[0] || 'serve';
  if (flags.help || command === 'help') {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (command === 'hook') return 0;  // handled by bin/hub-mcp; never fail a CLI's hook
  if (command === 'install' || command === 'uninstall') {
    const { runInstall } = require('../lib/install');
    return runInstall(command, flags);
  }
  if (command !== 'serve') {
    process.stderr.write(`hub-mcp: unknown command ${command}\n${USAGE}\n`);
    return 64;
  }
  const { HubMcpServer } = require('../lib/server');
  const server = new HubMcpServer(serveOptions(flags));
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => server.stop(signal));
  process.on('uncaughtException', (e) => process.stderr.write(`hub-mcp: ${e.stack || e}\n`));
  process.on('unhandledRejection', (e) => process.stderr.write(`hub-mcp: ${e && e.stack ? e.stack : e}\n`));
  await server.start();
  return null;  // runs until stdin closes or a signal
}

main().then((code) => {
  if (code !== null && code !== undefined) process.exitCode = code;
}, (e) => {
  process.stderr.write(`hub-mcp: ${e.message}\n`);
  process.exitCode = 64;
});
