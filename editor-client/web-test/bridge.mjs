#!/usr/bin/env node
/**
 * WebSocket <-> stdio bridge for the browser test harness.
 *
 *   node bridge.mjs --port 0 --static dist --log traffic.jsonl -- python -m fastcoder_cli serve
 *
 * Serves the built page (`--static`) over HTTP, the files of `--workspace DIR` under
 * /fs/ (the page opens a real file from disk), and, on every WebSocket connection to
 * /lsp, starts the server command (everything after `--`) and relays LSP messages: one
 * JSON-RPC message per WebSocket message <-> `Content-Length` framed on the server's
 * stdin/stdout. The server's stderr goes to our stderr. With `--log`, every message is
 * appended to a JSON-lines file ({t, dir: "c2s"|"s2c", msg}) so tests can check the
 * real traffic. Prints `listening <port>` on stdout once ready.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, resolve } from 'node:path';
import { WebSocketServer } from 'ws';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const opts = dash < 0 ? argv : argv.slice(0, dash);
const command = dash < 0 ? [] : argv.slice(dash + 1);
const opt = (name, fallback) => {
    const i = opts.indexOf(`--${name}`);
    return i >= 0 ? opts[i + 1] : fallback;
};
if (command.length === 0) {
    console.error('usage: node bridge.mjs [--port N] [--static DIR] [--workspace DIR] [--log FILE] -- <server command...>');
    process.exit(2);
}
const staticDir = resolve(opt('static', 'dist'));
const logFile = opt('log', '');
const workspace = opt('workspace', '') && resolve(opt('workspace', ''));
const started = Date.now();
const log = (dir, msg) => {
    if (logFile) appendFileSync(logFile, JSON.stringify({ t: Date.now() - started, dir, msg }) + '\n');
};

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
    '.wasm': 'application/wasm', '.ttf': 'font/ttf', '.woff': 'font/woff', '.woff2': 'font/woff2', '.svg': 'image/svg+xml', '.png': 'image/png' };

const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const rel = normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, '');
    const base = rel.startsWith('/fs/') && workspace ? workspace : staticDir;
    let file = join(base, base === workspace ? rel.slice(4) : rel);
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    if (!file.startsWith(base) || !existsSync(file)) {
        res.writeHead(404).end('not found');
        return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
});

/** Split a byte stream into LSP message bodies (Content-Length framing). */
function framer(onMessage) {
    let buf = Buffer.alloc(0);
    return (chunk) => {
        buf = Buffer.concat([buf, chunk]);
        for (;;) {
            const end = buf.indexOf('\r\n\r\n');
            if (end < 0) return;
            const header = buf.subarray(0, end).toString('ascii');
            const m = /content-length:\s*(\d+)/i.exec(header);
            if (!m) throw new Error(`bad LSP header: ${header}`);
            const len = Number(m[1]);
            if (buf.length < end + 4 + len) return;
            onMessage(buf.subarray(end + 4, end + 4 + len).toString('utf8'));
            buf = buf.subarray(end + 4 + len);
        }
    };
}

const wss = new WebSocketServer({ server: http, path: '/lsp' });
wss.on('connection', (socket) => {
    const child = spawn(command[0], command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
    console.error(`bridge: started ${command.join(' ')} (pid ${child.pid})`);
    child.stdout.on('data', framer((body) => {
        log('s2c', JSON.parse(body));
        if (socket.readyState === socket.OPEN) socket.send(body);
    }));
    child.on('exit', (code, signal) => {
        console.error(`bridge: server exited (${signal ?? code})`);
        socket.close();
    });
    child.stdin.on('error', () => {}); // server gone; 'exit' closes the socket
    socket.on('message', (data) => {
        const body = data.toString('utf8');
        log('c2s', JSON.parse(body));
        child.stdin.write(`Content-Length: ${Buffer.byteLength(body, 'utf8')}\r\n\r\n${body}`);
    });
    socket.on('close', () => {
        // the client's shutdown/exit normally ends it; make sure it does not linger
        child.stdin.end();
        const timer = setTimeout(() => child.kill('SIGTERM'), 3000);
        child.on('exit', () => clearTimeout(timer));
    });
});

http.listen(Number(opt('port', '0')), '127.0.0.1', () => {
    console.log(`listening ${http.address().port}`);
});
const stop = () => {
    for (const client of wss.clients) client.close();
    http.close();
    setTimeout(() => process.exit(0), 3500).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
