import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
    ExecFile,
    FsDeps,
    PYTHON_PROBE,
    checkPythonHasFastCoder,
    defaultIsExecutableFile,
    findOnPath,
    resolveServerCommand,
} from '../src/serverCommand';

function fakeDeps(executables: string[], PATH = '/usr/local/bin:/usr/bin', platform: NodeJS.Platform = 'linux'): FsDeps {
    const set = new Set(executables);
    return { env: { PATH }, platform, isExecutableFile: (p) => set.has(p) };
}

describe('resolveServerCommand', () => {
    it('prefers serverPath', () => {
        const r = resolveServerCommand(
            { serverPath: '/opt/fc/bin/fastcoder', pythonPath: '/usr/bin/python3' },
            fakeDeps(['/opt/fc/bin/fastcoder', '/usr/bin/python3', '/usr/bin/fastcoder']),
        );
        expect(r).toEqual({ ok: true, command: '/opt/fc/bin/fastcoder', args: ['serve'], source: 'serverPath' });
    });

    it('looks a bare serverPath up on PATH', () => {
        const r = resolveServerCommand({ serverPath: 'fastcoder-dev' }, fakeDeps(['/usr/bin/fastcoder-dev']));
        expect(r).toMatchObject({ ok: true, command: '/usr/bin/fastcoder-dev', args: ['serve'] });
    });

    it('uses pythonPath -m fastcoder_cli serve when serverPath is unset', () => {
        const r = resolveServerCommand(
            { serverPath: '', pythonPath: '/venv/bin/python' },
            fakeDeps(['/venv/bin/python', '/usr/bin/fastcoder']),
        );
        expect(r).toEqual({
            ok: true,
            command: '/venv/bin/python',
            args: ['-m', 'fastcoder_cli', 'serve'],
            source: 'pythonPath',
        });
    });

    it('resolves a bare pythonPath (python3) on PATH', () => {
        const r = resolveServerCommand({ pythonPath: 'python3' }, fakeDeps(['/usr/bin/python3']));
        expect(r).toMatchObject({ ok: true, command: '/usr/bin/python3', source: 'pythonPath' });
    });

    it('falls back to fastcoder on PATH (first PATH entry wins)', () => {
        const r = resolveServerCommand({}, fakeDeps(['/usr/bin/fastcoder', '/usr/local/bin/fastcoder']));
        expect(r).toEqual({ ok: true, command: '/usr/local/bin/fastcoder', args: ['serve'], source: 'PATH' });
    });

    it('reports a missing serverPath clearly (no fallback to PATH)', () => {
        const r = resolveServerCommand({ serverPath: '/nope/fastcoder' }, fakeDeps(['/usr/bin/fastcoder']));
        expect(r.ok).toBe(false);
        if (!r.ok) {
            expect(r.message).toContain('/nope/fastcoder');
            expect(r.message).toContain('fastcoder.serverPath');
        }
    });

    it('reports a missing Python clearly', () => {
        const r = resolveServerCommand({ pythonPath: '/nope/python' }, fakeDeps([]));
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.message).toMatch(/Python interpreter "\/nope\/python".*fastcoder\.pythonPath/);
    });

    it('reports fastcoder missing from PATH with what to set', () => {
        const r = resolveServerCommand({}, fakeDeps([]));
        expect(r.ok).toBe(false);
        if (!r.ok) {
            expect(r.message).toContain('not found on PATH');
            expect(r.message).toContain('fastcoder.serverPath');
            expect(r.message).toContain('fastcoder.pythonPath');
        }
    });
});

describe('findOnPath', () => {
    it('uses PATHEXT and ; on Windows', () => {
        const deps: FsDeps = {
            env: { Path: 'C:\\Python\\Scripts;C:\\Windows', PATHEXT: '.COM;.EXE;.BAT' },
            platform: 'win32',
            isExecutableFile: (p) => p === 'C:\\Python\\Scripts\\fastcoder.EXE',
        };
        expect(findOnPath('fastcoder', deps)).toBe('C:\\Python\\Scripts\\fastcoder.EXE');
    });

    it('returns undefined with an empty PATH', () => {
        expect(findOnPath('fastcoder', fakeDeps(['/usr/bin/fastcoder'], ''))).toBeUndefined();
    });

    describe('on the real file system', () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fc-path-'));
        const exe = path.join(dir, 'fastcoder');
        const plain = path.join(dir, 'notexec');
        fs.writeFileSync(exe, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
        fs.writeFileSync(plain, 'x', { mode: 0o644 });
        afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

        it('finds an executable and ignores directories / missing files', () => {
            expect(defaultIsExecutableFile(exe)).toBe(true);
            expect(defaultIsExecutableFile(dir)).toBe(false);
            expect(defaultIsExecutableFile(path.join(dir, 'missing'))).toBe(false);
            const deps: FsDeps = { env: { PATH: dir }, platform: process.platform, isExecutableFile: (p) => defaultIsExecutableFile(p) };
            expect(findOnPath('fastcoder', deps)).toBe(exe);
        });

        it.skipIf(process.platform === 'win32')('ignores non-executable files', () => {
            expect(defaultIsExecutableFile(plain)).toBe(false);
        });
    });
});

describe('checkPythonHasFastCoder', () => {
    const fake =
        (error: (Error & { code?: unknown }) | null, stderr = ''): ExecFile =>
        (_file, _args, _opts, cb) => {
            cb(error, '', stderr);
            return undefined;
        };

    it('passes the probe to the interpreter', async () => {
        const execFile = vi.fn(fake(null));
        await expect(checkPythonHasFastCoder('/venv/bin/python', execFile)).resolves.toBeUndefined();
        expect(execFile.mock.calls[0][0]).toBe('/venv/bin/python');
        expect(execFile.mock.calls[0][1]).toEqual(['-c', PYTHON_PROBE]);
    });

    it('says FastCoder is not installed on exit code 3', async () => {
        const err = Object.assign(new Error('Command failed'), { code: 3 });
        const msg = await checkPythonHasFastCoder('/usr/bin/python3', fake(err));
        expect(msg).toContain('does not have FastCoder installed');
        expect(msg).toContain('/usr/bin/python3 -m pip install fastcoder');
    });

    it('reports an interpreter that cannot run', async () => {
        const err = Object.assign(new Error('spawn /x/python ENOENT'), { code: 'ENOENT' });
        const msg = await checkPythonHasFastCoder('/x/python', fake(err));
        expect(msg).toContain('could not run the Python interpreter "/x/python"');
        expect(msg).toContain('ENOENT');
    });

    it('runs the probe for real against a Python that lacks lsp_server (or has it)', async () => {
        const python = findOnPath('python3');
        if (!python) return;
        const msg = await checkPythonHasFastCoder(python);
        // Either installed (undefined) or the clear "not installed" message - never a crash.
        expect(msg === undefined || msg.includes('does not have FastCoder installed')).toBe(true);
    });
});
