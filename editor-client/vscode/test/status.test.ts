import { beforeEach, describe, expect, it, vi } from 'vitest';
vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());

import * as vscodeReal from 'vscode';
import type { VscodeMock } from './vscode.mock';
import { StatusBar, statusView } from '../src/status';

const vscode = vscodeReal as unknown as VscodeMock;

describe('statusView', () => {
    it.each([
        ['loading', '$(sync~spin) FastCoder: loading'],
        ['indexing', '$(sync~spin) FastCoder: indexing'],
        ['ready', '$(check) FastCoder'],
        ['error', '$(error) FastCoder'],
        ['starting', '$(sync~spin) FastCoder'],
        ['stopped', '$(circle-slash) FastCoder: stopped'],
        ['disabled', '$(circle-slash) FastCoder: off'],
    ])('%s -> %s', (state, text) => {
        expect(statusView(state).text).toBe(text);
    });

    it('puts the server message in the tooltip', () => {
        expect(statusView('loading', 'loading qwen2.5-coder-0.5b on cpu').tooltip).toBe(
            'FastCoder: loading qwen2.5-coder-0.5b on cpu',
        );
        expect(statusView('ready').tooltip).toBe('FastCoder: ready');
    });

    it('colours errors', () => {
        expect(statusView('error', 'boom').background).toBe('statusBarItem.errorBackground');
        expect(statusView('ready').background).toBeUndefined();
    });

    it('shows unknown states verbatim', () => {
        expect(statusView('warming').text).toBe('FastCoder: warming');
    });
});

describe('StatusBar', () => {
    beforeEach(() => vscode.__test.reset());

    it('creates a visible right-aligned item that opens the stats', () => {
        const bar = new StatusBar('fastcoder.showStats');
        expect(vscode.window.createStatusBarItem).toHaveBeenCalled();
        expect(bar.item.command).toBe('fastcoder.showStats');
        expect(bar.item.alignment).toBe(vscode.StatusBarAlignment.Right);
        expect((bar.item as unknown as { show: ReturnType<typeof vi.fn> }).show).toHaveBeenCalled();
        expect(bar.item.text).toBe('$(sync~spin) FastCoder');
    });

    it('follows fastcoder/status notifications', () => {
        const bar = new StatusBar();
        bar.onServerStatus({ state: 'indexing', message: 'indexing 120 files' });
        expect(bar.item.text).toBe('$(sync~spin) FastCoder: indexing');
        expect(bar.item.tooltip).toBe('FastCoder: indexing 120 files');
        bar.onServerStatus({ state: 'error', message: 'CUDA out of memory' });
        expect(bar.item.text).toBe('$(error) FastCoder');
        expect(bar.item.backgroundColor).toBeInstanceOf(vscode.ThemeColor);
        expect((bar.item.backgroundColor as unknown as { id: string }).id).toBe('statusBarItem.errorBackground');
        bar.onServerStatus({ state: 'ready', message: '' });
        expect(bar.item.text).toBe('$(check) FastCoder');
        expect(bar.item.backgroundColor).toBeUndefined();
        expect(bar.state).toBe('ready');
    });

    it('ignores malformed notifications', () => {
        const bar = new StatusBar();
        bar.onServerStatus({ state: 'ready' });
        bar.onServerStatus(undefined);
        bar.onServerStatus({ message: 'x' } as never);
        expect(bar.item.text).toBe('$(check) FastCoder');
    });

    it('shows "off" when disabled, but still shows errors', () => {
        const bar = new StatusBar();
        bar.onServerStatus({ state: 'ready', message: 'ok' });
        bar.setEnabled(false);
        expect(bar.item.text).toBe('$(circle-slash) FastCoder: off');
        bar.onServerStatus({ state: 'error', message: 'x' });
        expect(bar.item.text).toBe('$(error) FastCoder');
        bar.setEnabled(true);
        bar.onServerStatus({ state: 'ready', message: 'ok' });
        expect(bar.item.text).toBe('$(check) FastCoder');
    });
});
