#!/usr/bin/env node
/**
 * Playwright scenarios: VS Code's editor (the built page, dist/) in headless Chromium,
 * the FastCoder extension's activation code, the real `fastcoder serve` behind
 * bridge.mjs, a real model.
 *
 *   node scenarios.mjs --python PY --workspace DIR --file REL --out DIR [--model NAME]
 *                      [--chromium /usr/bin/chromium]
 *
 * Scenarios, in one editor session (they run in order; each types new code at the end
 * of the file):
 *   accept       type a signature + docstring, wait for ghost text (re-triggering it with
 *                Alt+\ as a user would), screenshot, Tab: the buffer holds exactly the
 *                suggestion, once, at the right indentation
 *   accept-next  a fresh state below: ghost text, the user reads it (--read-ms, 1000), Tab,
 *                then the next ghost text at the new cursor (VS Code asks by itself after
 *                an accept; Alt+\ if it does not within 2 s): how long after the Tab's
 *                keydown it is drawn, its text, and whether the server answered it from the
 *                background "after accept" suggestion without a model run (fastcoder.stats
 *                outcomes `ready`, `suggestion`, `shared` and total.generations diffed
 *                from the Tab to the moment it is drawn)
 *   type-through type the first characters of a suggestion: the ghost text shrinks to the
 *                rest and the server runs no model for it (its fastcoder.stats counters)
 *   type-away    type something else: the old ghost text is gone at once; every request
 *                is answered exactly once, cancelled ones too, and none of them shows later
 *   code-action  "Generate function body" on a stub through Ctrl+. : a workspace edit
 *                fills the body
 *   cursor-rest  move into the file and stop: one fastcoder/cursor with the cursor's
 *                position, and the server prepares the suggestion there (warm_at_cursor)
 *   suggest-widget  type the start of a name, Ctrl+Space, select another provider's item
 *                in the suggest widget: the inline request carries it (selectedCompletionInfo)
 *                and the ghost text shown while the widget is open continues it
 * Writes OUT/vscode-ghost-text.png, OUT/vscode-suggest-widget.png, OUT/traffic.jsonl (every LSP message),
 * OUT/server.log, OUT/results.json. Exit status 0 only when every scenario passed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, fallback) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : fallback;
};
const python = opt('python', 'python3');
const workspace = resolve(opt('workspace', '.'));
const file = opt('file', '');
const out = resolve(opt('out', 'scenario-out'));
const model = opt('model', 'smollm2-135m');
const chromiumPath = opt('chromium', process.env.FASTCODER_CHROMIUM || '/usr/bin/chromium');
const only = opt('only', '');
const GHOST_WAIT_MS = Number(opt('ghost-wait-ms', '120000'));
const LOAD_WAIT_MS = Number(opt('load-wait-ms', '480000'));
// how long the user reads a suggestion before Tab (accept-next)
const READ_MS = Number(opt('read-ms', '1000'));
// how long to wait for the editor's own request after an accept before Alt+\
const NEXT_TRIGGER_MS = Number(opt('next-trigger-ms', '2000'));
mkdirSync(out, { recursive: true });
const trafficFile = join(out, 'traffic.jsonl');
rmSync(trafficFile, { force: true });

const t0 = Date.now();
const say = (...parts) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...parts);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ----------------------------------------------------------------------------- bridge

const bridge = spawn(
    process.execPath,
    [join(HERE, 'bridge.mjs'), '--static', join(HERE, 'dist'), '--workspace', workspace, '--log', trafficFile,
        '--', python, '-m', 'fastcoder_cli', 'serve', '--log-file', join(out, 'server.log')],
    { stdio: ['ignore', 'pipe', 'inherit'] },
);
// the bridge (and the server it started) go when we do, however we end
process.on('exit', () => bridge.kill('SIGTERM'));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(1));
const port = await new Promise((ok, fail) => {
    bridge.stdout.on('data', (d) => {
        const m = /listening (\d+)/.exec(String(d));
        if (m) ok(m[1]);
    });
    bridge.on('exit', (code) => fail(new Error(`bridge exited (${code})`)));
});

// ----------------------------------------------------------------------------- traffic

function traffic() {
    if (!existsSync(trafficFile)) return [];
    return readFileSync(trafficFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** The state of the server's last `fastcoder/status` notification (loading, indexing, ready, error). */
function serverState() {
    const statuses = traffic().filter(({ dir, msg }) => dir === 's2c' && msg.method === 'fastcoder/status');
    return statuses.length ? statuses.at(-1).msg.params.state : 'none';
}

/** Requests the client sent (by id) with their responses and cancellations. */
function requests(method) {
    const byId = new Map();
    const cancelled = new Set();
    const responses = new Map();
    for (const { dir, msg } of traffic()) {
        if (dir === 'c2s' && msg.method === '$/cancelRequest') cancelled.add(msg.params.id);
        else if (dir === 'c2s' && msg.method && msg.id !== undefined) byId.set(msg.id, msg);
        else if (dir === 's2c' && !msg.method && msg.id !== undefined) {
            responses.set(msg.id, (responses.get(msg.id) ?? []).concat([msg]));
        }
    }
    return [...byId.values()]
        .filter((m) => !method || m.method === method)
        .map((m) => ({ id: m.id, method: m.method, params: m.params, cancelled: cancelled.has(m.id), responses: responses.get(m.id) ?? [] }));
}

/** The traffic after its first ``from`` messages, one short line per message (for a failure's message). */
function trafficSince(from, max = 2500) {
    const lines = traffic().slice(from).map(({ dir, msg }) => {
        const what = msg.method ?? `answer ${msg.id}${msg.error ? ` error ${msg.error.message}` : ''}`;
        const changes = msg.method === 'textDocument/didChange'
            ? ' ' + JSON.stringify(msg.params.contentChanges.map((c) => [c.range?.start, c.range?.end, c.text])) : '';
        return `${dir} ${what}${changes}`;
    });
    const text = lines.join('\n');
    return text.length > max ? `...${text.slice(-max)}` : text;
}

// ----------------------------------------------------------------------------- browser

const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
        '--no-first-run', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: { width: 1000, height: 560 } });
const pageErrors = [];
const pageErrorStacks = [];
page.on('pageerror', (e) => { pageErrors.push(e.message); pageErrorStacks.push(String(e.stack ?? e.message).slice(0, 2000)); });
page.on('console', (m) => {
    if (m.type() === 'error') say('console error:', m.text().slice(0, 300));
});
let pristine; // the file as opened
const query = new URLSearchParams({ root: workspace, file, model });
await page.goto(`http://127.0.0.1:${port}/index.html?${query}`);
await page.waitForFunction(() => window.harness && window.harness.phase !== 'loading', null, { timeout: 120000 });
const phase = await page.evaluate(() => [window.harness.phase, window.harness.error]);
if (phase[0] !== 'ready') throw new Error(`page failed: ${phase[1]}`);
say('page ready');
await page.waitForFunction(() => window.harness.clientState() === 2, null, { timeout: 120000 }); // State.Running
say('language client running');
// VS Code's TextMate tokenizer runs in a worker; its first answer for a model awaits a lazy
// import on the main thread (TextMateWorkerTokenizerController.setTokensAndStates), and
// worker answers that arrive while it is pending are applied against a state store the
// typing has moved on from: VS Code throws "Cannot set null/undefined state" (seen on cold CI
// starts, never from our code). A user sees highlighting before typing; wait for it too.
// Best effort: one run here saw it never report Completed; the race is tolerated below anyway.
const highlighted = await page
    .waitForFunction(() => window.harness.editor().getModel().tokenization.backgroundTokenizationState === 2,
        null, { timeout: 30000 }) // BackgroundTokenizationState.Completed
    .then(() => true, () => false);
say(highlighted ? 'syntax highlighting complete' : 'syntax highlighting not complete after 30 s: typing anyway');

const evaluate = (fn, arg) => page.evaluate(fn, arg);
const value = () => evaluate(() => window.harness.value());
const stats = () => evaluate(() => window.harness.stats());
pristine = await value();

// VS Code's Python extension (its indentation rules) activates asynchronously, and on a
// cold first start it can still be loading here. A user types once Enter after a `def` line
// indents; so do we: probe until it does, then put the file back exactly as opened.
for (const t0 = Date.now(); ; ) {
    await newTopLevelLine();
    await page.keyboard.type('def _probe():', { delay: 5 });
    await page.keyboard.press('Enter');
    const column = await evaluate(() => window.harness.cursor().column);
    await evaluate((text) => window.harness.editor().getModel().setValue(text), pristine);
    if (column === 5) break;
    if (Date.now() - t0 > 90000) throw new Error('Enter after a def line never indented: the Python language configuration did not load');
    await sleep(1000);
}
say('python indentation rules active');

/** The ghost text as shown: the part on the cursor line plus the extra lines below it. */
const ghost = () => evaluate(ghostInPage);

/** Start a new line at column 1 below the last one (Enter, then Backspace over the auto-indent). */
async function newTopLevelLine() {
    await page.keyboard.press('Control+End');
    await page.keyboard.press('Enter');
    for (let i = 0; i < 40; i++) {
        const { column, blank } = await evaluate(() => {
            const h = window.harness;
            const p = h.cursor();
            return { column: p.column, blank: !h.editor().getModel().getLineContent(p.lineNumber).trim() };
        });
        if (column === 1 || !blank) break;
        await page.keyboard.press('Backspace');
    }
}

/** Type lines as a user does: Enter between them, the editor indents by itself. */
async function typeLines(lines) {
    for (const [i, line] of lines.entries()) {
        if (i > 0) await page.keyboard.press('Enter');
        await page.keyboard.type(line, { delay: 15 });
    }
}

/**
 * Wait for ghost text. The first answers come while the model loads (empty), so when
 * nothing is shown, the server says it is ready, no request is in flight and 10 s passed,
 * nudge the editor as a user would: type a space and delete it (a new automatic request).
 */
async function waitGhost(what, maxRetries = Infinity) {
    // the clock runs once the server is ready: the first model load (and, once per
    // machine, the measurement of its verification cost curve) may take minutes
    const loadEnd = Date.now() + LOAD_WAIT_MS;
    let end = Date.now() + GHOST_WAIT_MS;
    let nextRetry = Date.now() + 10000;
    let retries = 0;
    while (Date.now() < end || (serverState() !== 'ready' && Date.now() < loadEnd)) {
        if (serverState() !== 'ready') end = Date.now() + GHOST_WAIT_MS;
        const g = await ghost();
        if (g.trim()) return { ghost: g, retries };
        const pending = requests('textDocument/inlineCompletion').filter((r) => !r.responses.length && !r.cancelled);
        if (pending.length || serverState() !== 'ready') {
            nextRetry = Date.now() + 10000;
        } else if (Date.now() > nextRetry) {
            if (retries >= maxRetries) return { ghost: '', retries };
            retries += 1;
            say(`${what}: no ghost text yet, typing a space and deleting it (retry ${retries})`);
            await page.keyboard.type(' ');
            await page.keyboard.press('Backspace');
            nextRetry = Date.now() + 10000;
        }
        await sleep(200);
    }
    throw new Error(`${what}: no ghost text ${GHOST_WAIT_MS / 1000} s after the server was ready (state now: ${serverState()})`);
}

/**
 * Type a new top-level function (signature, docstring, Enter) and wait for ghost text in
 * its body. The small model has nothing to say for some functions (it answers empty, or
 * only with a new `def`, which the server drops): then move on and type the next one, as
 * a user would.
 */
async function functionWithGhost(what, candidates) {
    for (const [i, [signature, doc]] of candidates.entries()) {
        await page.keyboard.press('Escape');
        await newTopLevelLine();
        await typeLines(['', signature]);
        await page.keyboard.press('Escape'); // (a ghost text or the suggest widget: Enter is a new line)
        await page.keyboard.press('Enter');
        if ((await evaluate(() => window.harness.cursor().column)) === 1) {
            // VS Code's Enter after a `def` line did not indent (seen once in CI, with 16 errors
            // of its TextMate worker race in the same run): indent as a user would, and count it
            editorMissedIndent += 1;
            say(`${what}: the editor did not indent after "${signature}": indenting by hand`);
            await page.keyboard.type('    ');
        }
        await typeLines([`"""${doc}"""`, '']);
        const last = i === candidates.length - 1;
        const found = await waitGhost(`${what} (${signature})`, last ? Infinity : 3);
        if (found.ghost.trim()) return { ...found, signature };
        say(`${what}: nothing for ${signature}, next function`);
    }
    throw new Error('unreachable');
}

/** The last non-empty inline completion answer (the suggestion the editor shows). */
function lastSuggestion() {
    const done = requests('textDocument/inlineCompletion').filter((r) => r.responses.length && r.responses[0].result);
    for (let i = done.length - 1; i >= 0; i--) {
        const res = done[i].responses[0].result;
        const items = Array.isArray(res) ? res : res.items;
        if (items && items.length) return { request: done[i], item: items[0] };
    }
    return undefined;
}

/** Document offset of an LSP position (UTF-16 code units, \n line ends). */
function offsetOf(text, pos) {
    let line = 0;
    let i = 0;
    while (line < pos.line) {
        i = text.indexOf('\n', i) + 1;
        line += 1;
    }
    return i + pos.character;
}

/** Wait until the server has been idle (no generation finished) for `quietMs`. */
async function settle(quietMs = 2000, maxMs = 60000) {
    const end = Date.now() + maxMs;
    let last = JSON.stringify((await stats()).total);
    let since = Date.now();
    while (Date.now() < end) {
        await sleep(250);
        const now = JSON.stringify((await stats()).total);
        if (now !== last) {
            last = now;
            since = Date.now();
        } else if (Date.now() - since >= quietMs) return;
    }
}

const check = (cond, message) => {
    if (!cond) throw new Error(message);
};

// ----------------------------------------------------------------------------- scenarios

let accepted; // { before, insert } of the accept scenario
let editorMissedIndent = 0; // Enter after a `def` line that VS Code did not indent (see functionWithGhost)

async function accept() {
    const { ghost: shown, retries, signature } = await functionWithGhost('accept', [
        ['def count_words(text: str) -> int:', 'Return the number of words in text.'],
        ['def first_line(text: str) -> str:', 'Return the first line of text.'],
    ]);
    await sleep(300); // let the view settle for the picture
    const shot = join(out, 'vscode-ghost-text.png');
    await page.screenshot({ path: shot });
    const before = await value();
    const sug = lastSuggestion();
    check(sug, 'ghost text is shown but no inline completion answer carried it');
    const { item } = sug;
    const insert = typeof item.insertText === 'string' ? item.insertText : item.insertText.value;
    const cursor = await evaluate(() => window.harness.cursor());
    const range = item.range ?? { start: { line: cursor.lineNumber - 1, character: cursor.column - 1 }, end: { line: cursor.lineNumber - 1, character: cursor.column - 1 } };
    const start = offsetOf(before, range.start);
    const endOff = offsetOf(before, range.end);
    const expected = before.slice(0, start) + insert + before.slice(endOff);
    await page.keyboard.press('Tab');
    await sleep(300);
    const after = await value();
    accepted = { before, insert };
    check(after === expected, `after Tab the buffer is not the suggestion applied once:\n--- expected tail\n${expected.slice(start - 80, start + insert.length + 40)}\n--- got tail\n${after.slice(start - 80, start + insert.length + 40)}`);
    check(!(await ghost()).trim() || (await ghost()) !== shown, 'the accepted ghost text is still shown after Tab');
    // The shown ghost text is what got inserted (Monaco shows the part after the cursor).
    const inserted = after.slice(start, start + insert.length);
    check(inserted.replace(/\s+$/, '').endsWith(shown.replace(/\s+$/, '').split('\n').pop().trim()), 'the inserted text does not end with the ghost text that was shown');
    // Indentation: the body goes at 4 spaces, not 8; nothing at column 0 inside the body
    // before the first dedent the model chose; the first line continues the cursor's indent.
    const lineStart = before.lastIndexOf('\n', start - 1) + 1;
    const lead = before.slice(lineStart, start);
    const firstLine = (lead + inserted).split('\n')[0];
    check(/^ {4}\S/.test(firstLine), `first body line is not indented by exactly 4 spaces: ${JSON.stringify(firstLine)}`);
    for (const line of inserted.split('\n').slice(1)) {
        if (!line.trim()) continue;
        if (!line.startsWith(' ')) break; // the model ended the function
        check(/^( {4})+\S/.test(line), `body line not on a 4-space indent: ${JSON.stringify(line)}`);
    }
    // No duplicated suffix: what followed the cursor follows the inserted text once.
    const suffix = before.slice(endOff);
    check(after.endsWith(suffix) && !inserted.endsWith(suffix.trim() || '\u0000'), 'the text after the cursor is duplicated');
    return { signature, retries, range: item.range ?? null, insertText: insert, filterText: item.filterText ?? null, command: item.command ?? null, screenshot: shot };
}

/** The ghost text as shown, read in the page (for the page-side watcher below). */
function ghostInPage() {
    const clean = (s) => (s ?? '').replace(/\u00a0/g, ' ');
    const root = document.querySelector('.monaco-editor');
    const inline = [...root.querySelectorAll('.view-lines .ghost-text-decoration, .view-lines .ghost-text-decoration-preview')]
        .map((e) => clean(e.textContent)).join('');
    const lines = [...root.querySelectorAll('.suggest-preview-text .view-line')].map((e) => clean(e.textContent));
    return inline + (lines.length ? '\n' + lines.join('\n') : '');
}

const maxRequestId = () => Math.max(0, ...requests().map((r) => (typeof r.id === 'number' ? r.id : 0)));
const delta = (a, b, key) => (b.outcomes[key] ?? 0) - (a.outcomes[key] ?? 0);

async function acceptNext() {
    // A fresh cursor state in the accept scenario's document (below the function it
    // accepted): type a function, wait for its ghost text, read it for READ_MS as a user
    // does, Tab, then time the next ghost text at the new cursor. The Tab's keydown and
    // the first frame showing the next ghost text are both timed in the page (rAF).
    // The small model has nothing more to say after accepting a whole function body (the
    // block is done), so the cursor states are top-level statements (a block there ends at
    // a blank line, and the next suggestion is the next paragraph); when one gives no
    // ghost text, or nothing after the accept, try the next one and say so (`tried`).
    const candidates = [
        ['RED = 1', 'GREEN = 2', ''],
        ['MAX_LINE_LENGTH = 80', ''],
        ['# limits', 'MAX_LINES = 100', ''],
        ['def count_lines(text: str) -> int:', '"""Return the number of lines in text."""', ''],
    ];
    const tried = [];
    for (const lines of candidates) {
        const signature = lines.filter(Boolean).join(' / ');
        await page.keyboard.press('Escape');
        await newTopLevelLine();
        await typeLines(['', '', ...lines]);
        const { ghost: shown0 } = await waitGhost(`accept-next (${signature})`, 1);
        if (!shown0.trim()) {
            tried.push({ signature, why: 'no ghost text' });
            continue;
        }
        // the ghost text may still grow (an early answer's first lines, then all of it)
        let shown = shown0;
        for (let i = 0; i < 5; i++) {
            await sleep(100);
            const g = await ghost();
            if (g === shown) break;
            shown = g;
        }
        const sShown = await stats();
        await sleep(READ_MS); // the user reads the suggestion
        const sTab = await stats();
        shown = await ghost();
        check(shown.trim(), 'the ghost text went away while the user read it');
        const sug = lastSuggestion();
        const firstId = maxRequestId();
        const before = await value();
        await evaluate((fnSrc) => {
            const read = new Function(`return (${fnSrc})()`);
            const w = { tab: null, empty: false, at: null, text: '' };
            window.harness.nextGhost = w;
            const onKey = (e) => {
                if (e.key !== 'Tab' || w.tab !== null) return;
                w.tab = performance.now();
                window.removeEventListener('keydown', onKey, true);
                const frame = () => {
                    const g = read();
                    if (!g.trim()) w.empty = true;
                    else if (w.empty || g !== w.shown) {
                        w.at = performance.now();
                        w.text = g;
                        return;
                    }
                    requestAnimationFrame(frame);
                };
                requestAnimationFrame(frame);
            };
            window.addEventListener('keydown', onKey, true);
        }, ghostInPage.toString());
        await evaluate((s) => { window.harness.nextGhost.shown = s; }, shown);
        await page.keyboard.press('Tab');
        const accepted = await value();
        check(accepted !== before, 'Tab did not accept the suggestion');
        // VS Code asks again by itself after an accept (the document changed). If it sends
        // no inline request within NEXT_TRIGGER_MS, do what a user would: Alt+\ (the
        // editor.action.inlineSuggest.trigger keybinding).
        let trigger = 'automatic';
        const tabAt = Date.now();
        let verdict;
        for (;;) {
            const w = await evaluate(() => window.harness.nextGhost);
            if (w.at !== null) {
                verdict = w;
                break;
            }
            const mine = requests('textDocument/inlineCompletion').filter((r) => r.id > firstId);
            if (!mine.length && trigger === 'automatic' && Date.now() - tabAt > NEXT_TRIGGER_MS) {
                trigger = 'Alt+\\ (editor.action.inlineSuggest.trigger)';
                say('accept-next: no inline request after the accept; pressing Alt+\\');
                await page.keyboard.press('Alt+Backslash');
            }
            const answered = mine.length && mine.every((r) => r.responses.length || r.cancelled);
            if ((answered && Date.now() - tabAt > 8000) || Date.now() - tabAt > GHOST_WAIT_MS) {
                verdict = w;
                break;
            }
            await sleep(50);
        }
        const s1 = await stats();
        const mine = requests('textDocument/inlineCompletion').filter((r) => r.id > firstId);
        const answers = mine.map((r) => {
            const res = r.responses[0]?.result;
            const items = res ? (Array.isArray(res) ? res : res.items) : [];
            const item = items?.[0];
            const text = item ? (typeof item.insertText === 'string' ? item.insertText : item.insertText.value) : '';
            return { id: r.id, cancelled: r.cancelled, error: r.responses[0]?.error?.code ?? null, text, roundTripMs: null };
        });
        // each request's round trip, from the bridge's clock (ms since it started)
        const tOf = new Map();
        for (const { t, dir, msg } of traffic()) {
            if (msg.method === 'textDocument/inlineCompletion' && dir === 'c2s') tOf.set(msg.id, t);
            else if (dir === 's2c' && !msg.method && tOf.has(msg.id)) {
                const a = answers.find((x) => x.id === msg.id);
                if (a && a.roundTripMs === null) a.roundTripMs = t - tOf.get(msg.id);
            }
        }
        const counts = {
            ready: delta(sTab, s1, 'ready'),
            typedThrough: delta(sTab, s1, 'typed_through'),
            suggestion: delta(sTab, s1, 'suggestion') + delta(sTab, s1, 'early'),
            empty: delta(sTab, s1, 'empty'),
            shared: delta(sTab, s1, 'shared'),
            prefetched: delta(sTab, s1, 'prefetched'),
            prefetchCancelled: delta(sTab, s1, 'prefetch_cancelled'),
            // the accepted lines were a running block's early answer: the request waited for
            // that block's next lines instead of starting a generation
            joinedBlock: delta(sTab, s1, 'joined_block'),
            generations: s1.total.generations - sTab.total.generations,
        };
        const attempt = {
            signature,
            readMs: READ_MS,
            shown,
            shownInsertText: sug ? (typeof sug.item.insertText === 'string' ? sug.item.insertText : sug.item.insertText.value) : null,
            prefetchedWhileReading: delta(sShown, sTab, 'prefetched'),
            trigger,
            requestsAfterAccept: answers,
            counts,
        };
        if (verdict.at === null) {
            attempt.why = answers.length ? 'the server answered the state after the accept with nothing' : 'no inline request after the accept';
            tried.push(attempt);
            say(`accept-next: no next ghost text for ${signature} (${attempt.why})`);
            continue;
        }
        const nextGhost = verdict.text;
        const latencyMs = Math.round(verdict.at - verdict.tab);
        // the next ghost text belongs to an answer for the state after the accept
        const from = answers.filter((a) => a.text.trim() && nextGhost.trim() && a.text.replace(/\s+$/, '').endsWith(nextGhost.replace(/\s+$/, '').split('\n').pop().trim()));
        check(from.length, `the next ghost text ${JSON.stringify(nextGhost.slice(0, 60))} matches no answer after the accept`);
        // without a model run: answered from the background suggestion (ready) and no
        // foreground generation (suggestion / shared) in between
        const withoutModelRun = counts.ready > 0 && counts.suggestion === 0 && counts.shared === 0;
        // no new generation either way: ready, or the lines of the block still running
        const source = withoutModelRun ? 'ready' : (counts.joinedBlock > 0 && counts.suggestion === 0 && counts.shared === 0
            ? 'running block' : 'new model run');
        return { source, signature, tried, readMs: READ_MS, shown, accepted: accepted.slice(before.length - 200), nextGhostAppeared: true, latencyMs, nextGhost, trigger,
            withoutModelRun, prefetchedWhileReading: attempt.prefetchedWhileReading, counts, requestsAfterAccept: answers };
    }
    throw new Error(`no next ghost text after accepting in any of ${candidates.length} functions: ${JSON.stringify(tried).slice(0, 3000)}`);
}

async function typeThrough() {
    // Undo the accepted suggestion (Ctrl+Z) and take it again letter by letter: the same
    // cursor state, so the small model's answer is known to be non-empty.
    check(accepted, 'needs the accept scenario');
    // (back over what accept-next typed and accepted too)
    await page.keyboard.press('Escape');
    for (let i = 0; i < 400 && (await value()) !== accepted.before; i++) await page.keyboard.press('Control+z');
    check((await value()) === accepted.before, 'Ctrl+Z did not restore the text before the accept');
    const signature = 'undo of the accept';
    await waitGhost('type-through');
    await settle();
    const shown = await ghost();
    const k = Math.min(3, /^[A-Za-z0-9_ .]*/.exec(shown)[0].length);
    check(k > 0, `the suggestion starts with no plain characters to type: ${JSON.stringify(shown.slice(0, 20))}`);
    const s0 = await stats();
    await page.keyboard.type(shown.slice(0, k), { delay: 60 });
    // right away: the ghost text is the rest of the same suggestion
    const rest = shown.slice(k);
    let now = await ghost();
    const until = Date.now() + 1000;
    while (now !== rest && Date.now() < until) {
        await sleep(50);
        now = await ghost();
    }
    check(now === rest, `after typing ${JSON.stringify(shown.slice(0, k))} the ghost text is not the rest:\n${JSON.stringify(now.slice(0, 80))}\nvs\n${JSON.stringify(rest.slice(0, 80))}`);
    await sleep(2500); // debounce + any request the typing caused
    const s1 = await stats();
    check((await ghost()) === rest, 'the ghost text changed after typing through (flash / replaced suggestion)');
    // Every inline request the typing caused was answered by the server's typed-through
    // path (no model run for it). The server's total generation count is reported, not
    // asserted: in some runs it rises by one 1-token generation during this window that
    // is not an inline request's (not yet diagnosed; see the issue note).
    const gens = s1.total.generations - s0.total.generations;
    const tt = (s1.outcomes.typed_through ?? 0) - (s0.outcomes.typed_through ?? 0);
    const asked = (s1.requests.inline ?? 0) - (s0.requests.inline ?? 0);
    check(asked > 0 && tt === asked, `typing through: ${asked} inline request(s), only ${tt} answered by the typed-through path`);
    return { signature, typed: shown.slice(0, k), requestsWhileTyping: asked, typedThroughAnswers: tt, newGenerations: gens };
}

async function typeAway() {
    const old = await ghost();
    check(old.trim(), 'no ghost text to type away from');
    const firstId = Math.max(0, ...requests().map((r) => (typeof r.id === 'number' ? r.id : 0)));
    let typedAway = old.startsWith('z') ? 'q' : 'z';
    await page.keyboard.type(typedAway);
    // "at once": within a few animation frames of the keystroke (the DOM updates on the next frame)
    let right = await ghost();
    for (const until = Date.now() + 300; right && old.includes(right) && right.length >= 2 && Date.now() < until; ) {
        await sleep(25);
        right = await ghost();
    }
    check(!right || !old.includes(right) || right.length < 2, `old ghost text still shown right after typing away: ${JSON.stringify(right.slice(0, 60))}`);
    check(right !== old && right !== old.slice(1), 'old ghost text still shown right after typing away');
    // keep typing while requests are in flight so some get cancelled
    for (const ch of 'ap = 1') {
        await page.keyboard.type(ch);
        typedAway += ch;
        await sleep(120);
    }
    await settle(2500, 90000);
    // every request gets its answer (a cancelled one: error -32800 once its work stopped)
    const mine = () => requests().filter((r) => typeof r.id === 'number' && r.id > firstId);
    for (let i = 0; i < 240 && mine().some((r) => !r.responses.length); i++) await sleep(250);
    await sleep(500);
    const reqs = mine();
    const unanswered = reqs.filter((r) => r.responses.length !== 1);
    check(unanswered.length === 0, `requests not answered exactly once: ${JSON.stringify(unanswered.map((r) => [r.id, r.method, r.responses.length]))}`);
    const cancelled = reqs.filter((r) => r.cancelled);
    // a cancelled request's answer must not be shown: whatever ghost text is up now
    // belongs to the latest answered request for the current buffer
    const g = await ghost();
    if (g.trim()) {
        const latest = lastSuggestion();
        check(latest && !latest.request.cancelled, 'the ghost text shown comes from a cancelled request');
    }
    check(!old.trim() || !g.includes(old.trim().split('\n')[0]) || old.trim().split('\n')[0].length < 4, 'the old suggestion came back');
    return {
        typed: typedAway,
        requests: reqs.length,
        cancelled: cancelled.length,
        cancelledAnswers: cancelled.map((r) => (r.responses[0].error ? `error ${r.responses[0].error.code}` : 'result')),
    };
}

async function codeAction() {
    // Ctrl+Z back to the file as opened, then a stub in the same place as the accept's
    // function: the same context, so the small model has a body to propose. It proposes
    // none for some stubs (the server answers the resolve with an error, which the editor
    // shows): then try the next stub, as a user would.
    await page.keyboard.press('Escape');
    for (let i = 0; i < 400 && (await value()) !== pristine; i++) await page.keyboard.press('Control+z');
    check((await value()) === pristine, 'Ctrl+Z did not get back to the file as opened');
    const stubs = [
        ['def count_words(text: str) -> int:', 'Return the number of words in text.'],
        ['def is_python_file(path: str) -> bool:', 'True when path names a Python source file.'],
    ];
    const tried = [];
    for (const [signature, doc] of stubs) {
        await page.keyboard.press('Escape');
        await newTopLevelLine();
        const trafficAt = traffic().length;
        await typeLines(['', signature, `"""${doc}"""`]);
        const stubLine = await evaluate(() => window.harness.cursor().lineNumber - 1);
        const before = await value();
        const resolvedBefore = requests('codeAction/resolve').length;
        await page.keyboard.press('ArrowUp'); // on the def line, as a user puts the cursor in the function
        await page.keyboard.press('Control+Period');
        const entry = page.locator('.action-widget .monaco-list-row', { hasText: 'Generate function body' });
        await entry.first().waitFor({ timeout: 30000 });
        await entry.first().click();
        const end = Date.now() + 120000;
        let after = before;
        let answer;
        while (after === before && Date.now() < end) {
            await sleep(250);
            after = await value();
            answer = requests('codeAction/resolve').slice(resolvedBefore).find((r) => r.responses.length)?.responses[0];
            if (answer?.error) break;
        }
        if (answer?.error) {
            tried.push(`${signature}: ${answer.error.message}`);
            say(`code-action: ${answer.error.message}; next stub`);
            await page.keyboard.press('Escape');
            continue;
        }
        check(after !== before, 'the code action changed nothing within 120 s');
        const lines = after.split('\n');
        const beforeLines = before.split('\n');
        const changedAt = beforeLines.slice(0, stubLine + 1).findIndex((line, i) => lines[i] !== line);
        // (what differs, the edit and the lines sent since: a flake seen once on a slow CPU in CI)
        check(changedAt < 0, `text above the body changed: line ${changedAt + 1} was ${JSON.stringify(beforeLines[changedAt])}, `
            + `is ${JSON.stringify(lines[changedAt])}; the edit ${JSON.stringify(answer?.result?.edit)}; `
            + `traffic since the stub was typed:\n${trafficSince(trafficAt)}`);
        const body = lines.slice(stubLine + 1);
        check(body.length > 0 && body[0].trim() !== '', 'no body after the docstring');
        check(/^ {4}\S/.test(body[0]), `body not indented by 4: ${JSON.stringify(body[0])}`);
        check(answer?.result?.edit, 'no codeAction/resolve answer with an edit');
        return { signature, tried, body: body.join('\n'), edit: answer.result.edit };
    }
    throw new Error(`no stub got a body: ${tried.join('; ')}`);
}

async function cursorRest() {
    // A user moves into the middle of the file and reads. While the cursor moves the
    // extension says nothing; once it has rested (300 ms) it sends fastcoder/cursor with
    // that position, once, and the server prepares the suggestion there in the background
    // (outcome warm_at_cursor).
    await page.keyboard.press('Escape');
    const notes = () => traffic().filter(({ dir, msg }) => dir === 'c2s' && msg.method === 'fastcoder/cursor');
    const s0 = await stats();
    const before = notes().length;
    await page.keyboard.press('Control+Home');
    for (let i = 0; i < 12; i++) await page.keyboard.press('ArrowDown');
    await page.keyboard.press('End');
    let cursor = await evaluate(() => window.harness.cursor());
    for (let i = 0; i < 20 && cursor.column === 1; i++) { // at the end of a line with text
        await page.keyboard.press('ArrowDown');
        await page.keyboard.press('End');
        cursor = await evaluate(() => window.harness.cursor());
    }
    for (const until = Date.now() + 5000; notes().length === before && Date.now() < until; ) await sleep(100);
    await sleep(1000); // a second one would come now if the extension repeated itself
    const sent = notes().slice(before).map(({ msg }) => msg.params);
    check(sent.length === 1, `expected one fastcoder/cursor for the resting cursor, got ${sent.length}: ${JSON.stringify(sent)}`);
    const [{ textDocument, position }] = sent;
    check(position.line === cursor.lineNumber - 1 && position.character === cursor.column - 1,
        `fastcoder/cursor says ${JSON.stringify(position)}, the cursor is at line ${cursor.lineNumber} column ${cursor.column}`);
    check(textDocument.uri.endsWith('/' + file.split('/').pop()), `fastcoder/cursor names ${textDocument.uri}`);
    let s1 = await stats();
    for (const until = Date.now() + 60000; delta(s0, s1, 'warm_at_cursor') < 1 && Date.now() < until; await sleep(250)) s1 = await stats();
    check(delta(s0, s1, 'warm_at_cursor') === 1, `the server did not prepare the suggestion where the cursor rests: ${JSON.stringify(s1.outcomes)}`);
    return { position, warmAtCursor: delta(s0, s1, 'warm_at_cursor') };
}

async function suggestWidget() {
    // A user types the start of a name and VS Code's suggest widget opens (Ctrl+Space here)
    // with an item selected. VS Code then asks for ghost text with that item
    // (selectedCompletionInfo) and shows it only if it starts with the item's text over the
    // item's range; it asks again whenever the selection changes. Another provider's item
    // is selected (arrowing past ours, whose detail is "FastCoder"): the ghost text must
    // show what follows that item while the widget is open.
    const visible = () => evaluate(() => {
        const w = document.querySelector('.editor-widget.suggest-widget');
        const row = w && w.classList.contains('visible') ? w.querySelector('.monaco-list-row.focused') : null;
        return row ? { label: (row.querySelector('.label-name') ?? row).textContent, text: row.textContent } : null;
    });
    // VS Code shows its word-based suggestions only when no provider has any; a language
    // server (Pylance, ...) has: register one as an extension would, naming the
    // document's identifiers that start with the word at the cursor
    await evaluate(() => {
        const vscode = window.harness.vscode;
        window.harness.otherProvider ??= vscode.languages.registerCompletionItemProvider({ language: 'python' }, {
            provideCompletionItems(doc, pos) {
                const range = doc.getWordRangeAtPosition(pos);
                const typed = range ? doc.getText(range) : '';
                const words = new Set(doc.getText().match(/[A-Za-z_][A-Za-z_0-9]*/g));
                return [...words].filter((w) => typed && w.startsWith(typed) && w !== typed)
                    .map((w) => new vscode.CompletionItem(w, vscode.CompletionItemKind.Variable));
            },
        });
    });
    const candidates = [
        // (a `shout` function came first until the thirty-seventh session: smollm2-135m's
        // answer after `return text` was a loop, `text.upper() + "\n" + ...` to the token
        // cap, which the server now drops)
        ['def words(text: str) -> list:', 'Return the words of text.', 'return te'],
        ['def strip_text(text: str) -> str:', 'Return text without surrounding whitespace.', 'return te'],
        ['def count_lines(text: str) -> int:', 'Return how many lines text has.', 'return len(te'],
    ];
    const tried = [];
    for (const [signature, doc, body] of candidates) {
        await page.keyboard.press('Escape');
        await newTopLevelLine();
        await typeLines(['', signature, `"""${doc}"""`, '']);
        for (const until = Date.now() + LOAD_WAIT_MS; serverState() !== 'ready' && Date.now() < until; ) await sleep(500);
        await settle(1000, 30000);
        // the widget may open by itself while the name is typed (quick suggestions)
        const seen = requests('textDocument/inlineCompletion').length;
        const seenCompletions = requests('textDocument/completion').length;
        await page.keyboard.type(body, { delay: 15 });
        await sleep(300);
        if (!(await visible())) await page.keyboard.press('Control+Space');
        let row = null;
        for (const until = Date.now() + 30000; !row && Date.now() < until; await sleep(200)) row = await visible();
        check(row, `${body}: the suggest widget did not open`);
        for (let i = 0; i < 10 && row && /FastCoder/.test(row.text); i++) {
            await page.keyboard.press('ArrowDown');
            await sleep(200);
            row = await visible();
        }
        check(row && !/FastCoder/.test(row.text), `${body}: no item of another provider in the suggest widget`);
        // the ghost text while the widget is open, and the answer that carried it
        let shown = '';
        let answer;
        // only the requests made for the row now selected: the one VS Code sent for the row
        // selected before the arrowing (FastCoder's own item) may be answered first
        const rowText = (row.label ?? '').trim();
        for (const until = Date.now() + 60000; Date.now() < until; await sleep(200)) {
            const asked = requests('textDocument/inlineCompletion').slice(seen)
                .filter((r) => r.params.context?.selectedCompletionInfo && r.responses.length && !r.responses[0].error
                    && (!rowText || r.params.context.selectedCompletionInfo.text.trim() === rowText));
            answer = asked.at(-1);
            const items = answer ? [answer.responses[0].result].flatMap((res) => (Array.isArray(res) ? res : res?.items ?? [])) : [];
            shown = await ghost();
            if (answer && !items.length && !requests('textDocument/inlineCompletion').slice(seen).some((r) => !r.responses.length && !r.cancelled)) break;
            if (items.length && shown.trim() && (await visible())) break;
        }
        check(answer, `${body}: no inline request carried the selected item (selectedCompletionInfo)`);
        const info = answer.params.context.selectedCompletionInfo;
        const items = [answer.responses[0].result].flatMap((res) => (Array.isArray(res) ? res : res?.items ?? []));
        const ownItems = new Set(requests('textDocument/completion').slice(seenCompletions)
            .flatMap((r) => r.responses.flatMap((m) => m.result?.items ?? []).map((i) => i.textEdit?.newText ?? i.insertText)));
        const widget = await visible();
        if (items.length) await page.screenshot({ path: join(out, 'vscode-suggest-widget.png') });
        await page.keyboard.press('Escape'); // close the widget
        await page.keyboard.press('Escape'); // and the ghost text
        if (!items.length) {
            tried.push(`${body}: the model had nothing after ${JSON.stringify(info.text)}`);
            continue;
        }
        const insert = typeof items[0].insertText === 'string' ? items[0].insertText : items[0].insertText.value;
        check(JSON.stringify(items[0].range) === JSON.stringify(info.range),
            `${body}: the answer's range ${JSON.stringify(items[0].range)} is not the selected item's ${JSON.stringify(info.range)}`);
        check(insert.startsWith(info.text) && insert.length > info.text.length,
            `${body}: the answer ${JSON.stringify(insert)} does not extend the selected item ${JSON.stringify(info.text)}`);
        check(widget && widget.label.trim() === info.text.trim(),
            `${body}: the request's selected item ${JSON.stringify(info.text)} is not the widget's ${JSON.stringify(widget && widget.label)}`);
        // FastCoder's own item (selected first, before the arrowing): its ghost text is that
        // suggestion itself, as before the widget opened, not what would follow it
        const own = requests('textDocument/inlineCompletion').slice(seen).filter((r) => r.responses.length && !r.responses[0].error
            && r.params.context?.selectedCompletionInfo && ownItems.has(r.params.context.selectedCompletionInfo.text));
        for (const r of own) {
            const got = [r.responses[0].result].flatMap((res) => (Array.isArray(res) ? res : res?.items ?? []))
                .map((i) => (typeof i.insertText === 'string' ? i.insertText : i.insertText.value));
            check(got.length === 0 || (got.length === 1 && got[0] === r.params.context.selectedCompletionInfo.text),
                `${body}: FastCoder's own selected item ${JSON.stringify(r.params.context.selectedCompletionInfo.text)} was answered ${JSON.stringify(got)}`);
        }
        const more = insert.slice(info.text.length).split('\n')[0].trim();
        check(shown.trim() && (!more || shown.includes(more)),
            `${body}: with the widget open the ghost text ${JSON.stringify(shown)} does not show what follows the item (${JSON.stringify(more)})`);
        return { typed: body, selected: info.text, answer: insert, ghost: shown, ownItemRequests: own.length, tried };
    }
    throw new Error(`no continuation after a selected item: ${tried.join('; ')}`);
}

/**
 * What VS Code's editor does with the keys the typing benchmarks send (fastcoder_bench/replay.py
 * models it; the benchmarks' figures are only as true as that model): Enter right after an
 * auto-closed `(` splits the pair, the `)` going to a line of its own at the opener line's
 * indentation, the cursor on an indented line between with nothing right of it; Enter at an
 * argument line's end keeps the `)` below. Quotes with VS Code's default
 * (`editor.autoClosingQuotes: languageDefined`, which this page turns off elsewhere): closed
 * where the replay's model closes them and typed over, not in strings, comments (`'`), after
 * a word character other than a string prefix, or as a third quote. The document is put
 * back as it was.
 */
async function editorModel() {
    const before = await value();
    await page.keyboard.press('Escape');
    await newTopLevelLine();
    await typeLines(['def _split_probe(url, params):', 'return request(']);
    const line = () => evaluate(() => {
        const h = window.harness;
        const p = h.cursor();
        const m = h.editor().getModel();
        return { column: p.column, left: m.getLineContent(p.lineNumber).slice(0, p.column - 1),
            right: m.getLineContent(p.lineNumber).slice(p.column - 1),
            below: p.lineNumber < m.getLineCount() ? m.getLineContent(p.lineNumber + 1) : null };
    });
    const opened = await line();
    check(opened.right === ')', `typing "(" did not auto-close it: right of the cursor ${JSON.stringify(opened.right)}, `
        + `left ${JSON.stringify(opened.left)}, the line below ${JSON.stringify(opened.below)}`);
    await page.keyboard.press('Escape'); // (a ghost text the model may show)
    await page.keyboard.press('Enter');
    const split = await line();
    check(split.right === '' && split.left === ' '.repeat(8), `Enter between "(" and ")": cursor line ${JSON.stringify(split.left)} | ${JSON.stringify(split.right)}`);
    check(split.below === '    )', `Enter between "(" and ")": the line below is ${JSON.stringify(split.below)}, not the ")" at the opener's indentation`);
    await page.keyboard.type('url,', { delay: 15 });
    await page.keyboard.press('Escape');
    await page.keyboard.press('Enter');
    const next = await line();
    check(next.right === '' && next.left === ' '.repeat(8) && next.below === '    )',
        `Enter after an argument: ${JSON.stringify(next)}`);
    // Quotes, with VS Code's default (this page turns them off for its typed docstrings):
    // what fastcoder_bench/replay.py::_auto_closes_quote assumes, one line each
    await evaluate(() => window.harness.editor().updateOptions({ autoClosingQuotes: 'languageDefined' }));
    const quotes = [];
    const cases = [
        [['x = "'], '"'], // closed
        [['x = "', 'GET"'], ''], // typed over
        [['x = "GET", f"'], '"'], // after a string prefix
        [['x = "GET", f"a"'], ''],
        [['d = don\''], ''], // not after a word character
        [['h = print(x"'], ')'],
        [['c = 1  # \''], ''], // a single quote not in a comment
        [['k = 1  # "'], '"'], // a double quote is
        [['y = "it\''], '"'], // not in a string
        [['e = "a\\"'], '"'], // an escaped quote is not typed over
        [['p = "a('], ')"'], // brackets are, in a string too
        [['u = """'], ''], // the third of three quotes (last: the string stays open)
    ];
    for (const [keys, right] of cases) {
        await page.keyboard.press('Escape');
        await page.keyboard.press('End');
        await page.keyboard.press('Enter');
        for (const k of keys) await page.keyboard.type(k, { delay: 15 });
        await page.keyboard.press('Escape');
        const got = await line();
        quotes.push({ typed: keys.join(''), left: got.left, right: got.right });
        check(got.right === right, `typing ${JSON.stringify(keys.join(''))}: right of the cursor ${JSON.stringify(got.right)}, the replay assumes ${JSON.stringify(right)}`);
        await page.keyboard.press('End');
    }
    await evaluate(() => window.harness.editor().updateOptions({ autoClosingQuotes: 'never' }));
    await evaluate((text) => window.harness.editor().getModel().setValue(text), before);
    return { opened, split, next, quotes };
}

/**
 * A call's arguments on lines of their own (black's layout), suggested right after the user
 * typed `request(` (VS Code auto-closed the `)` right of the cursor): the ghost text is the
 * argument lines, the `)` moves below them at the opener line's indentation, and Tab inserts
 * them once. A call laid out that way just above shows the model the style. The document is
 * put back as it was.
 */
async function bracketLines() {
    const before = await value();
    await page.keyboard.press('Escape');
    const probe = '\n\ndef _get_probe(url, params, headers, timeout):\n    return request(\n        "GET",\n        url,\n'
        + '        params=params,\n        headers=headers,\n        timeout=timeout,\n    )\n\n\n'
        + 'def _post_probe(url, data, headers, timeout):\n    ';
    await evaluate((text) => window.harness.editor().getModel().setValue(text), before.replace(/\s+$/, '') + probe);
    await page.keyboard.press('Control+End');
    await page.keyboard.type('return request(', { delay: 15 });
    const right = await evaluate(() => {
        const h = window.harness;
        const p = h.cursor();
        return h.editor().getModel().getLineContent(p.lineNumber).slice(p.column - 1);
    });
    check(right === ')', `typing "(" did not auto-close it: right of the cursor ${JSON.stringify(right)}`);
    const { ghost: shown, retries } = await waitGhost('bracket-lines', 3);
    const sug = lastSuggestion();
    check(sug, 'ghost text is shown but no inline completion answer carried it');
    const insert = typeof sug.item.insertText === 'string' ? sug.item.insertText : sug.item.insertText.value;
    check(insert.startsWith('\n') && insert.split('\n').length >= 3,
        `after "request(" the model suggested no argument lines: ${JSON.stringify(insert)} (ghost ${JSON.stringify(shown)})`);
    await sleep(300);
    const shot = join(out, 'vscode-bracket-lines.png');
    await page.screenshot({ path: shot });
    const args = insert.split('\n').slice(1, -1).filter((l) => l.trim());
    check(args.every((l) => shown.includes(l.trim())), `the ghost text ${JSON.stringify(shown)} does not show every argument line of ${JSON.stringify(insert)}`);
    const atTab = await value();
    await page.keyboard.press('Tab');
    await sleep(300);
    const after = await value();
    const expected = atTab.replace(/request\(\)$/, `request(${insert})`);
    check(after === expected, `after Tab the buffer is not the suggestion applied once:\n--- expected tail\n${expected.slice(-300)}\n--- got tail\n${after.slice(-300)}`);
    const lines = after.split('\n');
    check(lines[lines.length - 1] === '    )', `the ")" is not on a line of its own at the opener's indentation: ${JSON.stringify(lines.slice(-3))}`);
    check(args.every((l) => /^ {8}\S/.test(l)), `argument lines not at 8 spaces: ${JSON.stringify(args)}`);
    await evaluate((text) => window.harness.editor().getModel().setValue(text), before);
    return { insertText: insert, ghost: shown, retries, screenshot: shot };
}

// ----------------------------------------------------------------------------- run

const results = [];
let failed = 0;
try {
    for (const [name, fn] of [['accept', accept], ['accept-next', acceptNext], ['type-through', typeThrough], ['type-away', typeAway], ['code-action', codeAction], ['cursor-rest', cursorRest], ['suggest-widget', suggestWidget], ['editor-model', editorModel], ['bracket-lines', bracketLines]]) {
        if (only && !only.split(',').includes(name)) continue;
        const started = Date.now();
        try {
            const detail = await fn();
            results.push({ scenario: name, ok: true, seconds: (Date.now() - started) / 1000, detail });
            say(`PASS ${name}`, JSON.stringify(detail).slice(0, 400));
        } catch (err) {
            failed += 1;
            results.push({ scenario: name, ok: false, seconds: (Date.now() - started) / 1000, error: String(err.stack ?? err) });
            say(`FAIL ${name}: ${err.message}`);
            await page.screenshot({ path: join(out, `failed-${name}.png`) }).catch(() => {});
        }
    }
} finally {
    // errors the server answered with (e.g. "the model proposed no body") surface as page
    // errors through the editor's notification path: those are expected, keep the others
    const answered = traffic().filter(({ dir, msg }) => dir === 's2c' && msg.error).map(({ msg }) => msg.error.message);
    // A known VS Code bug, not ours: the TextMate worker controller applies a worker answer
    // against a state store that edits have moved on from (see the wait for highlighting
    // above, which makes it rare but not impossible). Counted and reported, never hidden.
    // Seen as "Cannot set null/undefined state" and as "Cannot read properties of null (reading
    // 'parent')" in applyStateStackDiff; both are thrown under the worker-message handler.
    const upstream = (i) => /\bsetTokensAndStates\b/.test(pageErrorStacks[i]);
    // VS Code's CancellationError ("Canceled") rejected by its own timeout(ms, token) when
    // the inline-completion model disposes a pending fetch: VS Code's unexpected-error
    // handler ignores cancellation errors (isCancellationError), so a real VS Code shows
    // nothing; the page sees it as an unhandled rejection. Counted apart only when no
    // frame of our extension's bundles (controller, wsTransport) is in its stack.
    const cancellation = (i) => pageErrors[i] === 'Canceled' && !/(controller|wsTransport)-[\w-]+\.js/.test(pageErrorStacks[i]);
    const ours = pageErrors.map((_, i) => i).filter((i) => !upstream(i) && !cancellation(i) && !answered.some((m) => pageErrors[i].includes(m)));
    const final = { results, pageErrors: ours.map((i) => pageErrors[i]), pageErrorStacks: ours.map((i) => pageErrorStacks[i]),
        upstreamTokenizerErrors: pageErrors.filter((_, i) => upstream(i)).length, editorMissedIndent,
        cancellationErrors: pageErrors.filter((_, i) => cancellation(i)).length, lspErrorPageErrors: pageErrors.filter((e) => answered.some((m) => e.includes(m))).length, buffer: await value().catch(() => null), stats: await stats().catch(() => null) };
    writeFileSync(join(out, 'results.json'), JSON.stringify(final, null, 2));
    await browser.close();
    bridge.kill('SIGTERM');
}
say(failed ? `${failed} scenario(s) failed` : 'all scenarios passed');
process.exit(failed ? 1 : 0);
