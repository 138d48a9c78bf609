import { beforeEach, describe, expect, it, vi } from 'vitest';
vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());

import * as vscodeReal from 'vscode';
import type { VscodeMock } from './vscode.mock';
import { Position, Range, Selection } from './vscode.mock';
import { ClientLike, editSelection, rebuildIndex, setEnabled, showStats } from '../src/commands';

const vscode = vscodeReal as unknown as VscodeMock;

function fakeClient(response: unknown = {}, running = true) {
    const sendRequest = vi.fn(async (_method: string, _params: unknown, _token?: unknown) => {
        if (response instanceof Error) throw response;
        return response;
    });
    const client = {
        isRunning: () => running,
        sendRequest,
        code2ProtocolConverter: {
            asUri: (uri: { toString(): string }) => uri.toString(),
            asRange: (r: Range) => ({
                start: { line: r.start.line, character: r.start.character },
                end: { line: r.end.line, character: r.end.character },
            }),
        },
    };
    return { client: client as unknown as ClientLike, sendRequest };
}

function setEditor(selection: Selection, lineLength = 10) {
    vscode.window.activeTextEditor = {
        selection,
        document: {
            uri: vscode.Uri.file('/ws/a.py'),
            lineAt: (line: number) => ({ range: new Range(line, 0, line, lineLength) }),
        },
    };
}

const channel = () => vscode.window.createOutputChannel('FastCoder Stats') as unknown as vscodeReal.OutputChannel & {
    lines: string[];
};

beforeEach(() => {
    vscode.__test.reset();
    vi.clearAllMocks();
});

describe('showStats', () => {
    it('runs fastcoder.stats and prints the JSON to the output channel', async () => {
        const stats = { completions: 3, acceptedTokensPerStep: 2.5 };
        const { client, sendRequest } = fakeClient(stats);
        const out = channel();
        await expect(showStats(() => client, out)).resolves.toEqual(stats);
        expect(sendRequest).toHaveBeenCalledWith('workspace/executeCommand', { command: 'fastcoder.stats', arguments: [] }, undefined);
        expect(out.lines.join('\n')).toContain('"acceptedTokensPerStep": 2.5');
        expect(out.show).toHaveBeenCalled();
    });

    it('warns when the server is not running', async () => {
        const { client, sendRequest } = fakeClient({}, false);
        await showStats(() => client, channel());
        await showStats(() => undefined, channel());
        expect(sendRequest).not.toHaveBeenCalled();
        expect(vscode.window.showWarningMessage).toHaveBeenCalledTimes(2);
    });

    it('shows request errors', async () => {
        const { client } = fakeClient(new Error('no such command'));
        await showStats(() => client, channel());
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(expect.stringContaining('no such command'));
    });
});

describe('rebuildIndex', () => {
    it('sends fastcoder.rebuildIndex without arguments', async () => {
        const { client, sendRequest } = fakeClient(null);
        await rebuildIndex(() => client);
        expect(sendRequest).toHaveBeenCalledWith('workspace/executeCommand', { command: 'fastcoder.rebuildIndex', arguments: [] }, undefined);
        expect(vscode.window.setStatusBarMessage).toHaveBeenCalled();
    });

    it('reports failures', async () => {
        const { client } = fakeClient(new Error('index busy'));
        await rebuildIndex(() => client);
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(expect.stringContaining('index busy'));
    });
});

describe('editSelection', () => {
    const edit = { changes: { 'file:///ws/a.py': [{ range: {}, newText: 'x' }] } };

    it('asks for an instruction and sends {uri, range, instruction}', async () => {
        setEditor(new Selection(new Position(1, 2), new Position(3, 4)));
        vscode.window.showInputBox.mockResolvedValueOnce('  add type hints ');
        const { client, sendRequest } = fakeClient({ edit });
        const result = await editSelection(() => client);
        expect(result).toEqual({ edit });
        expect(sendRequest).toHaveBeenCalledTimes(1);
        const [method, params] = sendRequest.mock.calls[0];
        expect(method).toBe('workspace/executeCommand');
        expect(params).toEqual({
            command: 'fastcoder.editSelection',
            arguments: [
                {
                    uri: 'file:///ws/a.py',
                    range: { start: { line: 1, character: 2 }, end: { line: 3, character: 4 } },
                    instruction: 'add type hints',
                },
            ],
        });
        // the server applies the edit itself; nothing to say on success
        expect(vscode.window.showInformationMessage).not.toHaveBeenCalled();
        expect(vscode.window.withProgress).toHaveBeenCalled();
    });

    it('uses the current line for an empty selection', async () => {
        setEditor(new Selection(new Position(5, 3), new Position(5, 3)), 17);
        const { client, sendRequest } = fakeClient({ edit });
        await editSelection(() => client, { instruction: 'rename x to count' });
        expect(vscode.window.showInputBox).not.toHaveBeenCalled();
        const args = (sendRequest.mock.calls[0][1] as { arguments: { range: unknown }[] }).arguments[0];
        expect(args.range).toEqual({ start: { line: 5, character: 0 }, end: { line: 5, character: 17 } });
    });

    it('does nothing when the input box is cancelled or empty', async () => {
        setEditor(new Selection(new Position(0, 0), new Position(1, 0)));
        const { client, sendRequest } = fakeClient({ edit });
        vscode.window.showInputBox.mockResolvedValueOnce(undefined);
        await editSelection(() => client);
        vscode.window.showInputBox.mockResolvedValueOnce('   ');
        await editSelection(() => client);
        expect(sendRequest).not.toHaveBeenCalled();
    });

    it('needs an editor and a running server', async () => {
        const { client, sendRequest } = fakeClient({ edit });
        await editSelection(() => client);
        expect(vscode.window.showWarningMessage).toHaveBeenCalledWith(expect.stringContaining('open a file'));
        setEditor(new Selection(new Position(0, 0), new Position(1, 0)));
        await editSelection(() => undefined);
        expect(sendRequest).not.toHaveBeenCalled();
        expect(vscode.window.showInputBox).not.toHaveBeenCalled();
    });

    it('says so when the model proposes no change, and reports errors', async () => {
        setEditor(new Selection(new Position(0, 0), new Position(1, 0)));
        await editSelection(() => fakeClient({ edit: { changes: {} } }).client, { instruction: 'x' });
        expect(vscode.window.showInformationMessage).toHaveBeenCalledWith(expect.stringContaining('no change'));
        await editSelection(() => fakeClient(new Error('model not loaded')).client, { instruction: 'x' });
        expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(expect.stringContaining('model not loaded'));
    });
});

describe('setEnabled', () => {
    it('writes fastcoder.enabled to user settings', async () => {
        await setEnabled(false);
        expect(vscode.__test.config['fastcoder.enabled']).toBe(false);
        await setEnabled(true);
        expect(vscode.__test.config['fastcoder.enabled']).toBe(true);
    });

    it('writes to the workspace when the workspace overrides it', async () => {
        vscode.__test.workspaceConfig['fastcoder.enabled'] = true;
        await setEnabled(false);
        expect(vscode.__test.workspaceConfig['fastcoder.enabled']).toBe(false);
        expect(vscode.__test.config['fastcoder.enabled']).toBeUndefined();
    });
});
