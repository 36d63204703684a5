'use strict';
// What the console's browser tests share: Debian's chromium driven by
// puppeteer-core ($HUB_CONSOLE_MODULES; no browser download), a hubd with
// its HTTP listener, and waiting for the page to show something.
const fs = require('fs');
const path = require('path');
const { Hubd, freshDbPath } = require('../../clients/node/test/hubd');

const modules = process.env.HUB_CONSOLE_MODULES;
if (!modules || !fs.existsSync(path.join(modules, 'puppeteer-core'))) {
  throw new Error('HUB_CONSOLE_MODULES must name the node_modules directory tools/setup.sh ' +
    `fills with puppeteer-core (got '${modules}'); pass --test_env=HUB_CONSOLE_MODULES=...`);
}
const puppeteer = require(path.join(modules, 'puppeteer-core'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// Generous: a loaded 2-core CI machine. The measured times are printed.
const DEADLINE_MS = 15000;
const OUT = process.env.TEST_UNDECLARED_OUTPUTS_DIR || fs.mkdtempSync('/tmp/console-shots-');

// Resolves once `predicate` holds, checking every 20 ms (for what a test
// cannot subscribe to: a process's output, a file reload).
async function until(predicate, what, timeoutMs = DEADLINE_MS) {
  const start = Date.now();
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Starts hubd with its HTTP listener on a free loopback port; resolves with
// {hubd, base} (base: the console's URL).
async function startHubd(name, args = [], scheme = 'http') {
  const hubd = await Hubd.start({
    dbPath: freshDbPath(name), args: ['--metrics_listen=127.0.0.1:0', ...args],
  });
  const m = await until(() => /metrics_address=(\S+)/.exec(hubd.output), 'the metrics address');
  return { hubd, base: `${scheme}://${m[1]}` };
}

async function launch() {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    acceptInsecureCerts: true,  // the tests' throw-away CA
    userDataDir: fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || '/tmp', 'chromium-')),
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
}

// Records how long after a change each page showed it.
class Watcher {
  constructor(page) {
    this.page = page;
    this.measured = [];
  }

  // Waits (DOM mutations, up to DEADLINE_MS) for `fn(arg)` to hold in the
  // page and records how long after `sinceMs` it did; on a timeout, saves
  // a screenshot and logs what the page showed instead.
  async shows(what, sinceMs, fn, arg) {
    try {
      await this.page.waitForFunction(fn, { timeout: DEADLINE_MS, polling: 'mutation' }, arg);
    } catch (e) {
      await this.page.screenshot({ path: path.join(OUT, 'console-failure.png'), fullPage: true });
      const shown = await this.page.evaluate(() =>
        [...document.querySelectorAll('.role, #fleet tr, #messages tr, #login-error, #action-result')]
          .map((n) => n.innerText.replace(/\s+/g, ' ')).join('\n'));
      console.log(`# console: never shown: ${what}; the page showed:\n${shown}`);
      throw e;
    }
    const ms = Date.now() - sinceMs;
    this.measured.push(ms);
    console.log(`# console: ${what} shown ${ms} ms after the change`);
    return ms;
  }

  report() {
    if (this.measured.length) {
      console.log(`# console: slowest change shown after ${Math.max(...this.measured)} ms`);
    }
  }
}

async function screenshot(page, view, name) {
  await page.click(`#tabs button[data-view="${view}"]`);
  await page.waitForSelector(`#${view}-view:not([hidden])`);
  await page.screenshot({ path: path.join(OUT, `console-${name}.png`) });
}

// A test file's `after`: stops what it started, whichever of these it has.
async function cleanUp({ sessions = [], browser, clients = [], hubs = [], watcher }) {
  for (const s of sessions) await s.stop().catch(() => {});
  if (browser) await browser.close();
  for (const c of clients) if (c) c.close();
  for (const h of hubs) if (h) await h.stop();
  if (watcher) watcher.report();
}

module.exports = { DEADLINE_MS, OUT, until, startHubd, launch, Watcher, screenshot, cleanUp };
