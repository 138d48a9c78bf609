import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());

const lc = vi.hoisted(() => {
    const instances: FakeClient[] = [];
    let startError: Error | undefined;
    class FakeClient {
        notifications = new Map<string, (params: unknown) => void>();
        stateListeners: ((e: { oldState: number; newState: number }) => void)[] = [];
        running = false;
        executeFeature = {
            registered: [] as string[],
            register(data: { registerOptions: { commands?: string[] } }) {
                this.registered.push(...(data.registerOptions.commands ?? []));
            },
        };
        constructor(
            public id: string,
            public name: string,
            public serverOptions: { command: string; args: string[]; options?: { cwd?: string } },
            public clientOptions: Record<string, any>,
        ) {
            instances.push(this);
        }
        getFeature(method: string) {
            return method === 'workspace/executeCommand' ? this.executeFeature : undefined;
        }
        onNotification(method: string, handler: (params: unknown) => void) {
            this.notifications.set(method, handler);
            return { dispose() {} };
        }
        onDidChangeState(listener: (e: { oldState: number; newState: number }) => void) {
            this.stateListeners.push(listener);
            return { dispose() {} };
        }
        start = vi.fn(async () => {
            if (startError) throw startError;
            this.running = true;
        });
        stop = vi.fn(async () => {
            this.running = false;
            for (const l of this.stateListeners) l({ oldState: 2, newState: 1 });
        });
        dispose = vi.fn(async () => undefined);
        isRunning() {
            return this.running;
        }
        sendRequest = vi.fn(async () => ({}));
        code2ProtocolConverter = { asUri: (u: { toString(): string }) => u.toString(), asRange: (r: unknown) => r };
    }
    return {
        FakeClient,
        instances,
        setStartError(e: Error | undefined) {
            startError = e;
        },
    };
});

vi.mock('vscode-languageclient/node', () => ({ LanguageClient: lc.FakeClient }));
// controller.ts takes the enums from the transport-independent entry point
vi.mock('vscode-languageclient', () => ({
    State: { Stopped: 1, Running: 2, Starting: 3 },
    ExecuteCommandRequest: { method: 'workspace/executeCommand' },
}));

import * as vscodeReal from 'vscode';
import type { VscodeMock } from './vscode.mock';
import { activate, deactivate, documentSelector } from '../src/extension';

const vscode = vscodeReal as unknown as VscodeMock;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fc-ext-'));
const fakeServer = path.join(tmp, 'fastcoder');
fs.writeFileSync(fakeServer, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function context() {
    return { subscriptions: [] as { dispose(): unknown }[] } as unknown as vscodeReal.ExtensionContext & {
        subscriptions: { dispose(): unknown }[];
    };
}

const flush = () => new Promise((r) => setTimeout(r, 0));

beforeEach(async () => {
    await deactivate();
    vscode.__test.reset();
    vi.clearAllMocks();
    lc.instances.length = 0;
    lc.setStartError(undefined);
});

describe('activate', () => {
    it('registers the commands', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        await activate(context());
        for (const id of [
            'fastcoder.enable',
            'fastcoder.disable',
            'fastcoder.showStats',
            'fastcoder.rebuildIndex',
            'fastcoder.editSelection',
            'fastcoder.restartServer',
        ]) {
            expect(vscode.__test.commands.has(id), id).toBe(true);
        }
    });

    it('starts `<serverPath> serve` with init options and configuration sync', async () => {
        Object.assign(vscode.__test.config, {
            'fastcoder.serverPath': fakeServer,
            'fastcoder.model': '/models/tiny',
            'fastcoder.dtype': 'float32',
            'fastcoder.maxNewTokens': 8,
        });
        const api = await activate(context());
        await api.controller.start();
        expect(lc.instances).toHaveLength(1);
        const client = lc.instances[0];
        expect(client.id).toBe('fastcoder');
        expect(client.serverOptions.command).toBe(fakeServer);
        expect(client.serverOptions.args).toEqual(['serve']);
        expect(client.serverOptions.options?.cwd).toBe('/ws');
        expect(client.clientOptions.synchronize).toEqual({ configurationSection: 'fastcoder' });
        const init = client.clientOptions.initializationOptions;
        expect(typeof init === 'function' ? init() : init).toEqual({
            model: '/models/tiny',
            dtype: 'float32',
            device: 'auto',
            packWeights: 'auto',
            method: 'fastcoder',
            arFallback: true,
            maxNewTokens: 8,
            enabled: true,
            promptLayout: 'anchored',
            debounceMs: 'auto',
            prefetch: true,
            midLineBlocks: false,
            stopDegenerate: true,
            warmAtCursor: true,
            crossFileContext: false,
            fileHeader: 'auto',
            kvCacheMb: 256,
            kvDiskMb: 512,
        });
        expect(client.clientOptions.documentSelector).toEqual(documentSelector());
        expect(documentSelector()).toContainEqual({ scheme: 'file', language: 'python' });
        expect(documentSelector()).toContainEqual({ scheme: 'vscode-notebook-cell', language: 'python' });
        expect(client.start).toHaveBeenCalled();
        expect(vscode.window.showErrorMessage).not.toHaveBeenCalled();
    });

    it('drives the status bar from fastcoder/status', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        const handler = lc.instances[0].notifications.get('fastcoder/status');
        expect(handler).toBeTypeOf('function');
        handler!({ state: 'loading', message: 'loading model' });
        expect(api.statusBar.item.text).toBe('$(sync~spin) FastCoder: loading');
        handler!({ state: 'ready', message: 'ready' });
        expect(api.statusBar.item.text).toBe('$(check) FastCoder');
    });

    it('does not register the server-side commands that the extension already owns', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        const feature = lc.instances[0].executeFeature;
        feature.register({
            registerOptions: { commands: ['fastcoder.editSelection', 'fastcoder.rebuildIndex', 'fastcoder.stats'] },
        });
        expect(feature.registered).toEqual(['fastcoder.stats']);
    });

    it('shows a clear error (no crash, no client) when the server executable is missing', async () => {
        vscode.__test.config['fastcoder.serverPath'] = path.join(tmp, 'does-not-exist');
        const api = await activate(context());
        await expect(api.controller.start()).resolves.toBe(false);
        await flush();
        expect(lc.instances).toHaveLength(0);
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
            expect.stringContaining('does-not-exist'),
            'Open Settings',
            'Show Log',
        );
        expect(api.statusBar.item.text).toBe('$(error) FastCoder');
    });

    it('shows a clear error when the Python interpreter is missing', async () => {
        vscode.__test.config['fastcoder.pythonPath'] = path.join(tmp, 'python-missing');
        const api = await activate(context());
        await expect(api.controller.start()).resolves.toBe(false);
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
            expect.stringMatching(/Python interpreter .*python-missing/),
            'Open Settings',
            'Show Log',
        );
    });

    it('reports a Python without FastCoder installed', async () => {
        // a "python" that exits 3 like the probe does when the modules are missing
        const py = path.join(tmp, 'python-no-fastcoder');
        fs.writeFileSync(py, '#!/bin/sh\nexit 3\n', { mode: 0o755 });
        vscode.__test.config['fastcoder.pythonPath'] = py;
        const api = await activate(context());
        await expect(api.controller.start()).resolves.toBe(false);
        expect(lc.instances).toHaveLength(0);
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
            expect.stringContaining('does not have FastCoder installed'),
            'Open Settings',
            'Show Log',
        );
    });

    it('starts `<python> -m fastcoder_cli serve` for a Python with FastCoder', async () => {
        const py = path.join(tmp, 'python-ok');
        fs.writeFileSync(py, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
        vscode.__test.config['fastcoder.pythonPath'] = py;
        const api = await activate(context());
        await expect(api.controller.start()).resolves.toBe(true);
        expect(lc.instances[0].serverOptions).toMatchObject({ command: py, args: ['-m', 'fastcoder_cli', 'serve'] });
        const init = lc.instances[0].clientOptions.initializationOptions();
        expect(init.pythonPath).toBe(py);
    });

    it('turns a failing client start into an error message', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        lc.setStartError(new Error('Server initialization failed'));
        const api = await activate(context());
        await expect(api.controller.start()).resolves.toBe(false);
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
            expect.stringContaining('Server initialization failed'),
            'Open Settings',
            'Show Log',
        );
        expect(api.controller.client).toBeUndefined();
    });

    it('restarts the server when serverPath changes, not for other settings', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        expect(lc.instances).toHaveLength(1);
        vscode.__test.config['fastcoder.model'] = 'other';
        vscode.__test.fireConfigChange(['fastcoder.model']);
        await flush();
        expect(lc.instances).toHaveLength(1);
        vscode.__test.fireConfigChange(['fastcoder.serverPath']);
        await flush();
        await flush();
        expect(lc.instances[0].stop).toHaveBeenCalled();
        expect(lc.instances).toHaveLength(2);
    });

    it('skips completion requests while disabled and updates the status bar', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        const mw = lc.instances[0].clientOptions.middleware;
        const next = vi.fn(() => ['item']);
        expect(mw.provideInlineCompletionItems('doc', 'pos', 'ctx', 'tok', next)).toEqual(['item']);
        await vscode.commands.executeCommand('fastcoder.disable');
        expect(vscode.__test.config['fastcoder.enabled']).toBe(false);
        expect(mw.provideInlineCompletionItems('doc', 'pos', 'ctx', 'tok', next)).toBeUndefined();
        expect(mw.provideCompletionItem('doc', 'pos', 'ctx', 'tok', next)).toBeUndefined();
        expect(next).toHaveBeenCalledTimes(1);
        expect(api.statusBar.item.text).toBe('$(circle-slash) FastCoder: off');
        await vscode.commands.executeCommand('fastcoder.enable');
        expect(mw.provideCompletionItem('doc', 'pos', 'ctx', 'tok', next)).toEqual(['item']);
    });

    it('showStats goes through the running client', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        lc.instances[0].sendRequest.mockResolvedValueOnce({ requests: 1 });
        await expect(vscode.commands.executeCommand('fastcoder.showStats')).resolves.toEqual({ requests: 1 });
        expect(lc.instances[0].sendRequest).toHaveBeenCalledWith(
            'workspace/executeCommand',
            { command: 'fastcoder.stats', arguments: [] },
            undefined,
        );
    });

    it('deactivate stops the client', async () => {
        vscode.__test.config['fastcoder.serverPath'] = fakeServer;
        const api = await activate(context());
        await api.controller.start();
        await deactivate();
        expect(lc.instances[0].stop).toHaveBeenCalled();
    });
});
