import { beforeEach, describe, expect, it, vi } from 'vitest';
vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());

import * as fs from 'fs';
import * as path from 'path';
import * as vscodeReal from 'vscode';
import type { VscodeMock } from './vscode.mock';
import {
    DEFAULTS,
    expandPath,
    needsRestart,
    normalizeSettings,
    readSettings,
    toInitOptions,
} from '../src/settings';

const vscode = vscodeReal as unknown as VscodeMock;

describe('normalizeSettings', () => {
    it('fills defaults for missing values', () => {
        expect(normalizeSettings({})).toEqual(DEFAULTS);
    });

    it('rejects values of the wrong type or outside the enums', () => {
        const s = normalizeSettings({
            enabled: 'yes',
            model: 42,
            dtype: 'float16',
            device: 'tpu',
            packWeights: 'yes',
            method: 'medusa',
            arFallback: 'off',
            maxNewTokens: -3,
            timeBudgetMs: 0,
            serverPath: null,
            pythonPath: ['x'],
            promptLayout: 'spm',
            debounceMs: -5,
            prefetch: 'no',
            midLineBlocks: 'yes',
            stopDegenerate: 'no',
            warmAtCursor: 'off',
            crossFileContext: 1,
            fileHeader: 'sometimes',
            kvCacheMb: 0,
            kvDiskMb: -1,
        });
        expect(s).toEqual(DEFAULTS);
    });

    it('keeps valid values', () => {
        const s = normalizeSettings({
            enabled: false,
            model: ' /models/tiny ',
            dtype: 'bfloat16',
            device: 'cuda',
            packWeights: 'off',
            method: 'pld',
            arFallback: false,
            maxNewTokens: 64.7,
            timeBudgetMs: 250,
            serverPath: '/usr/bin/fastcoder',
            pythonPath: 'python3',
            promptLayout: 'psm',
            debounceMs: 120.5,
            prefetch: false,
            midLineBlocks: true,
            stopDegenerate: false,
            warmAtCursor: false,
            crossFileContext: true,
            fileHeader: false,
            kvCacheMb: 512.9,
            kvDiskMb: 0,
        });
        expect(s).toEqual({
            enabled: false,
            model: '/models/tiny',
            dtype: 'bfloat16',
            device: 'cuda',
            packWeights: 'off',
            method: 'pld',
            arFallback: false,
            maxNewTokens: 64,
            timeBudgetMs: 250,
            serverPath: '/usr/bin/fastcoder',
            pythonPath: 'python3',
            promptLayout: 'psm',
            debounceMs: 120,
            prefetch: false,
            midLineBlocks: true,
            stopDegenerate: false,
            warmAtCursor: false,
            crossFileContext: true,
            fileHeader: false,
            kvCacheMb: 512,
            kvDiskMb: 0,
        });
    });
});

describe('package.json', () => {
    it('declares every setting, with the default the extension uses', () => {
        const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', 'package.json'), 'utf8'));
        const props = pkg.contributes.configuration.properties;
        for (const [key, value] of Object.entries(DEFAULTS)) {
            expect(props[`fastcoder.${key}`], key).toBeDefined();
            expect(props[`fastcoder.${key}`].default, key).toEqual(value);
        }
    });
});

describe('toInitOptions', () => {
    it('maps defaults to the server contract (camelCase), leaving unset values out', () => {
        expect(toInitOptions(DEFAULTS)).toEqual({
            model: 'qwen2.5-coder-0.5b',
            dtype: 'auto',
            device: 'auto',
            packWeights: 'auto',
            method: 'fastcoder',
            arFallback: true,
            maxNewTokens: 128,
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
    });

    it('includes timeBudgetMs and pythonPath when set, never serverPath', () => {
        const opts = toInitOptions({ ...DEFAULTS, timeBudgetMs: 300, pythonPath: '/venv/bin/python', serverPath: '/x' });
        expect(opts.timeBudgetMs).toBe(300);
        expect(opts.pythonPath).toBe('/venv/bin/python');
        expect(opts).not.toHaveProperty('serverPath');
        // JSON-serialisable as-is
        expect(JSON.parse(JSON.stringify(opts))).toEqual(opts);
    });
});

describe('expandPath', () => {
    const env = { VENV: '/opt/venv' };
    it('expands ~, ${userHome}, ${env:X} and ${workspaceFolder}', () => {
        expect(expandPath('~/bin/fastcoder', '/ws', env, '/home/u')).toBe(path.join('/home/u', 'bin/fastcoder'));
        expect(expandPath('${userHome}/x', '/ws', env, '/home/u')).toBe('/home/u/x');
        expect(expandPath('${env:VENV}/bin/python', '/ws', env, '/home/u')).toBe('/opt/venv/bin/python');
        expect(expandPath('${workspaceFolder}/.venv/bin/python', '/ws', env, '/home/u')).toBe('/ws/.venv/bin/python');
    });
    it('resolves relative paths against the workspace folder, leaves bare names alone', () => {
        expect(expandPath('.venv/bin/python', '/ws', env, '/h')).toBe(path.resolve('/ws', '.venv/bin/python'));
        expect(expandPath('python3', '/ws', env, '/h')).toBe('python3');
        expect(expandPath('', '/ws', env, '/h')).toBe('');
    });
});

describe('readSettings (through the mocked vscode API)', () => {
    beforeEach(() => vscode.__test.reset());

    it('reads the fastcoder section', () => {
        Object.assign(vscode.__test.config, {
            'fastcoder.model': '/models/tiny',
            'fastcoder.dtype': 'float32',
            'fastcoder.packWeights': 'auto',
            'fastcoder.maxNewTokens': 8,
            'fastcoder.pythonPath': '${workspaceFolder}/.venv/bin/python',
        });
        const s = readSettings();
        expect(vscode.workspace.getConfiguration).toHaveBeenCalledWith('fastcoder');
        expect(s.model).toBe('/models/tiny');
        expect(s.dtype).toBe('float32');
        expect(s.maxNewTokens).toBe(8);
        expect(s.pythonPath).toBe('/ws/.venv/bin/python');
        expect(toInitOptions(s)).toEqual({
            model: '/models/tiny',
            dtype: 'float32',
            device: 'auto',
            packWeights: 'auto',
            method: 'fastcoder',
            arFallback: true,
            maxNewTokens: 8,
            enabled: true,
            pythonPath: '/ws/.venv/bin/python',
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
    });

    it('works without a workspace folder', () => {
        vscode.workspace.workspaceFolders = undefined;
        vscode.__test.config['fastcoder.serverPath'] = 'fastcoder';
        expect(readSettings().serverPath).toBe('fastcoder');
    });
});

describe('needsRestart', () => {
    const ev = (...keys: string[]) => ({
        affectsConfiguration: (s: string) => keys.some((k) => k === s || k.startsWith(s + '.')),
    });
    it('restarts only for the launch settings', () => {
        expect(needsRestart(ev('fastcoder.serverPath') as never)).toBe(true);
        expect(needsRestart(ev('fastcoder.pythonPath') as never)).toBe(true);
        expect(needsRestart(ev('fastcoder.model') as never)).toBe(false);
        expect(needsRestart(ev('editor.fontSize') as never)).toBe(false);
    });
});
