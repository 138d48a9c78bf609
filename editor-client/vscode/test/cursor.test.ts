import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());

import type * as vscodeTypes from 'vscode';
import { Position, Selection } from './vscode.mock';
import { CURSOR_NOTIFICATION, CursorReporter, NotifyingClient, REST_MS } from '../src/cursor';

function fakeClient(running = true) {
    const sendNotification = vi.fn(async (_method: string, _params: unknown) => undefined);
    const client = {
        isRunning: () => running,
        sendNotification,
        code2ProtocolConverter: { asUri: (uri: { toString(): string }) => uri.toString() },
    };
    return { client: client as unknown as NotifyingClient, sendNotification };
}

const doc = { languageId: 'python', version: 1, uri: { scheme: 'file', toString: () => 'file:///ws/a.py' } };

function event(line: number, character: number, opts: { empty?: boolean; document?: object } = {}) {
    const active = new Position(line, character);
    const anchor = opts.empty === false ? new Position(line, 0) : active;
    return {
        textEditor: { document: opts.document ?? doc },
        selections: [new Selection(anchor, active)],
    } as unknown as vscodeTypes.TextEditorSelectionChangeEvent;
}

beforeEach(() => {
    vi.useFakeTimers();
    doc.version = 1;
});
afterEach(() => vi.useRealTimers());

describe('CursorReporter', () => {
    it('reports a resting cursor in a notebook cell too', () => {
        const { client, sendNotification } = fakeClient();
        const reporter = new CursorReporter(() => client, () => true, new Set(['python']));
        const cell = { ...doc, uri: { scheme: 'vscode-notebook-cell', toString: () => 'vscode-notebook-cell:/ws/a.ipynb#W1' } };
        reporter.onSelection(event(0, 3, { document: cell }));
        vi.advanceTimersByTime(REST_MS);
        expect(sendNotification).toHaveBeenCalledWith(CURSOR_NOTIFICATION, {
            textDocument: { uri: 'vscode-notebook-cell:/ws/a.ipynb#W1' },
            position: { line: 0, character: 3 },
        });
    });

    it('sends where the cursor rests, once it has stopped moving', () => {
        const { client, sendNotification } = fakeClient();
        const reporter = new CursorReporter(() => client, () => true, new Set(['python']));
        reporter.onSelection(event(3, 4));
        vi.advanceTimersByTime(REST_MS / 2);
        reporter.onSelection(event(7, 2)); // moved on before resting: only here counts
        vi.advanceTimersByTime(REST_MS - 1);
        expect(sendNotification).not.toHaveBeenCalled();
        vi.advanceTimersByTime(1);
        expect(sendNotification).toHaveBeenCalledTimes(1);
        expect(sendNotification).toHaveBeenCalledWith(CURSOR_NOTIFICATION, {
            textDocument: { uri: 'file:///ws/a.py' },
            position: { line: 7, character: 2 },
        });
        reporter.onSelection(event(7, 2)); // the same place again: not repeated
        vi.advanceTimersByTime(REST_MS);
        expect(sendNotification).toHaveBeenCalledTimes(1);
    });

    it('skips selections, other languages, edits while waiting, a stopped client and disabled', () => {
        const { client, sendNotification } = fakeClient();
        let enabled = true;
        const reporter = new CursorReporter(() => client, () => enabled, new Set(['python']));
        reporter.onSelection(event(1, 5, { empty: false }));
        reporter.onSelection(event(1, 5, { document: { ...doc, languageId: 'markdown' } }));
        vi.advanceTimersByTime(REST_MS * 2);
        reporter.onSelection(event(2, 0));
        doc.version = 2; // typed: that edit's own selection event arms the timer again
        vi.advanceTimersByTime(REST_MS * 2);
        enabled = false;
        reporter.onSelection(event(2, 1));
        vi.advanceTimersByTime(REST_MS * 2);
        expect(sendNotification).not.toHaveBeenCalled();
        const stopped = fakeClient(false);
        const other = new CursorReporter(() => stopped.client, () => true, new Set(['python']));
        other.onSelection(event(4, 0));
        vi.advanceTimersByTime(REST_MS * 2);
        expect(stopped.sendNotification).not.toHaveBeenCalled();
        enabled = true;
        reporter.onSelection(event(2, 1, { document: { ...doc, uri: { scheme: 'git', toString: () => 'git:/ws/a.py' } } }));
        vi.advanceTimersByTime(REST_MS * 2); // a document the server is not given: nothing
        expect(sendNotification).not.toHaveBeenCalled();
        reporter.onSelection(event(2, 1));
        reporter.dispose(); // disposed before resting: nothing sent
        vi.advanceTimersByTime(REST_MS * 2);
        expect(sendNotification).not.toHaveBeenCalled();
    });
});
